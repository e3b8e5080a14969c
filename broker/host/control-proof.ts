import { readlinkSync } from 'node:fs';
import type { Socket } from 'node:net';
import { readPeerCredentials } from '../agent/index.js';
import {
  CodedError,
  controlSocketRefusedMethods,
  isCodedError,
  isDecisionMethod,
  type BrokerApiMethod,
  type Reply,
} from '../contract/index.js';
import type { Clock } from '../ports/index.js';
import { createPassphraseAttempts, type AttemptResult, type PassphraseAttempts, type Vault } from '../vault/index.js';
import type { OperatorCaller } from './operator-handlers.js';

/**
 * Who may decide through the control socket (THREAT-MODEL 3, "only a person decides"). The socket
 * is reachable by every process of the user, the agent's detached children included (double fork,
 * setsid: no ancestry to find), so a decision needs a person's proof: the vault passphrase, which
 * the CLI reads only from its controlling terminal and which the daemon checks with the vault's own
 * Argon2id, on a worker thread, behind a per-uid backoff. `vault.unlock` is its own proof. Reads
 * need none. With `operator.unattended_decisions` a decision without proof is accepted and the
 * caller is the process the kernel names, never a person. A broker unlocked at start with a passphrase
 * read from a file (`--passphrase-file`, POSTERN_PASSPHRASE_FILE) takes no passphrase as a person's
 * proof: every process of the user can read that file, the agent's included.
 */
export interface ControlProof {
  /** Runs `execute` for a read at once; for a decision, once the caller proved a person (or the opt-out names the process). */
  decide(
    socket: Socket,
    method: BrokerApiMethod,
    input: unknown,
    proof: string | undefined,
    execute: (caller?: OperatorCaller) => Promise<Reply<unknown>>,
  ): Promise<Reply<unknown>>;
  /**
   * A client unlocked this broker with a passphrase it read from a file (`vault unlock --passphrase-file`,
   * POSTERN_PASSPHRASE_FILE): from now on, for the rest of the run, no passphrase is a person's proof here. Never undone:
   * a client that says so untruly only makes the broker stricter.
   */
  passphraseReadFromFile(): void;
}

const personOnCli: OperatorCaller = { surface: 'cli', auth: 'vault_passphrase_tty' };

/**
 * Whether this run's vault passphrase has been read from a file (at start, or by a later `vault unlock
 * --passphrase-file`): from then on no passphrase proves a person, on the control socket or in the operator UI
 * (web-proof.ts), for the rest of the run. One latch for both surfaces.
 */
export interface PassphraseSource {
  fromFile(): boolean;
  /** Never undone: a client that says so untruly only makes the broker stricter. */
  readFromFile(): void;
}

export function createPassphraseSource(fromFileAtStart: boolean): PassphraseSource {
  let fromFile = fromFileAtStart;
  return {
    fromFile: () => fromFile,
    readFromFile: () => {
      fromFile = true;
    },
  };
}

/**
 * Whether the unattended opt-out holds now: `unverified` when postern.yaml asks for it but the configuration in force
 * is not yet known to be one a person accepted (its seal is checked at unlock): a forged opt-out is not honoured.
 */
export type UnattendedDecisions = 'on' | 'off' | 'unverified';

export function createControlProof(options: {
  vault: Vault;
  clock: Clock;
  unattendedDecisions: () => UnattendedDecisions;
  /**
   * The vault was unlocked at start with a passphrase read from a file (the headless start path): presenting it proves
   * no person, for this broker's whole run (a later unlock, of a locked or an unlocked vault, does not change it). A
   * later unlock whose client read its passphrase from a file latches the same (passphraseReadFromFile).
   */
  passphraseFromFile?: boolean;
  /** The latch shared with the operator UI's proof; without it, one of this proof's own from passphraseFromFile. */
  passphraseSource?: PassphraseSource;
  attempts?: PassphraseAttempts;
}): ControlProof {
  const source = options.passphraseSource ?? createPassphraseSource(options.passphraseFromFile === true);
  const attempts = options.attempts ?? createPassphraseAttempts(options.clock);

  const gated = (
    uid: number,
    check: () => Promise<{ result: AttemptResult; reply?: Reply<unknown> }>,
  ): Promise<Reply<unknown> | undefined> => checkBehindBackoff(attempts, `uid:${uid}`, check);

  return {
    passphraseReadFromFile() {
      source.readFromFile();
    },
    async decide(socket, method, input, proof, execute) {
      // Before any proof or opt-out is looked at: no passphrase exists yet to prove anything with.
      if (controlSocketRefusedMethods.has(method)) return errorReply(refusedHere(method));
      if (!isDecisionMethod(method)) return execute();
      let peer: { uid: number; pid: number };
      try {
        peer = readPeerCredentials(socket);
      } catch {
        // Not knowing who asks is not a reason to trust them.
        return errorReply(new CodedError('PEER_REFUSED', 'the control socket could not identify its peer'));
      }
      // The unlock's passphrase is its own proof; the unlock itself checks it (off the loop).
      if (method === 'vault.unlock') {
        const answered = await gated(peer.uid, async () => {
          const reply = await execute(personOnCli);
          return { result: resultOf(reply), reply };
        });
        return answered ?? errorReply(new CodedError('INTERNAL', 'the unlock gave no answer'));
      }
      // Refused before it is checked: the answer says nothing about the passphrase either way.
      if (proof !== undefined && source.fromFile()) return passphraseFromFileRefusal(method);
      if (proof !== undefined) {
        const passphrase = Buffer.from(proof, 'utf8');
        const refused = await gated(peer.uid, async () => {
          try {
            if (await options.vault.verifyPassphrase(passphrase)) return { result: 'correct' };
          } finally {
            passphrase.fill(0);
          }
          return {
            result: 'wrong',
            reply: errorReply(
              new CodedError(
                'VAULT_PASSPHRASE_INVALID',
                'the passphrase does not open this vault; nothing was decided',
                { field: 'proof' },
              ),
            ),
          };
        });
        // Proven: the decision runs outside the gate (a retry may wait on a remote).
        return refused ?? execute(personOnCli);
      }
      return decideUnproven(method, peer.pid, options.unattendedDecisions(), source.fromFile(), execute);
    },
  };
}

/** A decision that came without a passphrase: accepted as the process under the opt-out, refused otherwise. */
function decideUnproven(
  method: BrokerApiMethod,
  pid: number,
  unattended: UnattendedDecisions,
  passphraseFromFile: boolean,
  execute: (caller?: OperatorCaller) => Promise<Reply<unknown>>,
): Promise<Reply<unknown>> | Reply<unknown> {
  if (unattended === 'on')
    return execute({
      surface: 'cli',
      auth: 'unattended_opt_out',
      process: { exe: exeOf(pid), pid },
    });
  if (passphraseFromFile) return passphraseFromFileRefusal(method);
  if (unattended === 'unverified') {
    return errorReply(
      new CodedError(
        'OPERATOR_PROOF_REQUIRED',
        `${method} is a decision; postern.yaml asks for unattended decisions, but that holds only once the vault is unlocked and the ` +
          'configuration is verified as the one a person accepted (docs/config.md). Unlock first, or decide with the passphrase in a terminal.',
        { field: 'proof' },
      ),
    );
  }
  return errorReply(
    new CodedError(
      'OPERATOR_PROOF_REQUIRED',
      `${method} is a decision and needs a person: run it in a terminal (it asks for the vault passphrase there), or decide in the desktop window or the operator UI. ` +
        'For unattended use (CI) set `operator: { unattended_decisions: true }` in postern.yaml; such decisions are journaled as the process, not a person.',
      { field: 'proof' },
    ),
  );
}

/**
 * THREAT-MODEL 3: a passphrase every process of the user can read is no person's proof; say so, and what does prove one.
 * `proof_refusal` tells a client (the CLI) not to ask the person for a passphrase that would be refused again.
 */
export function passphraseFromFileRefusal(method: BrokerApiMethod): Reply<never> {
  const refusal = new CodedError(
    'OPERATOR_PROOF_REQUIRED',
    `${method} is a decision and needs a person, but this broker's vault passphrase was read from a file at start ` +
      '(--passphrase-file or POSTERN_PASSPHRASE_FILE), which any process of this user can read, an agent too: presenting it ' +
      'proves no person, so nothing was decided (here or in the operator UI, where the sign-in code proves no person ' +
      'either: whoever starts a daemon reads it). Start the daemon without a passphrase file and unlock it from a ' +
      'terminal with `postern vault unlock`, or in the operator UI. For unattended use (CI) set ' +
      '`operator: { unattended_decisions: true }` in postern.yaml; such decisions are journaled as the process, not a person.',
    { field: 'proof' },
  );
  const reply = errorReply(refusal);
  return reply.ok ? reply : { ok: false, error: { ...reply.error, proof_refusal: 'passphrase_from_file' } };
}

function refusedHere(method: BrokerApiMethod): CodedError {
  return new CodedError(
    'UNSUPPORTED_ACTION',
    `${method} is not accepted on the control socket (any process of this user reaches it, an agent too): create the vault with ` +
      '`postern vault init` in a terminal, then `postern vault unlock`; or in the desktop window or the signed-in operator UI (docs/vault.md).',
    { field: 'method' },
  );
}

/**
 * One passphrase check under the backoff `attempts` keeps for `key` (a uid on the control socket, the operator UI as one
 * caller: web-proof.ts): refused at once while the gate is closed; `check` says whether the passphrase was right and
 * what to answer (undefined: go on), and a refusal carries how long the next try must wait.
 */
export async function checkBehindBackoff(
  attempts: PassphraseAttempts,
  key: string,
  check: () => Promise<{ result: AttemptResult; reply?: Reply<unknown> }>,
): Promise<Reply<unknown> | undefined> {
  const admission = attempts.admit(key);
  if (!admission.ok) return backoffReply(admission.retryAfterMs);
  let checked: { result: AttemptResult; reply?: Reply<unknown> };
  try {
    checked = await check();
  } catch (error) {
    attempts.settle(key, 'unchecked');
    return errorReply(error);
  }
  const waitMs = attempts.settle(key, checked.result);
  const reply = checked.reply;
  if (reply !== undefined && !reply.ok && waitMs > 0) reply.error.retry_after_ms = waitMs;
  return reply;
}

export function resultOf(reply: Reply<unknown>): AttemptResult {
  if (reply.ok) return 'correct';
  return reply.error.code === 'VAULT_PASSPHRASE_INVALID' ? 'wrong' : 'unchecked';
}

function exeOf(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return null;
  }
}

function backoffReply(retryAfterMs: number): Reply<never> {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return {
    ok: false,
    error: {
      code: 'PASSPHRASE_BACKOFF',
      message: `too many wrong passphrases (or one is being checked); nothing was checked, retry in ${seconds} s`,
      field: 'proof',
      retry_after_ms: retryAfterMs,
    },
  };
}

export function errorReply(error: unknown): Reply<never> {
  if (isCodedError(error)) {
    return {
      ok: false,
      error: { code: error.code, message: error.message, ...(error.field === undefined ? {} : { field: error.field }) },
    };
  }
  // Not a coded error: a bug. Say so without passing on a message that could carry anything.
  return { ok: false, error: { code: 'INTERNAL', message: 'the control request failed unexpectedly' } };
}
