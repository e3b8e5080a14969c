import type { ClosedSet } from './closed-set.js';

/**
 * Where an operator decision came from and how that surface proved a person (or, under the
 * unattended opt-out, that none did). Recorded on every decision event beside the actor's id.
 */
export const OperatorSurface = {
  /** The Electron window: IPC from our own top frame showing our bundled page. */
  desktop: 'desktop',
  /** The operator web UI after sign-in (a per-run session secret sent as Authorization: Bearer). */
  web: 'web',
  /** `postern …` over the data directory's control socket. */
  cli: 'cli',
} as const satisfies ClosedSet<string>;
export type OperatorSurface = keyof typeof OperatorSurface;

export const OperatorAuth = {
  /** A click in the desktop window (a same-user process cannot reach that IPC). */
  desktop_window: 'desktop_window',
  /**
   * A decision the person confirmed in a dialog the Electron main process owns and words from its own
   * data: the renderer can ask for a decision but cannot answer the dialog, so a compromised renderer
   * still needs a person.
   */
  desktop_confirmed: 'desktop_confirmed',
  /**
   * The web UI's session secret, exchanged once for the printed URL token and code. Recorded on decisions until
   * 2026-12-07; it proves only that the caller read the daemon's output, so web decisions now need web_passphrase.
   */
  operator_session: 'operator_session',
  /** A web UI session that presented the vault passphrase in this run (web-proof.ts), checked by Argon2id. */
  web_passphrase: 'web_passphrase',
  /** The vault passphrase typed on the CLI's controlling terminal, checked by Argon2id. */
  vault_passphrase_tty: 'vault_passphrase_tty',
  /** No proof: `operator.unattended_decisions: true`; the actor is the process, never a person. */
  unattended_opt_out: 'unattended_opt_out',
} as const satisfies ClosedSet<string>;
export type OperatorAuth = keyof typeof OperatorAuth;

const authWords: Readonly<Record<OperatorAuth, string>> = {
  desktop_window: 'desktop window',
  desktop_confirmed: 'desktop, confirmed in a dialog',
  operator_session: 'web, operator session',
  web_passphrase: 'web, passphrase in the page',
  vault_passphrase_tty: 'cli, passphrase on tty',
  unattended_opt_out: 'cli, unattended',
};

/**
 * One line for people: `person:alice (cli, passphrase on tty)`, `process:/usr/bin/node pid 42 (cli,
 * unattended)`, or `kind:id` for events recorded before surfaces were (and for policy and broker).
 */
export function actorLabel(actor: {
  readonly kind: string;
  readonly id: string;
  readonly auth?: OperatorAuth | undefined;
}): string {
  const base = `${actor.kind}:${actor.id}`;
  return actor.auth === undefined ? base : `${base} (${authWords[actor.auth]})`;
}

/**
 * Who decided an action, as every surface words it (`postern actions list`, the desktop's Actions list and timeline):
 * `approved by person:alice (…)`, `rejected by …`, `allowed by policy (approval: none)` for a call policy allowed at
 * admission (an action-list row with a decider but no decision event), `expired: nobody decided` for a card that
 * expired undecided, the bare decision when its decider is not known, or null while nothing is decided. The action list's `text` search matches these words
 * (broker/journal/action-list-query.ts words them the same way in SQL).
 */
/** What a card that expired undecided shows for who decided (the action list's `text` search matches it). */
export const expiredWords = 'expired: nobody decided';

export function decisionText(row: {
  readonly decision: string | null;
  readonly decided_by: string | null;
}): string | null {
  // An expiry is nobody's decision: "expired by nobody (expired)" said it twice and named no one.
  if (row.decision === 'expired') return expiredWords;
  if (row.decided_by !== null) return `${row.decision ?? 'allowed'} by ${row.decided_by}`;
  return row.decision;
}
