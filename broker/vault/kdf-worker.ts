import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { CodedError } from '../contract/index.js';
import { checkKdfParams, keyBytes, type KdfParams } from './vault-crypto.js';

/**
 * Argon2id off the event loop (THREAT-MODEL 4): a derivation takes ~1 s and 256 MiB at 'moderate';
 * on the loop, every wrong unlock an agent sends stalls every operator and agent call for that
 * long. One worker thread, started on first use, derives one key at a time; callers queue.
 *
 * The worker is plain CommonJS evaluated from a string and loads libsodium by its resolved path, so
 * it runs the same from the TypeScript sources (tsx, vitest) and from a bundle.
 */
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const sodium = require(workerData.sodiumPath);
parentPort.on('message', async (m) => {
  try {
    await sodium.ready;
    const key = sodium.crypto_pwhash(m.keyBytes, m.passphrase, m.salt, m.opslimit, m.memlimit, sodium.crypto_pwhash_ALG_ARGON2ID13);
    sodium.memzero(m.passphrase);
    parentPort.postMessage({ id: m.id, key }, [key.buffer]);
  } catch {
    m.passphrase.fill(0);
    parentPort.postMessage({ id: m.id, failed: true });
  }
});
`;

/** Derivations waiting for the worker; beyond this a caller is refused at once (the gate in front keeps it far lower). */
export const kdfQueueMax = 16;

interface Pending {
  resolve: (key: Uint8Array) => void;
  reject: (error: Error) => void;
}

let worker: Worker | undefined;
let nextId = 1;
const pending = new Map<number, Pending>();

function failAll(): void {
  for (const p of pending.values()) p.reject(new CodedError('INTERNAL', 'the key derivation worker stopped'));
  pending.clear();
  worker = undefined;
}

function theWorker(): Worker {
  if (worker !== undefined) return worker;
  const sodiumPath = createRequire(import.meta.url).resolve('libsodium-wrappers-sumo');
  const started = new Worker(workerSource, { eval: true, workerData: { sodiumPath } });
  started.on('message', (m: { id: number; key?: Uint8Array; failed?: boolean }) => {
    const waiting = pending.get(m.id);
    pending.delete(m.id);
    // Nothing waits: an idle worker must not keep a CLI process or a closing daemon alive.
    if (pending.size === 0) started.unref();
    if (waiting === undefined) {
      m.key?.fill(0);
      return;
    }
    if (m.key === undefined || m.key.length !== keyBytes)
      waiting.reject(new CodedError('INTERNAL', 'the key derivation failed'));
    else waiting.resolve(m.key);
  });
  started.on('error', failAll);
  started.on('exit', () => {
    if (worker === started) failAll();
  });
  worker = started;
  return started;
}

/**
 * The key-encryption key from the passphrase, as `deriveKek` computes it, on the worker thread.
 * The caller still owns (and wipes) `passphrase`; the worker wipes its copy.
 */
export function deriveKekOffLoop(passphrase: Uint8Array, params: KdfParams): Promise<Uint8Array> {
  checkKdfParams(params);
  if (pending.size >= kdfQueueMax)
    return Promise.reject(
      new CodedError('RATE_LIMITED', 'too many passphrase checks are waiting; retry later', { field: 'passphrase' }),
    );
  const id = nextId++;
  const thread = theWorker();
  return new Promise<Uint8Array>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    thread.ref();
    const copy = new Uint8Array(passphrase);
    thread.postMessage({
      id,
      keyBytes,
      passphrase: copy,
      salt: params.salt,
      opslimit: params.opslimit,
      memlimit: params.memlimit,
    });
    // postMessage cloned it; ours is no longer needed.
    copy.fill(0);
  });
}
