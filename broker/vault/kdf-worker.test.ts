import { describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/index.js';
import { deriveKek, newKdfParams, sodiumReady } from './vault-crypto.js';
import { deriveKekOffLoop, kdfQueueMax } from './kdf-worker.js';

/*
 * The Argon2id worker (THREAT-MODEL 4: a CPU-heavy operation an agent can ask for, through wrong unlocks): it derives
 * what deriveKek derives, and never queues more than kdfQueueMax derivations; beyond that a caller is refused at once,
 * RATE_LIMITED, rather than waiting behind a flood.
 */
describe('deriveKekOffLoop', () => {
  it('derives the same key as deriveKek on the loop', async () => {
    await sodiumReady();
    const params = newKdfParams('min');
    const passphrase = new TextEncoder().encode('kdf worker passphrase');
    const offLoop = await deriveKekOffLoop(passphrase, params);
    expect(Buffer.from(offLoop).equals(Buffer.from(deriveKek(passphrase, params)))).toBe(true);
    // The caller's passphrase is the caller's: the worker wiped only its own copy.
    expect(new TextDecoder().decode(passphrase)).toBe('kdf worker passphrase');
  });

  it(`refuses the derivations beyond ${kdfQueueMax} waiting at once with RATE_LIMITED; those queued all complete`, async () => {
    const params = newKdfParams('min');
    const passphrase = new TextEncoder().encode('flood');
    const calls = Array.from({ length: kdfQueueMax + 5 }, () =>
      deriveKekOffLoop(passphrase, params).then(
        (key) => ({ ok: true as const, bytes: key.length }),
        (error: unknown) => ({ ok: false as const, code: isCodedError(error) ? error.code : String(error) }),
      ),
    );
    const settled = await Promise.all(calls);
    expect(settled.slice(0, kdfQueueMax)).toEqual(Array.from({ length: kdfQueueMax }, () => ({ ok: true, bytes: 32 })));
    expect(settled.slice(kdfQueueMax)).toEqual(Array.from({ length: 5 }, () => ({ ok: false, code: 'RATE_LIMITED' })));
    // Once the queue drained, a derivation is taken again.
    await expect(deriveKekOffLoop(passphrase, params)).resolves.toHaveLength(32);
  }, 60_000);
});
