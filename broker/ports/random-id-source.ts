import { randomBytes } from 'node:crypto';
import type { Clock } from './clock.js';
import type { IdSource } from './id-source.js';

/** Crockford base32: no I, L, O or U, so ids survive being read aloud or retyped. */
const crockfordAlphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const timeChars = 10;
const randomChars = 16;
const timeMsMax = 2 ** 48 - 1;

/**
 * ULID-shaped action ids: 48 bits of milliseconds (so ids sort roughly by creation time in
 * listings) then 80 bits from node:crypto, so two brokers or two restarts never collide. The time
 * prefix is a convenience only; order is always the journal's append position, never the id.
 */
export function createRandomIdSource(clock: Clock): IdSource {
  return {
    newActionId(): string {
      return `act_${encodeTime(clock.nowMs())}${encodeRandom(randomBytes(10))}`;
    },
  };
}

function encodeTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms > timeMsMax) throw new RangeError(`time ${ms} is outside 48 bits`);
  let rest = ms;
  let out = '';
  for (let i = 0; i < timeChars; i += 1) {
    out = crockfordAlphabet.charAt(rest % 32) + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/** 80 bits are exactly 16 five-bit groups. */
function encodeRandom(bytes: Buffer): string {
  let bits = 0n;
  for (const byte of bytes) bits = (bits << 8n) | BigInt(byte);
  let out = '';
  for (let i = 0; i < randomChars; i += 1) {
    out = crockfordAlphabet.charAt(Number(bits & 31n)) + out;
    bits >>= 5n;
  }
  return out;
}
