import { useEffect, useMemo } from 'react';
import type { ActionState, AttemptState } from '../../../broker/contract/index.js';
import {
  chronologyOf,
  isRunning,
  releaseLine,
  threeOrdersOf,
  waitLines,
  type ActionDetail,
  type EntrySource,
} from '../store/action-detail.js';
import { useAppStore } from '../store/app-store.js';
import { dispatchedWaiting } from '../store/closure-reason.js';
import { eventsSealed, plainOutcome, sealedForGood, sealedForGoodText, unlockHref } from '../store/sealed-action.js';
import { usePolling } from './use-polling.js';
import { dateTime } from '../../../broker/contract/time-words.js';
import { RecordingPlayer } from './recording-player.js';

/** While open, the detail is read again this often: later evidence (a reconciliation, an attestation) is appended. */
export const actionDetailRefreshMs = 2_000;

const sourceLabel: Record<EntrySource, string> = {
  operator: 'operator',
  reconciliation: 'reconciliation',
  policy: 'policy',
  agent: 'agent',
  remote: 'remote',
  transport: 'transport',
  broker: 'broker',
};

/**
 * One action: where it stood in the three orders (card, dispatch, completion), its classification,
 * its attempts and its chronology in append order, with entries a person or a reconciliation made
 * marked as such. Opened from an Activity row or an Approvals card (#/action/<id>).
 */
export function ActionDetailView({
  actionId,
  backHref,
  backLabel,
}: {
  actionId: string;
  backHref: string;
  backLabel: string;
}) {
  const view = useAppStore((state) => state.actionDetailView);
  const open = useAppStore((state) => state.openActionDetail);
  const refresh = useAppStore((state) => state.refreshActionDetail);
  useEffect(() => {
    void open(actionId);
  }, [open, actionId]);
  usePolling(refresh, actionDetailRefreshMs);
  const detail = view.actionId === actionId ? view.detail : null;

  return (
    <section className="panel action-detail" aria-labelledby="action-heading" data-testid="action-detail">
      <header className="panel-header">
        <h2 id="action-heading">
          Action <code data-testid="action-detail-id">{actionId}</code>
        </h2>
        <a href={backHref}>← {backLabel}</a>
      </header>
      {view.actionId === actionId && eventsSealed(view.error) && (
        <div className="notice" role="status" data-testid="action-detail-sealed">
          {view.plain !== null && (
            <p>
              Outcome <strong data-testid="action-detail-plain-outcome">{plainOutcome(view.plain)}</strong> · ticket{' '}
              {view.plain.ticket === null ? '(none)' : `#${view.plain.ticket}`} · {view.plain.channel}{' '}
              <code>{view.plain.target}</code> {view.plain.method ?? ''} <code>{view.plain.request}</code>
            </p>
          )}
          {sealedForGood(view.error) ? (
            <p>
              {capitalized(sealedForGoodText)} (the chronology, attempts and evidence).{' '}
              <span className="muted">({view.error?.code})</span>
            </p>
          ) : (
            <p>
              Its events are sealed while the vault is locked: <a href={unlockHref}>unlock</a> to read its events (the
              chronology, attempts and evidence). <span className="muted">({view.error?.code})</span>
            </p>
          )}
        </div>
      )}
      {view.error !== null && view.actionId === actionId && !eventsSealed(view.error) && (
        <div className="error" role="alert" data-testid="action-detail-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      {detail === null && view.error === null && <p className="muted">loading…</p>}
      {detail !== null && <DetailBody detail={detail} />}
    </section>
  );
}

function capitalized(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`;
}

function DetailBody({ detail }: { detail: ActionDetail }) {
  const s = detail.state;
  return (
    <>
      <p className="muted">
        {s.channel} <code>{s.target}</code> · lane {s.lane ?? '(none)'} · session {s.session_id ?? '(none)'} · approval{' '}
        {s.approval}
        {s.idempotent ? ' · idempotent' : ''}
      </p>
      {/* Running: said in plain words, as a closed card says it (closure-reason.ts), before the facts that imply it. */}
      {isRunning(s) && (
        <p className="running-status" data-testid="action-detail-running">
          <strong>{dispatchedWaiting.headline}</strong>: {dispatchedWaiting.detail}
        </p>
      )}
      {detail.queue !== null && <p data-testid="action-detail-queue">{detail.queue.text}</p>}
      <WaitedFor detail={detail} />

      <h3>Three orders</h3>
      <OrderFacts detail={detail} />

      <h3>Outcome</h3>
      <Classification state={s} />
      {detail.released_by !== null && (
        <p className="release" data-testid="action-released-by">
          {releaseLine(detail.released_by)}
          {detail.released_by.reason !== undefined && <> “{detail.released_by.reason}”</>}
        </p>
      )}

      <h3>Attempts</h3>
      {s.attempts.length === 0 ? (
        <p className="muted">No attempt: the action never reached the transport.</p>
      ) : (
        <Attempts attempts={s.attempts} />
      )}

      {s.channel === 'ssh' && s.outcome !== null && (
        <>
          <h3>Session recording</h3>
          <RecordingPlayer actionId={s.action_id} />
        </>
      )}
      {/* Open after dispatch (actions.show: no outcome yet): the command runs, its recording is sealed when it ends. */}
      {s.channel === 'ssh' && isRunning(s) && (
        <>
          <h3>Session recording</h3>
          <p className="muted" data-testid="recording-open">
            Still running: the recording is sealed when the command ends, and replayed here once its outcome is
            recorded.
          </p>
        </>
      )}

      <h3>Chronology</h3>
      <p className="muted">
        In append order (seq). Entries a person or a reconciliation made are marked; the remote&apos;s own facts are
        marked remote.
      </p>
      <Chronology detail={detail} />
    </>
  );
}

/** Where the action stood in each of the three orders: card, dispatch and completion. */
function OrderFacts({ detail }: { detail: ActionDetail }) {
  const orders = useMemo(() => threeOrdersOf(detail), [detail]);
  return (
    <dl className="facts orders" data-testid="action-orders">
      <dt>Card order</dt>
      <dd data-testid="order-card">
        {orders.card.ticket === null ? 'no ticket' : `ticket #${orders.card.ticket}`} (accepted at seq{' '}
        {orders.card.acceptedSeq}
        {orders.card.cardSeq === null ? '; no card was shown' : `; card shown at seq ${orders.card.cardSeq}`})
      </dd>
      <dt>Dispatch order</dt>
      <dd data-testid="order-dispatch">
        {orders.dispatch.seqs.length === 0
          ? 'never dispatched'
          : `DISPATCH_STARTED at seq ${orders.dispatch.seqs.join(', ')}`}
      </dd>
      <dt>Completion order</dt>
      <dd data-testid="order-completion">
        {orders.completion.seq === null
          ? 'not complete'
          : `${orders.completion.outcome ?? ''} at seq ${orders.completion.seq} (${orders.completion.kind ?? ''})`}
      </dd>
    </dl>
  );
}

/** Every event of the action in seq order, each wall time as every console time is written (time-words.ts). */
export function Chronology({ detail }: { detail: ActionDetail }) {
  const chronology = useMemo(() => chronologyOf(detail), [detail]);
  return (
    <table className="chronology" data-testid="action-chronology">
      <thead>
        <tr>
          <th scope="col">Seq</th>
          <th scope="col">Wall time</th>
          <th scope="col">Event</th>
          <th scope="col">Evidence</th>
          <th scope="col">Source</th>
        </tr>
      </thead>
      <tbody>
        {chronology.map((e) => (
          <tr
            key={e.seq}
            data-testid="chronology-entry"
            data-seq={e.seq}
            data-source={e.source}
            className={`source-${e.source}`}
          >
            <td className="seq">{e.seq}</td>
            <td>
              <time dateTime={new Date(e.at_ms).toISOString()}>{dateTime(e.at_ms, { ms: true })}</time>
            </td>
            <td className="kind">{e.kind}</td>
            <td>
              {e.evidence}
              {e.outcome !== null && !e.evidence.includes(e.outcome) && <span className="muted"> → {e.outcome}</span>}
              {e.releasedLane && <span className="badge attention"> released the lane</span>}
            </td>
            <td>
              <span className={`badge source source-${e.source}`}>{sourceLabel[e.source]}</span>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** What the action waited for in its lane ("#5 waited 41 s for #4"), or that it waited for nothing. */
function WaitedFor({ detail }: { detail: ActionDetail }) {
  const lines = waitLines(detail.state.ticket, detail.waited_for);
  if (lines.length === 0) return null;
  return (
    <ul className="waited-for" data-testid="action-waited-for" aria-label="What this action waited for in its lane">
      {lines.map((line) => (
        <li key={line}>{line}</li>
      ))}
    </ul>
  );
}

function Classification({ state: s }: { state: ActionState }) {
  const facts: Array<[string, string, string]> = [
    ['phase', 'Phase', s.phase ?? '—'],
    ['outcome', 'Outcome', s.outcome ?? 'open (not classified yet)'],
    ['retry', 'Retry', s.retry ?? '—'],
    ['effect', 'Effect', s.effect ?? '—'],
    ['basis', 'Outcome basis', s.outcome_basis ?? '—'],
    ['code', 'Code', s.code ?? '—'],
    ['source', 'Evidence source', s.source ?? '—'],
    ['stage', 'Furthest stage', s.stage],
    ['dispatch-evidence', 'Dispatch evidence', s.dispatch_evidence],
  ];
  return (
    <dl className="facts" data-testid="action-classification">
      {facts.map(([id, label, value]) => (
        <div key={id} className="fact">
          <dt>{label}</dt>
          <dd data-testid={`action-${id}`}>{value}</dd>
        </div>
      ))}
      {s.abandoned && (
        <div className="fact">
          <dt>Abandoned</dt>
          <dd>yes: a person released the lane; the outcome stays as recorded</dd>
        </div>
      )}
    </dl>
  );
}

function Attempts({ attempts }: { attempts: readonly AttemptState[] }) {
  return (
    <table className="attempts" data-testid="action-attempts">
      <thead>
        <tr>
          <th scope="col">#</th>
          <th scope="col">State</th>
          <th scope="col">Connection</th>
          <th scope="col">Dispatch seq</th>
          <th scope="col">Observed</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((a) => (
          <tr key={a.n} data-testid="attempt-row">
            <td>{a.n}</td>
            <td>
              {a.state === 'setup_failed'
                ? `setup failed${a.setup_stage === null ? '' : ` (${a.setup_stage})`}`
                : 'dispatched'}
            </td>
            <td>{a.connection ?? '—'}</td>
            <td>{a.dispatch_seq ?? '—'}</td>
            <td>{observed(a)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function observed(a: AttemptState): string {
  const facts = [
    a.request_complete && 'request complete',
    a.response_started && `response started${a.response_status === null ? '' : ` (${a.response_status})`}`,
    a.response_complete && 'response complete',
    a.connection_lost && 'connection lost',
    a.exit_status !== null && `exit ${a.exit_status}`,
    a.exit_signal !== null && `signal ${a.exit_signal}`,
    a.channel_closed && 'channel closed',
  ].filter((f): f is string => typeof f === 'string');
  return facts.length === 0 ? 'nothing after dispatch' : facts.join(', ');
}
