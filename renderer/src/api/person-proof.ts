import type { Reply } from '../../../broker/contract/index.js';

/**
 * The vault passphrase as this tab's proof of a person (broker/host/web-proof.ts). The sign-in code proves only that
 * the caller read the daemon's terminal, which an agent that starts its own daemon does; so the host refuses a
 * decision from a tab that has not presented the passphrase in this run (OPERATOR_PROOF_REQUIRED on `passphrase`, no
 * `proof_refusal`). The API client then asks the person here, proves the tab (POST /auth/prove) and sends the decision
 * again; cancelled, the refusal stands and nothing was decided. The passphrase goes from the field to the request and
 * is never kept.
 */
export interface ProofRequest {
  /** What is being decided and why the passphrase is asked (the host's words). */
  readonly why: string;
  /** The last try's refusal (a wrong passphrase, a backoff), shown above the field. */
  readonly error: { code: string; message: string } | null;
}

export interface PassphrasePrompt {
  /** Resolves to what the person typed, or null when they cancelled. One request at a time; a second waits. */
  ask(request: ProofRequest): Promise<string | null>;
}

/** A prompt a view answers: it shows `current()` while one is asked and calls `answer`. */
export interface PagePassphrasePrompt extends PassphrasePrompt {
  current(): ProofRequest | null;
  /** A proof that failed outside the dialog (at sign-in): the next ask shows it, then forgets it. */
  remember(error: { code: string; message: string }): void;
  answer(passphrase: string | null): void;
  subscribe(listener: () => void): () => void;
}

export function createPagePassphrasePrompt(): PagePassphrasePrompt {
  let asked: { request: ProofRequest; resolve: (value: string | null) => void } | null = null;
  let remembered: { code: string; message: string } | null = null;
  let queue: Promise<unknown> = Promise.resolve();
  const listeners = new Set<() => void>();
  const changed = (): void => {
    for (const listener of listeners) listener();
  };
  return {
    ask(request) {
      const turn = queue.then(
        () =>
          new Promise<string | null>((resolve) => {
            asked = { request: { ...request, error: request.error ?? remembered }, resolve };
            remembered = null;
            changed();
          }),
      );
      queue = turn.catch(() => undefined);
      return turn;
    },
    current: () => asked?.request ?? null,
    remember(error) {
      remembered = error;
    },
    answer(passphrase) {
      const open = asked;
      if (open === null) return;
      asked = null;
      changed();
      open.resolve(passphrase);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** Whether a refusal is the one a passphrase lifts: a decision from a tab that has not presented it. */
export function asksForPassphrase(reply: Reply<unknown>): boolean {
  return (
    !reply.ok &&
    reply.error.code === 'OPERATOR_PROOF_REQUIRED' &&
    reply.error.proof_refusal === undefined &&
    reply.error.field === 'passphrase'
  );
}
