import type { SecretMaterial } from '../ports/index.js';

const redacted = Buffer.from('[REDACTED]');
const secretCharsMin = 4;

/**
 * Every form in which an injected secret could come back from a remote that echoes its input
 * (a debugging endpoint, a redirect that repeats the query): the raw value, its header rendering,
 * base64 for basic, percent-encoded for query. What is returned or stored is scrubbed of all of
 * them; the digest still covers the bytes as received, and `redacted` says it happened.
 */
export function secretForms(secret: SecretMaterial): string[] {
  const forms: string[] = [];
  switch (secret.kind) {
    case 'bearer':
      forms.push(secret.token);
      break;
    case 'header':
      forms.push(secret.value);
      break;
    case 'basic':
      forms.push(secret.password, Buffer.from(`${secret.user}:${secret.password}`).toString('base64'));
      break;
    case 'query':
      forms.push(secret.value, encodeURIComponent(secret.value));
      break;
    case 'ssh_key':
      break;
  }
  return [...new Set(forms.filter((f) => f.length >= secretCharsMin))].sort((a, b) => b.length - a.length);
}

export function scrubBytes(bytes: Buffer, forms: readonly string[]): { bytes: Buffer; redacted: boolean } {
  let out = bytes;
  let changed = false;
  for (const form of forms) {
    const needle = Buffer.from(form);
    let at = out.indexOf(needle);
    if (at < 0) continue;
    const parts: Buffer[] = [];
    let from = 0;
    while (at >= 0) {
      parts.push(out.subarray(from, at), redacted);
      from = at + needle.length;
      at = out.indexOf(needle, from);
    }
    parts.push(out.subarray(from));
    out = Buffer.concat(parts);
    changed = true;
  }
  return { bytes: out, redacted: changed };
}

export function scrubText(text: string, forms: readonly string[]): { text: string; redacted: boolean } {
  let out = text;
  for (const form of forms) out = out.split(form).join('[REDACTED]');
  return { text: out, redacted: out !== text };
}
