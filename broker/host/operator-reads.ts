import {
  activityPageDefault,
  activityPageMax,
  actorLabel,
  CodedError,
  type ActionState,
  type ActivityEvent,
  type BrokerApi,
  type JournalEvent,
  type OperatorInput,
  rowMatchesText,
} from '../contract/index.js';
import { isActionOpen, laneRelease } from '../core/index.js';
import type { Journal, SealedEventHeader } from '../journal/index.js';
import type { OperatorQueue } from '../ports/index.js';
import { listActions, waitedFor } from './action-list.js';

// Activity pages are bounded (activityPageMax); the view pages on by `next_seq` (keyset paging on the journal position).
const scanRowsMax = 20_000;
/** Rows read per step of a filtered scan (the journal's own page bound). */
const scanPageRows = 512;

/**
 * The read-only operator methods, projected from the journal: an action's state and its events,
 * the Sessions list, and Activity pages. Positions are the journal's append positions (seq), so a
 * filtered page keeps the original numbers. `actionListScanRowsMax` lowers the action list's search bound (tests only).
 */
export function createOperatorReads(
  journal: Journal,
  queue: Pick<OperatorQueue, 'position' | 'isConnected'>,
  options: { actionListScanRowsMax?: number } = {},
) {
  return {
    'actions.show': async (input: OperatorInput<'actions.show'>): Promise<BrokerApi['actions.show']['output']> => {
      // The state as the journal holds it now (its cache moves at each commit's ack); the events read below hold at
      // least every event that state folded, since they wait for everything queued before them.
      const state = input.action_id.startsWith('act_') ? journal.getAction(input.action_id) : undefined;
      if (state === undefined)
        throw new CodedError('NOT_FOUND', `no action ${input.action_id}`, { field: 'action_id' });
      const { events, waited } = await journal.readCurrent(() => {
        const read = journal.subjectEvents(input.action_id);
        return { events: read, waited: waitedFor(journal, state, read) };
      });
      return {
        state: shownState(state),
        queue: queue.position(input.action_id),
        events: events.map(activityRow),
        released_by: laneRelease(events),
        waited_for: waited,
      };
    },
    'actions.list': (input: OperatorInput<'actions.list'>): Promise<BrokerApi['actions.list']['output']> =>
      journal.readCurrent(() => listActions(journal, input, { scanRowsMax: options.actionListScanRowsMax })),
    // Each session's figures come from its counter row (migration 017), never from its actions: O(sessions) per call.
    'sessions.list': async (): Promise<BrokerApi['sessions.list']['output']> => ({
      sessions: (await journal.readCurrent(() => journal.listCountedSessions())).map(
        ({ session, calls, pending, record }) => ({
          ...session,
          calls,
          pending,
          connected: queue.isConnected(session.session_id),
          record,
        }),
      ),
    }),
    // The reads wait for what is queued without holding the loop (Journal.readCurrent), then read on one snapshot.
    'activity.list': (input: OperatorInput<'activity.list'>): Promise<BrokerApi['activity.list']['output']> =>
      journal.readCurrent(() => activityPage(journal, input)),
  };
}

/** One Activity page (activity.list), read inside Journal.readCurrent. */
function activityPage(journal: Journal, input: OperatorInput<'activity.list'>): BrokerApi['activity.list']['output'] {
  const limit = Math.min(input.limit ?? activityPageDefault, activityPageMax);
  const events: ActivityEvent[] = [];
  let next = input.from_seq ?? 1;
  let scanned = 0;
  // Unfiltered, every row read is returned: read just the page asked for (each row is decrypted).
  const filtered = [input.session_id, input.lane, input.action_id, input.outcome, input.code, input.text].some(
    (f) => f !== undefined,
  );
  const readRows = filtered ? scanPageRows : limit;
  // An action or session filter reads only that id's rows, through its index; the other filters test each row.
  const only = {
    ...(input.action_id === undefined ? {} : { action_id: input.action_id }),
    ...(input.session_id === undefined ? {} : { session_id: input.session_id }),
  };
  // Scan forward page by page until the filtered page is full, the log ends, or the scan bound.
  for (;;) {
    const page = journal.eventsPage(next, readRows, only);
    for (const row of page) {
      scanned += 1;
      next = row.seq + 1;
      if (input.session_id !== undefined && row.session_id !== input.session_id) continue;
      if (input.lane !== undefined && row.lane !== input.lane) continue;
      if (input.action_id !== undefined && row.action_id !== input.action_id) continue;
      const shown = activityRow(row);
      if (!matchesShownRow(shown, input)) continue;
      events.push(shown);
      if (events.length >= limit) return { events, next_seq: next };
    }
    if (page.length < readRows) return { events, next_seq: null };
    if (scanned >= scanRowsMax) return { events, next_seq: next };
  }
}

/**
 * An action's state as `actions.show` shows it: open (isActionOpen — nothing classified it since its latest dispatch or
 * closure, the rule that leaves its `actions.list` row's settled_at_ms null) has no outcome or effect yet. The
 * projection holds unknown / unknown_effect from DISPATCH_STARTED on, provisionally: while the action runs it is in
 * flight, as status counts it and its list row shows it (outcome null), not an unknown outcome. Phase, basis
 * (dispatch_started_no_result_recorded) and stage still say how far it got.
 */
function shownState(state: ActionState): ActionState {
  return isActionOpen(state) ? { ...state, outcome: null, effect: null } : state;
}

/**
 * The filters that test the row as shown (outcome, code and text come from the decrypted event, so
 * they apply after activityRow; a sealed row has neither outcome nor code and only its header text).
 */
function matchesShownRow(row: ActivityEvent, input: OperatorInput<'activity.list'>): boolean {
  if (input.outcome !== undefined && row.outcome !== input.outcome) return false;
  if (input.code !== undefined && row.code !== input.code) return false;
  if (input.text === undefined) return true;
  // The console names its zone and matches what it writes; the terminal (no zone) prints the summary ISO UTC.
  return rowMatchesText(row, input.text, input.zone === undefined ? 'terminal' : { zone: input.zone });
}

/** One event as a row people can read: closed-set values and ids only, never payload text. */
export function activityRow(event: JournalEvent | SealedEventHeader): ActivityEvent {
  const base = {
    seq: event.seq,
    at_ms: event.at_ms,
    kind: event.kind as ActivityEvent['kind'],
    action_id: event.action_id,
    session_id: event.session_id,
    ticket: event.ticket,
    lane: event.lane,
  };
  if ('sealed' in event)
    return {
      ...base,
      outcome: null,
      code: null,
      summary: 'sealed: unlock the vault to read this earlier run',
      expires_at_ms: null,
    };
  const c = event.classification;
  return {
    ...base,
    outcome: c?.outcome ?? null,
    code: c?.code ?? null,
    summary: summarize(event),
    // The summary's time is ISO UTC (the terminal's); the console writes this one in the viewer's zone.
    expires_at_ms: event.kind === 'CARD_SHOWN' ? event.payload.expires_at_ms : null,
  };
}

function summarize(event: JournalEvent): string {
  switch (event.kind) {
    case 'ACTION_ACCEPTED': {
      // The rule that set the approval, so the log says why a write waited for a card (docs/config.md, Rules).
      const rule = event.payload.approval_rule === undefined ? '' : ` by ${event.payload.approval_rule}`;
      return `${event.payload.channel} ${event.payload.target} (approval ${event.payload.approval}${rule})`;
    }
    case 'APPROVED':
    case 'SESSION_APPROVED':
      return `by ${actorLabel(event.payload.actor)}`;
    case 'REJECTED':
    case 'CANCELLED':
    case 'ABANDONED':
    case 'SESSION_REVOKED':
      return `by ${actorLabel(event.payload.actor)}: ${event.payload.reason}`;
    case 'CARD_SHOWN':
      return `expires at ${new Date(event.payload.expires_at_ms).toISOString()}`;
    case 'DISPATCH_STARTED':
      return `attempt ${event.payload.attempt} on a ${event.payload.connection} connection`;
    case 'REMOTE_RESPONSE_STARTED':
      return event.payload.status === undefined ? `attempt ${event.payload.attempt}` : `HTTP ${event.payload.status}`;
    case 'EXIT_STATUS':
      return `exit status ${event.payload.exit_status}`;
    case 'SESSION_STARTED': {
      const { pid, exe, client_name: client, allowlist_withheld: withheld } = event.payload;
      const started = `pid ${pid} ${exe ?? '(exe unknown)'}${client === null ? '' : ` (${client})`}`;
      return withheld === undefined ? started : `${started}; allowlist not applied: ${withheld}`;
    }
    case 'SESSION_ENDED':
      return event.payload.reason;
    case 'CONFIG_APPLIED': {
      const { how, by, digest, restart_needed_for: waiting } = event.payload;
      return `${how} by ${by}: ${digest}${waiting.length === 0 ? '' : `; at the next start: ${waiting.join(', ')}`}`;
    }
    case 'CREDENTIAL_REQUESTED': {
      const target =
        'route' in event.payload.for ? `route ${event.payload.for.route}` : `host ${event.payload.for.host}`;
      return `for ${target}${event.payload.kind === undefined ? '' : ` (${event.payload.kind})`}`;
    }
    case 'CREDENTIAL_PROVISIONED':
      return `${event.payload.credential_name} (${event.payload.how}) by ${actorLabel(event.payload.actor)}`;
    case 'CREDENTIAL_REQUEST_DECLINED':
      return `by ${actorLabel(event.payload.actor)}${event.payload.reason === undefined ? '' : `: ${event.payload.reason}`}`;
    case 'RECONCILIATION_RESULT': {
      const c = event.classification;
      return `by lookup ${event.payload.lookup_action_id} (${event.payload.correlation})${c === undefined ? '' : `: ${c.outcome}, ${c.outcome_basis}`}`;
    }
    case 'OPERATOR_ATTESTED':
      return `by ${actorLabel(event.payload.actor)}: ${event.payload.basis}`;
    default: {
      const c = event.classification;
      return c === undefined ? '' : `${c.phase} / ${c.outcome}${c.code === null ? '' : ` (${c.code})`}`;
    }
  }
}
