import { randomInt } from 'node:crypto';
import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';

/**
 * Every form in which a canary part could come back, computed here and independently of the
 * broker's scrubber (a shared bug must not hide itself). A needle is a string an agent, an operator
 * answer or a file must never contain.
 */
export interface Needle {
  /** part/variant/encoding, e.g. `secret/json/base64@1`: which form leaked. */
  readonly label: string;
  readonly text: string;
}

/** A shorter needle could match by chance; every canary part here is far longer. */
export const needleCharsMin = 8;

const alnum = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomAlnum(length: number): string {
  let out = '';
  for (let i = 0; i < length; i += 1) out += alnum[randomInt(alnum.length)];
  return out;
}

/**
 * A random canary of 30 characters: alphanumerics with `+ / = " &` inside, so percent-encoding and
 * JSON string escaping both change it (a scrubber that only knows the raw bytes misses those forms).
 */
export function canarySecret(tag: string): string {
  return `${tag}${randomAlnum(7)}+${randomAlnum(6)}/${randomAlnum(5)}"${randomAlnum(4)}=${randomAlnum(3)}&${randomAlnum(2)}`;
}

export function randomWord(tag: string, length = 10): string {
  return `${tag}${randomAlnum(length)}`;
}

/** The string inside JSON quotes. */
export function jsonEscaped(text: string): string {
  return JSON.stringify(text).slice(1, -1);
}

/** The textual variants a reflection meets first: as sent, inside a JSON dump, inside JSON twice, in a URL. */
export function textVariants(part: string): Array<readonly [string, string]> {
  const variants: Array<readonly [string, string]> = [
    ['raw', part],
    ['json', jsonEscaped(part)],
    ['json2', jsonEscaped(jsonEscaped(part))],
    ['pct', encodeURIComponent(part)],
    ['form', new URLSearchParams({ v: part }).toString().slice(2)],
  ];
  return dedupe(variants);
}

/**
 * The part of base64(prefix + text) that depends only on `text`, for a prefix of `offset` bytes:
 * characters whose 6 bits fall wholly inside the text's bits. Whatever precedes or follows the
 * text in the encoded stream, this core appears verbatim when the text sits at that alignment.
 */
export function base64Core(text: string, offset: 0 | 1 | 2, alphabet: 'base64' | 'base64url'): string {
  const bytes = Buffer.from(text, 'utf8');
  const encoded = Buffer.concat([Buffer.alloc(offset), bytes])
    .toString(alphabet)
    .replace(/=+$/, '');
  const start = Math.ceil((8 * offset) / 6);
  const end = Math.floor((8 * (offset + bytes.length)) / 6);
  return encoded.slice(start, end);
}

function unicodeEscapes(text: string, upper: boolean): string {
  let out = '';
  for (let i = 0; i < text.length; i += 1) {
    const hex = text.charCodeAt(i).toString(16).padStart(4, '0');
    out += `\\u${upper ? hex.toUpperCase() : hex}`;
  }
  return out;
}

/** Every encoded form of one textual variant. */
export function encodedForms(text: string): Array<readonly [string, string]> {
  const forms: Array<readonly [string, string]> = [['plain', text]];
  for (const offset of [0, 1, 2] as const) {
    forms.push([`base64@${offset}`, base64Core(text, offset, 'base64')]);
    forms.push([`base64url@${offset}`, base64Core(text, offset, 'base64url')]);
  }
  const hex = Buffer.from(text, 'utf8').toString('hex');
  forms.push(['hex', hex], ['HEX', hex.toUpperCase()]);
  forms.push(['percent', encodeURIComponent(text)]);
  forms.push(['\\u', unicodeEscapes(text, false)], ['\\U', unicodeEscapes(text, true)]);
  return dedupe(forms);
}

/** All needles for the named parts of one credential. */
export function needlesFor(parts: Readonly<Record<string, string>>): Needle[] {
  const seen = new Set<string>();
  const needles: Needle[] = [];
  for (const [partName, part] of Object.entries(parts)) {
    for (const [variant, text] of textVariants(part)) {
      for (const [encoding, form] of encodedForms(text)) {
        if (form.length < needleCharsMin || seen.has(form)) continue;
        seen.add(form);
        needles.push({ label: `${partName}/${variant}/${encoding}`, text: form });
      }
    }
  }
  return needles;
}

/** Labels of the needles found in any of the texts, each once. */
export function findNeedles(texts: Iterable<string>, needles: readonly Needle[]): string[] {
  const found = new Set<string>();
  for (const text of texts) for (const n of needles) if (text.includes(n.text)) found.add(n.label);
  return [...found];
}

/** Labels of the needles found in a file's bytes. */
export function findNeedlesInBytes(bytes: Buffer, needles: readonly Needle[]): string[] {
  return needles.filter((n) => bytes.includes(Buffer.from(n.text, 'utf8'))).map((n) => n.label);
}

/** Every run of `windowChars` characters of `text` found in `haystack` (a slice oracle: 8 bytes at a time). */
export function windowsFound(haystack: string, text: string, windowChars: number): string[] {
  const hits: string[] = [];
  for (let i = 0; i + windowChars <= text.length; i += 1) {
    const window = text.slice(i, i + windowChars);
    if (haystack.includes(window)) hits.push(`${i}..${i + windowChars}`);
  }
  return hits;
}

/** Decompressed output an agent could ask for is bounded like any decoder should be. */
const inflatedBytesMax = 4 * 1024 * 1024;

/**
 * What a hostile agent does with a string it received: decode it every way it might have been
 * encoded (base64, base64url, hex, percent, JSON escapes) and then inflate the bytes (gzip, deflate,
 * raw deflate, brotli). Each output is one more text to search.
 */
export function agentDecodings(text: string): string[] {
  const out = new Set<string>();
  const bytes: Buffer[] = [];
  if (/^[A-Za-z0-9+/=\s_-]+$/.test(text)) {
    bytes.push(Buffer.from(text, 'base64'));
    for (const skip of [1, 2, 3]) bytes.push(Buffer.from(text.slice(skip), 'base64'));
  }
  if (/^(?:[0-9a-fA-F]{2})+$/.test(text)) bytes.push(Buffer.from(text, 'hex'));
  for (const decoded of [tryDecodeUri(text), tryJsonUnescape(text)])
    if (decoded !== undefined && decoded !== text) out.add(decoded);
  for (const b of bytes) {
    out.add(b.toString('utf8'));
    for (const inflate of [gunzipSync, inflateSync, inflateRawSync, brotliDecompressSync]) {
      try {
        out.add(inflate(b, { maxOutputLength: inflatedBytesMax }).toString('utf8'));
      } catch {
        // Not this coding.
      }
    }
  }
  return [...out];
}

function tryDecodeUri(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

function tryJsonUnescape(text: string): string | undefined {
  if (!text.includes('\\')) return undefined;
  try {
    return JSON.parse(`"${text.replace(/"/g, '\\"')}"`) as string;
  } catch {
    return undefined;
  }
}

function dedupe(pairs: Array<readonly [string, string]>): Array<readonly [string, string]> {
  const seen = new Set<string>();
  return pairs.filter(([, text]) => (seen.has(text) ? false : (seen.add(text), true)));
}
