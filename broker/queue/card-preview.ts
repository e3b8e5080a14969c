/** The first bytes of a body a card shows (before any injection: the agent's bytes only). */
export const bodyPreviewBytesMax = 2048;
/** A command or path is shown up to this many characters. */
export const cardTextCharsMax = 4096;

/**
 * What a card shows beyond the journaled state. Held in memory only, never journaled: the body and
 * the command can hold anything the agent sent. Built before injection, so no secret is in it.
 */
export interface CardPreview {
  /** route:<name> or host:<name>. */
  readonly target: string;
  readonly method: string | null;
  readonly path: string | null;
  readonly command: string | null;
  readonly body_preview: string | null;
  readonly body_bytes: number;
  /** The credential's NAME from configuration, never its value. */
  readonly credential: string;
  readonly retry_of: string | null;
}

export function httpCardPreview(route: { name: string; credential: string }, method: string, path: string, body: Uint8Array): CardPreview {
  return {
    target: `route:${route.name}`,
    method,
    path: bounded(path),
    command: null,
    body_preview: bodyPreview(body),
    body_bytes: body.length,
    credential: route.credential,
    retry_of: null,
  };
}

export function sshCardPreview(host: { name: string; credential: string }, command: string): CardPreview {
  return { target: `host:${host.name}`, method: null, path: null, command: bounded(command), body_preview: null, body_bytes: 0, credential: host.credential, retry_of: null };
}

/**
 * The first bodyPreviewBytesMax bytes as UTF-8 when they decode cleanly (a multi-byte character cut
 * at the edge is dropped), else a note "N bytes of binary". null for an empty body.
 */
export function bodyPreview(body: Uint8Array): string | null {
  if (body.length === 0) return null;
  let head = body.subarray(0, bodyPreviewBytesMax);
  for (let cut = 0; cut < 4; cut += 1) {
    try {
      const text = new TextDecoder('utf-8', { fatal: true }).decode(head);
      return body.length > head.length ? `${text}… (${body.length} bytes)` : text;
    } catch {
      if (body.length <= bodyPreviewBytesMax) break;
      head = head.subarray(0, head.length - 1);
    }
  }
  return `${body.length} bytes of binary`;
}

function bounded(text: string): string {
  return text.length <= cardTextCharsMax ? text : `${text.slice(0, cardTextCharsMax)}…`;
}

/**
 * A preview for a ticket the queue only knows from the journal (after a restart): the sanitized
 * target "route:<name> <METHOD> <path>" or "host:<name> exec <digest>" as ACTION_ACCEPTED recorded it.
 */
export function previewFromTarget(target: string, credentialOf: (targetName: string) => string): CardPreview {
  const [name = target, verb = null, ...rest] = target.split(' ');
  const isHttp = name.startsWith('route:');
  return {
    target: name,
    method: isHttp ? verb : null,
    path: isHttp && rest.length > 0 ? rest.join(' ') : null,
    command: null,
    body_preview: null,
    body_bytes: 0,
    credential: credentialOf(name),
    retry_of: null,
  };
}
