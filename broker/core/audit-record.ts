/**
 * The byte layouts the journal writes and the verifier checks, in one place so they cannot drift.
 * Pure: callers encode text to UTF-8 themselves (no TextEncoder in pure code).
 *
 * leaf       = u64be(seq) || u32be(len(header)) || header || u32be(len(nonce)) || nonce || ciphertext
 * checkpoint = "postern-audit-checkpoint/1" || 0x00 || u64be(size) || root(32) || u64be(at_ms)
 *
 * The header is the row's plaintext columns as canonical JSON (auditHeaderText), so changing any
 * column of a row changes its leaf. Since journal schema 25 an event that sets its action's outcome carries that
 * outcome as an eighth element (the `outcome` column); every other row's header is the seven elements it always was.
 * The same `u64be(seq) || header` is the AEAD associated data, so a ciphertext moved to another row also fails to
 * decrypt.
 */
export interface AuditHeaderFields {
  readonly at_ms: number;
  readonly action_id: string;
  readonly session_id: string | null;
  readonly ticket: number | null;
  readonly lane: string | null;
  readonly kind: string;
  /** The run whose key encrypted the payload (0: plaintext rows migrated from schema 3). */
  readonly run: number;
  /**
   * The outcome its action folds to at this event, where the event sets one (a DISPATCH_STARTED's unknown, a
   * classification's outcome: eventOutcomeHeader), written since journal schema 25; null or absent otherwise.
   */
  readonly outcome?: string | null;
}

export const checkpointDomain = 'postern-audit-checkpoint/1';

export function auditHeaderText(h: AuditHeaderFields): string {
  const { outcome } = h;
  return outcome === undefined || outcome === null
    ? JSON.stringify([h.at_ms, h.action_id, h.session_id, h.ticket, h.lane, h.kind, h.run])
    : JSON.stringify([h.at_ms, h.action_id, h.session_id, h.ticket, h.lane, h.kind, h.run, outcome]);
}

/**
 * The outcome an event's header carries (AuditHeaderFields.outcome): what its action's outcome is once it folds, for
 * the events that set it (core project: a DISPATCH_STARTED sets unknown, a classification its outcome); null for
 * every other event, which leaves the outcome as it was. So the last header with one names the outcome the action's
 * row must read, which recovery checks at open with no event opened (journal recovery.ts rowRefutation).
 */
export function eventOutcomeHeader(event: {
  readonly kind: string;
  readonly classification?: { readonly outcome: string } | undefined;
}): string | null {
  if (event.classification !== undefined) return event.classification.outcome;
  return event.kind === 'DISPATCH_STARTED' ? 'unknown' : null;
}

export function encodeLeaf(seq: number, header: Uint8Array, nonce: Uint8Array, ciphertext: Uint8Array): Uint8Array {
  const out = new Uint8Array(8 + 4 + header.length + 4 + nonce.length + ciphertext.length);
  const view = new DataView(out.buffer);
  let at = 0;
  view.setBigUint64(at, BigInt(seq));
  at += 8;
  view.setUint32(at, header.length);
  at += 4;
  out.set(header, at);
  at += header.length;
  view.setUint32(at, nonce.length);
  at += 4;
  out.set(nonce, at);
  at += nonce.length;
  out.set(ciphertext, at);
  return out;
}

/** AEAD associated data: binds the ciphertext to its append position and header. */
export function encodeAssociatedData(seq: number, header: Uint8Array): Uint8Array {
  const out = new Uint8Array(8 + header.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(seq));
  out.set(header, 8);
  return out;
}

/** What an Ed25519 checkpoint signature covers. `domain` is the UTF-8 of checkpointDomain. */
export function encodeCheckpointMessage(domain: Uint8Array, size: number, root: Uint8Array, atMs: number): Uint8Array {
  const out = new Uint8Array(domain.length + 1 + 8 + root.length + 8);
  const view = new DataView(out.buffer);
  out.set(domain, 0);
  let at = domain.length + 1;
  view.setBigUint64(at, BigInt(size));
  at += 8;
  out.set(root, at);
  at += root.length;
  view.setBigUint64(at, BigInt(atMs));
  return out;
}
