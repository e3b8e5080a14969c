/**
 * The deepest nesting of objects and arrays in a JSON text, scanning bytes (strings skipped,
 * escapes honoured), stopping as soon as `limit` is exceeded. Runs before JSON.parse so a hostile
 * `[[[[…` never reaches a recursive parser, validator or serializer downstream.
 */
export function jsonDepthExceeds(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i += 1) {
    const byte = bytes[i];
    if (inString) {
      if (byte === 0x5c)
        i += 1; // backslash: skip the escaped byte
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if (byte === 0x7b || byte === 0x5b) {
      depth += 1;
      if (depth > limit) return true;
    } else if (byte === 0x7d || byte === 0x5d) {
      depth -= 1;
    }
  }
  return false;
}
