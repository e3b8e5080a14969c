import type { BrokerApi, Reply, SessionSummary } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';
import { callFinished, callStarted, emptyCallBook, type CallBook } from './operator-call.js';

export interface SessionsView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  /** As last listed (kept, as stale, beside a refresh error). */
  sessions: SessionSummary[];
  error: ReplyError | null;
  replies: number;
  calls: CallBook<string>;
}

export type SessionsEvent =
  | { type: 'requested' }
  | { type: 'received'; reply: Reply<BrokerApi['sessions.list']['output']> }
  | { type: 'call_started'; sessionId: string; call: string }
  | { type: 'call_finished'; sessionId: string; call: string; reply: Reply<unknown>; message: string };

export const initialSessionsView: SessionsView = {
  phase: 'idle',
  sessions: [],
  error: null,
  replies: 0,
  calls: emptyCallBook(),
};

/** Pure: the next view from the current one and one event. */
export function sessionsReducer(view: SessionsView, event: SessionsEvent): SessionsView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok
        ? { ...view, phase: 'ready', sessions: event.reply.value.sessions, error: null, replies: view.replies + 1 }
        : { ...view, phase: 'error', error: event.reply.error, replies: view.replies + 1 };
    case 'call_started':
      return { ...view, calls: callStarted(view.calls, event.sessionId, event.call) };
    case 'call_finished':
      return { ...view, calls: callFinished(view.calls, event.sessionId, event.call, event.reply, event.message) };
  }
}

const statusOrder: Record<SessionSummary['status'], number> = { pending: 0, approved: 1, revoked: 2, ended: 3 };

/**
 * Sessions for the view: those waiting for a person first, then live ones, then revoked and
 * ended; newest first within each.
 */
export function orderSessions(sessions: readonly SessionSummary[]): SessionSummary[] {
  return [...sessions].sort(
    (a, b) =>
      statusOrder[a.status] - statusOrder[b.status] ||
      b.started_at_ms - a.started_at_ms ||
      (a.session_id < b.session_id ? -1 : 1),
  );
}

/**
 * How many sessions wait for a person's approval (the tab's badge). Given where session approval is
 * used, a pending session whose approval would change nothing is not counted: nothing waits for it.
 */
export function pendingSessionCount(sessions: readonly SessionSummary[], use?: SessionApprovalUse): number {
  return sessions.filter((s) => s.status === 'pending' && (use === undefined || sessionStanding(s, use).approvable))
    .length;
}

/** The parts of config.show that say which entries need a session's approval. */
export interface ApprovalEntries {
  routes: ReadonlyArray<{ name: string; approval: string; rules?: ReadonlyArray<{ approval?: string }> }>;
  ssh_hosts: ReadonlyArray<{ name: string; approval: string; commands: number }>;
}

/**
 * Where a session's approval matters in the configuration the broker runs: entries whose approval is
 * `session` (or a rule of theirs says so), and SSH hosts whose command rules config.show does not
 * itemize (they may). Unknown until config.show answered.
 */
export interface SessionApprovalUse {
  known: boolean;
  entries: string[];
  maybe: string[];
}

export function sessionApprovalUse(config: ApprovalEntries | null): SessionApprovalUse {
  if (config === null) return { known: false, entries: [], maybe: [] };
  const entries: string[] = [];
  const maybe: string[] = [];
  for (const route of config.routes) {
    if (route.approval === 'session' || route.rules?.some((rule) => rule.approval === 'session') === true)
      entries.push(route.name);
  }
  for (const host of config.ssh_hosts) {
    if (host.approval === 'session') entries.push(`ssh ${host.name}`);
    else if (host.commands > 0) maybe.push(`ssh ${host.name}`);
  }
  return { known: true, entries, maybe };
}

/** What the Sessions view says about one session: its state in words, whether Approve would change anything, and what. */
export interface SessionStanding {
  label: string;
  tone: SessionSummary['status'] | 'not_needed' | 'unconfirmed';
  approvable: boolean;
  explanation: string;
}

const perCallWords = 'per_call calls still get a card each, and approval: none calls run in their lane';

export function sessionStanding(session: SessionSummary, use: SessionApprovalUse): SessionStanding {
  const unchecked = uncheckedStanding(session);
  if (unchecked !== undefined) return unchecked;
  const where = [...use.entries, ...use.maybe.map((name) => `${name} (command rules)`)];
  const matters = !use.known || where.length > 0;
  const scope = use.known ? `${where.join(', ')}` : 'routes and hosts with approval: session';
  switch (session.status) {
    case 'pending':
      if (!matters) {
        return {
          label: 'no approval needed',
          tone: 'not_needed',
          approvable: false,
          explanation:
            `No route or SSH host uses approval: session, so approving this process would change nothing: its ${perCallWords}. ` +
            'Approval would matter once an entry uses approval: session.',
        };
      }
      return {
        label: 'pending',
        tone: 'pending',
        approvable: true,
        explanation:
          `Approving lets this process's calls on ${scope} run without a card, for as long as the process lives (or the session grant lasts); ` +
          `its ${perCallWords}.${session.pending > 0 ? ` ${session.pending} of its calls are not sent yet.` : ''}`,
      };
    case 'approved':
      return {
        label: 'approved',
        tone: 'approved',
        approvable: false,
        explanation: matters
          ? `Its calls on ${scope} run without a card; its ${perCallWords}.`
          : `No route or SSH host uses approval: session, so this approval changes nothing yet: its ${perCallWords}.`,
      };
    case 'revoked':
      return {
        label: 'revoked',
        tone: 'revoked',
        approvable: false,
        explanation: 'Its new calls are refused (SESSION_REVOKED); what it had not sent was cancelled.',
      };
    case 'ended':
      return {
        label: 'ended',
        tone: 'ended',
        approvable: false,
        explanation: 'The process is gone; the same agent started again is a new session.',
      };
  }
}

const eachCallCards = 'each of its calls gets a card';

/**
 * A session whose record is not the journal's own (SessionRecordCheck): an earlier run's row that its sealed events
 * have not confirmed is shown as the file's word, never as a person's approval, and offers no Approve (a decision
 * needs the record it decides on); undefined for the ordinary standing.
 */
function uncheckedStanding(session: SessionSummary): SessionStanding | undefined {
  const fileSays = `the journal file says ${[session.status, ...sessionDecisionWords(session)].join(', ')}`;
  switch (session.record) {
    case 'confirmed':
      return undefined;
    case 'unconfirmed':
      return {
        label: 'unconfirmed',
        tone: 'unconfirmed',
        approvable: false,
        explanation:
          `An earlier run's session, read from the journal file (${fileSays}), which any process of this user could have edited while no broker ran. ` +
          `The journal confirms it from its own sealed events, which open only while the vault is unlocked; until then nothing it says is acted on, and ${eachCallCards}.`,
      };
    case 'unverifiable':
      return {
        label: 'unconfirmed',
        tone: 'unconfirmed',
        approvable: false,
        explanation:
          `An earlier run's session, read from the journal file (${fileSays}), and its own sealed events do not confirm it (the daemon's log says why): ` +
          `nothing it says is acted on in this run, and ${eachCallCards}.`,
      };
    case 'approval_withheld':
      if (session.status !== 'approved' && session.status !== 'pending') return undefined;
      return {
        label: session.status === 'approved' ? 'approval not used' : 'pending',
        tone: 'unconfirmed',
        approvable: false,
        explanation:
          'Its record is confirmed from its sealed events, but when this run started the journal file named another process for it, which may have joined it: ' +
          `no approval of it is acted on in this run, and ${eachCallCards}. The same agent started again is a new session.`,
      };
  }
}

/**
 * Who approved or revoked a session and why it ended, as its record says: each a person's or the sweeper's word when
 * the record is confirmed, only the file's when it is not (the Sessions card marks them so).
 */
export function sessionDecisionWords(session: SessionSummary): string[] {
  const words: string[] = [];
  if (session.approved_by !== null) words.push(`approved by ${session.approved_by}`);
  if (session.revoked_by !== null) words.push(`revoked by ${session.revoked_by}`);
  if (session.revoke_reason !== null) words.push(`revoked: ${session.revoke_reason}`);
  if (session.end_reason !== null) words.push(`ended: ${session.end_reason}`);
  return words;
}
