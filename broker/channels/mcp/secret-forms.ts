/**
 * The forms of a server's secrets searched for in what its child writes to stderr, before a line reaches the
 * broker log. broker/actions/secret-scrubber.ts (the full scrubber over decoded views) is out of this folder's
 * reach under the layering, and stderr is a log, not a result: an exact match over the common encodings is the
 * bound here — the raw bytes, base64 and base64url at every byte alignment, hex in either case, percent- and
 * JSON-escaped text. Forms shorter than `formCharsMin` are not searched (they would cut ordinary words).
 */
export const redacted = '[redacted]';
const formCharsMin = 4;

export class SecretForms {
  private readonly forms: readonly string[];

  constructor(secrets: readonly Buffer[]) {
    const all = new Set<string>();
    for (const secret of secrets) for (const form of formsOf(secret)) if (form.length >= formCharsMin) all.add(form);
    // Longest first, so a form that contains another is replaced whole.
    this.forms = [...all].sort((a, b) => b.length - a.length);
  }

  /** The longest form: a cut line keeps this much past its end while scrubbing, so no form is split unseen. */
  get longest(): number {
    return this.forms[0]?.length ?? 0;
  }

  scrub(text: string): string {
    let out = text;
    for (const form of this.forms) if (out.includes(form)) out = out.split(form).join(redacted);
    return out;
  }

  /** `text` cut to `charsMax`, with any trailing start of a form (cut in half by the limit) removed too. */
  scrubAndCut(text: string, charsMax: number): string {
    const scrubbed = this.scrub(text);
    return scrubbed.length <= charsMax ? scrubbed : this.dropTrailingStart(scrubbed.slice(0, charsMax));
  }

  /** `text` without a start of any form at its end: for text that was cut at an arbitrary byte. */
  dropTrailingStart(text: string): string {
    let out = text;
    for (const form of this.forms) {
      for (let k = Math.min(form.length - 1, out.length); k > 0; k--) {
        if (out.endsWith(form.slice(0, k))) {
          out = out.slice(0, out.length - k);
          break;
        }
      }
    }
    return out;
  }
}

function formsOf(secret: Buffer): string[] {
  const text = secret.toString('utf8');
  const hex = secret.toString('hex');
  const forms = [text, hex, hex.toUpperCase(), encodeURIComponent(text), JSON.stringify(text).slice(1, -1)];
  for (let shift = 0; shift < 3; shift++) {
    const b64 = stableBase64(secret, shift);
    forms.push(b64, b64.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return forms;
}

/**
 * The base64 characters that depend only on `secret`'s bytes when it sits `shift` bytes into a longer blob: the
 * first characters mix in the bytes before it and the last ones the bytes after it, so both ends are dropped.
 */
function stableBase64(secret: Buffer, shift: number): string {
  const encoded = Buffer.concat([Buffer.alloc(shift), secret])
    .toString('base64')
    .replace(/=+$/, '');
  const bytes = shift + secret.length;
  const start = shift === 0 ? 0 : shift === 1 ? 2 : 3;
  // A trailing group of r bytes (1 or 2) has exactly r characters that depend on it alone.
  const end = Math.floor(bytes / 3) * 4 + (bytes % 3);
  return encoded.slice(start, end);
}
