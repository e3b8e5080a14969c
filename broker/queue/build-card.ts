import {
  approvalCardSchema,
  type ActionState,
  type ApprovalCard,
  type SessionRecordCheck,
  type SessionState,
} from '../contract/index.js';
import { retriableRecord, type TicketWait } from '../core/index.js';
import { copyPair, previewFromTarget, type CardPreview, type HttpRequestView } from './card-preview.js';

export interface CardFacts {
  readonly state: ActionState;
  readonly wait: TicketWait;
  /** The in-memory preview; absent once its executor returned or after a restart (then the journal's is shown). */
  readonly preview: CardPreview | undefined;
  /**
   * Without an in-memory preview, for an HTTP route's action: the query, headers and body size ACTION_ACCEPTED sealed
   * (`request_view`), or why the journal cannot show them. Absent: the target alone (SSH, MCP, the broker's token).
   */
  readonly journaled?: HttpRequestView | 'sealed' | 'sealed_for_good' | 'not_recorded';
  readonly session: SessionState | undefined;
  /** How far the journal has checked that session's record (Journal.sessionRecordCheck). */
  readonly sessionRecord: SessionRecordCheck;
  readonly expiresAtMs: number | null;
  readonly credentialOf: (target: string) => string;
}

/** One approval card (DESIGN §4): journaled facts, the lane schedule's words, the preview. Never a secret. */
export function buildCard(f: CardFacts): ApprovalCard {
  const { state, wait } = f;
  const journaled = f.preview === undefined ? f.journaled : undefined;
  const view = typeof journaled === 'object' ? journaled : undefined;
  // Live or rebuilt, one shape: previewFromTarget with the sealed view builds what httpCardPreview built.
  const preview = f.preview ?? previewFromTarget(state.target, f.credentialOf, view);
  // A person's retry resends the request kept at admission, which only an HTTP action under a bound key has
  // (broker/actions kept-request.ts); the key's window, the budget and a live lease are checked on the click.
  const retryPossible = retriableRecord(state) && state.channel === 'http' && state.key_expires_at_ms !== null;
  const card: ApprovalCard = {
    ticket: wait.ticket,
    action_id: state.action_id,
    lane: state.lane,
    channel: state.channel,
    approval: state.approval,
    approval_rule: state.approval_rule,
    state: cardState(state, wait),
    waiting_for_ticket: wait.waiting === 'blocked_head' ? null : wait.waiting_for_ticket,
    text: wait.text,
    session:
      f.session === undefined
        ? null
        : {
            session_id: f.session.session_id,
            status: f.session.status,
            pid: f.session.pid,
            exe: f.session.exe,
            cwd: f.session.cwd,
            parent_exe: f.session.parent_exe,
            client_name: f.session.client_name,
            record: f.sessionRecord,
          },
    target: preview.target,
    method: preview.method,
    path: preview.path,
    query: preview.query.map(copyPair),
    headers: preview.headers.map(copyPair),
    ...(typeof journaled === 'string' ? { request_details: journaled } : {}),
    command: preview.command,
    body_preview: preview.body_preview,
    body_bytes: preview.body_bytes,
    credential: preview.credential,
    request_fingerprint: state.request_fingerprint,
    accepted_at_ms: state.accepted_at_ms,
    expires_at_ms: f.expiresAtMs,
    retry_of: preview.retry_of,
    retries: { generation: state.retry_generation, budget: state.retry_budget },
    dispatch_recorded: state.dispatch_seq !== null,
    retry_possible: retryPossible,
    // The key's window end: the journal folds a same-key RETRY_LEASED only before it (project.ts foldRetryLeased).
    retry_until_ms: retryPossible ? state.key_expires_at_ms : null,
  };
  return approvalCardSchema.parse(card);
}

function cardState(state: ActionState, wait: TicketWait): ApprovalCard['state'] {
  if (wait.waiting === 'blocked_head') return 'blocked_head';
  if (wait.waiting === 'dispatching') return 'dispatching';
  if (wait.allowed) return 'approved_waiting';
  return state.approval === 'session' && wait.waiting !== 'approval' ? 'awaiting_session' : 'pending';
}
