import type { Clock } from './clock.js';
import type { IdSource } from './id-source.js';
import { RandomPool } from './random-pool.js';

/** Crockford base32: no I, L, O or U, so ids survive being read aloud or retyped. */
const crockfordAlphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const timeChars = 10;
const randomChars = 16;
const randomBytes = 10;
const timeMsMax = 2 ** 48 - 1;

/**
 * ULID-shaped action ids: 48 bits of milliseconds (so ids sort roughly by creation time in
 * listings) then 80 bits from node:crypto, so two brokers or two restarts never collide. The time
 * prefix is a convenience only; order is always the journal's append position, never the id.
 */
export function createRandomIdSource(clock: Clock): IdSource {
  const random = new RandomPool();
  return {
    newActionId(): string {
      return `act_${encodeTime(clock.nowMs())}${encodeRandom(random.take(randomBytes))}`;
    },
  };
}

function encodeTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms > timeMsMax) throw new RangeError(`time ${ms} is outside 48 bits`);
  return encodeBits(ms, timeChars);
}

/** 80 bits are exactly 16 five-bit groups: two 40-bit halves (exact in a double), 8 characters each. */
function encodeRandom(bytes: Buffer): string {
  return encodeBits(bytes.readUIntBE(0, 5), randomChars / 2) + encodeBits(bytes.readUIntBE(5, 5), randomChars / 2);
}

/** The low 5 × `chars` bits of `value`, most significant first. */
function encodeBits(value: number, chars: number): string {
  let rest = value;
  let out = '';
  for (let i = 0; i < chars; i += 1) {
    out = crockfordAlphabet.charAt(rest % 32) + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}
