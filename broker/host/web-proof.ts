import { CodedError, type BrokerApiMethod, type ProofRefusal, type Reply } from '../contract/index.js';
import type { Clock } from '../ports/index.js';
import { createPassphraseAttempts, type PassphraseAttempts, type Vault } from '../vault/index.js';
import {
  checkBehindBackoff,
  errorReply,
  passphraseFromFileRefusal,
  resultOf,
  type PassphraseSource,
} from './control-proof.js';

/**
 * What proves a person in the operator web UI (THREAT-MODEL 3). The sign-in code proves only that the caller read the
 * daemon's output: a same-user agent that kills the person's daemon and starts its own on the data directory (under a
 * pty it holds) reads that daemon's URL and code, signs in, and would decide as the person. So a web session decides
 * only after it presented the vault passphrase in this run — at the page's own unlock, at the vault's creation, or in
 * the page's "confirm it is you" prompt (`POST /auth/prove`) — checked with the vault's Argon2id behind a backoff. A
 * passphrase read from a file proves no one (every process of the user reads it), so a daemon whose passphrase came
 * from a file takes no web decision at all, as its control socket takes none; with no vault there is no person's
 * secret yet, and only creating the vault is taken.
 */
export interface WebProof {
  /** Why no web session can decide now whatever it presented, or undefined: the reply to send instead. */
  refusal(method: BrokerApiMethod): Reply<never> | undefined;
  /** A session's proof: the passphrase opens this vault (the caller marks the session), or the reply to send. */
  prove(passphrase: string): Promise<Reply<{ proven: true }>>;
  /** The page's unlock, behind the same backoff (its passphrase proves the session when it opens the vault). */
  gated(run: () => Promise<Reply<unknown>>): Promise<Reply<unknown>>;
  /** Whether a passphrase presented now proves a person (none read from a file in this run). */
  provable(): boolean;
}

/** The one backoff key of the web surface: every tab of the operator UI shares it, so a flood waits as one caller. */
const webCaller = 'web';

export function createWebProof(options: {
  vault: Pick<Vault, 'state' | 'verifyPassphrase'>;
  passphraseSource: Pick<PassphraseSource, 'fromFile'>;
  clock: Clock;
  attempts?: PassphraseAttempts;
}): WebProof {
  const attempts = options.attempts ?? createPassphraseAttempts(options.clock);
  const gated = async (run: () => Promise<Reply<unknown>>): Promise<Reply<unknown>> =>
    (await checkBehindBackoff(attempts, webCaller, async () => {
      const reply = await run();
      return { result: resultOf(reply), reply };
    })) ?? errorReply(new Error('the check gave no answer'));
  return {
    provable: () => !options.passphraseSource.fromFile(),
    refusal(method) {
      if (options.passphraseSource.fromFile()) return passphraseFromFileRefusal(method);
      if (options.vault.state() === 'uninitialized') return noVaultRefusal(method);
      return undefined;
    },
    async prove(passphrase) {
      if (options.passphraseSource.fromFile()) return withProofRefusal(fromFileProof, 'passphrase_from_file');
      if (options.vault.state() === 'uninitialized') return withProofRefusal(noVaultProof, 'no_vault');
      const refused = await checkBehindBackoff(attempts, webCaller, async () => {
        const bytes = Buffer.from(passphrase, 'utf8');
        try {
          if (await options.vault.verifyPassphrase(bytes)) return { result: 'correct' };
        } finally {
          bytes.fill(0);
        }
        const wrong = new CodedError(
          'VAULT_PASSPHRASE_INVALID',
          'the passphrase does not open this vault; this tab still cannot decide',
          { field: 'passphrase' },
        );
        return { result: 'wrong', reply: errorReply(wrong) };
      });
      return refused === undefined ? { ok: true, value: { proven: true } } : (refused as Reply<never>);
    },
    gated,
  };
}

/** The refusal of a decision from a session that has not presented the passphrase: the page asks for it and retries. */
export function webPassphraseRequired(method: BrokerApiMethod): Reply<never> {
  return errorReply(
    new CodedError(
      'OPERATOR_PROOF_REQUIRED',
      `${method} is a decision, and this tab has not shown the vault passphrase in this run of the broker: type it in ` +
        'the page (Confirm it is you). The sign-in code proves no person on its own: whoever starts the daemon reads ' +
        'it. Nothing was decided.',
      { field: 'passphrase' },
    ),
  );
}

function noVaultRefusal(method: BrokerApiMethod): Reply<never> {
  return withProofRefusal(
    `${method} is a decision, and this data directory has no vault yet: its passphrase is what proves a person ` +
      'here. Create the vault first (the Vault tab); nothing was decided.',
    'no_vault',
  );
}

/** The answers of `POST /auth/prove` that no passphrase changes (the decisions' own say which method was refused). */
const fromFileProof =
  'The vault passphrase proves no person on this broker: it was read from a file in this run (--passphrase-file, ' +
  'POSTERN_PASSPHRASE_FILE or `vault unlock --passphrase-file`), which any process of this user can read, so this ' +
  'tab still decides nothing. Start the daemon without the file and unlock it at a terminal or in the page.';
const noVaultProof =
  'This data directory has no vault yet, so there is no passphrase to present: create the vault first (the Vault tab).';

function withProofRefusal(message: string, refusal: ProofRefusal): Reply<never> {
  return {
    ok: false,
    error: { code: 'OPERATOR_PROOF_REQUIRED', message, field: 'passphrase', proof_refusal: refusal },
  };
}

/** The web proof of a broker runtime: its vault and its from-file latch (the one its control socket reads). */
export function webProofFor(
  runtime: { readonly vault: Pick<Vault, 'state' | 'verifyPassphrase'>; readonly passphraseSource: PassphraseSource },
  clock: Clock,
): WebProof {
  return createWebProof({ vault: runtime.vault, passphraseSource: runtime.passphraseSource, clock });
}
