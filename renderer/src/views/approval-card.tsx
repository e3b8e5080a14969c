import { useState } from 'react';
import type { ApprovalCard, CardPair } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { cardStatusLabel, needsDecision } from '../store/card-groups.js';
import { countdownUrgentMs, formatCountdown } from '../store/countdown.js';
import { actionHref } from '../store/hash-route.js';
import { commandSize, visibleCommand } from '../store/visible-command.js';
import type { CallResult } from '../store/operator-call.js';
import { BlockedHeadWaysOut } from './blocked-head-ways-out.js';
import { ReasonForm } from './reason-form.js';
import { useNow } from './use-now.js';

type OpenForm = 'reject' | 'cancel' | null;

/**
 * One approval card: everything a person needs to decide, taken before any credential was added
 * (the API sends the credential's NAME only; nothing here could show its value).
 */
// eslint-disable-next-line max-lines-per-function -- one card's JSX: its facts, the lane blocker and the decision controls
export function ApprovalCardView({ card, blockedBy }: { card: ApprovalCard; blockedBy: number | null }) {
  const t = card.ticket;
  const busy = useAppStore((state) => state.approvalsView.calls.busy[t]);
  const last = useAppStore((state) => state.approvalsView.calls.last[t]);
  const approve = useAppStore((state) => state.approve);
  const reject = useAppStore((state) => state.reject);
  const cancel = useAppStore((state) => state.cancel);
  const approveSession = useAppStore((state) => state.approveSession);
  const [open, setOpen] = useState<OpenForm>(null);
  const titleId = `card-${t}-title`;

  return (
    <article
      className={`card state-${card.state}`}
      aria-labelledby={titleId}
      data-testid={`card-${t}`}
      id={`ticket-${t}`}
    >
      <header className="card-header">
        <h4 id={titleId}>Ticket #{t}</h4>
        <span className={`badge approval-${card.approval}`} title="Approval mode">
          {approvalModeText[card.approval]}
        </span>
        {card.retry_of !== null && (
          <span
            className="badge attention"
            title={`A retry of ${card.retry_of}, whose outcome was not known: it needs a fresh decision`}
          >
            retry of an indeterminate action
          </span>
        )}
        {card.retries !== undefined && card.retries.generation > 0 && (
          <span
            className="badge attention"
            data-testid={`card-${t}-retries`}
            title={`This action's outcome was not known, so it was retried under the same key: retry ${card.retries.generation} of the ${card.retries.budget} its record allows, each a fresh decision (a person's click or the route's retry policy).`}
          >
            retry {card.retries.generation} of {card.retries.budget}
          </span>
        )}
        {card.expires_at_ms !== null && needsDecision(card) && (
          <Countdown expiresAtMs={card.expires_at_ms} ticket={t} />
        )}
      </header>
      <p className="card-status" data-testid={`card-${t}-status`}>
        <LinkedTickets text={cardStatusLabel(card, blockedBy)} self={t} />
      </p>
      {card.approval_rule !== undefined && card.approval_rule !== null && (
        <p className="muted" data-testid={`card-${t}-rule`}>
          Asked for by the route's {card.approval_rule}
        </p>
      )}
      <CardFacts card={card} />
      <div className="card-actions" role="group" aria-label={`Decisions for ticket #${t}`}>
        {needsDecision(card) && open === null && (
          <>
            <button type="button" className="primary" disabled={busy !== undefined} onClick={() => void approve(t)}>
              Approve
            </button>
            <button type="button" className="danger" disabled={busy !== undefined} onClick={() => setOpen('reject')}>
              Reject…
            </button>
            {card.state === 'awaiting_session' && card.session !== null && (
              <button
                type="button"
                disabled={busy !== undefined}
                onClick={() => void approveSession(card.session?.session_id ?? '')}
                title="Approve this agent process once: its session-mode calls are then approved by policy"
              >
                Approve agent session
              </button>
            )}
          </>
        )}
        {card.state === 'approved_waiting' && open === null && (
          <button
            type="button"
            disabled={busy !== undefined}
            onClick={() => setOpen('cancel')}
            title="It will never be sent, even after the ticket it waits for resolves"
          >
            Cancel…
          </button>
        )}
        {card.state === 'dispatching' && (
          <span className="muted">Sent or on its way: nothing to decide. Its outcome will be recorded.</span>
        )}
      </div>
      {open === 'reject' && (
        <ReasonForm
          label={`Why reject #${t}?`}
          submitLabel={`Reject #${t}`}
          busy={busy !== undefined}
          onSubmit={(reason) => reject(t, reason)}
          onClose={() => setOpen(null)}
        />
      )}
      {open === 'cancel' && (
        <ReasonForm
          label={`Why cancel #${t}? (optional)`}
          submitLabel={`Cancel #${t}`}
          required={false}
          busy={busy !== undefined}
          onSubmit={(reason) => cancel(t, reason === '' ? 'cancelled by the operator' : reason)}
          onClose={() => setOpen(null)}
        />
      )}
      {card.state === 'blocked_head' && <BlockedHeadWaysOut card={card} busy={busy !== undefined} />}
      {busy !== undefined && (
        <p className="muted" role="status">
          {busy}…
        </p>
      )}
      {last !== undefined && <CallResultLine result={last} />}
    </article>
  );
}

/** What the card's target names, per channel. */
const targetLabel: Record<ApprovalCard['channel'], string> = { http: 'Route', ssh: 'Host', mcp: 'MCP server' };

const approvalModeText: Record<ApprovalCard['approval'], string> = {
  none: 'no approval needed',
  session: 'session approval',
  per_call: 'per-call approval',
};

function Countdown({ expiresAtMs, ticket }: { expiresAtMs: number; ticket: number }) {
  const now = useNow();
  const urgent = expiresAtMs - now < countdownUrgentMs;
  return (
    <span
      className={urgent ? 'countdown urgent' : 'countdown'}
      role="timer"
      aria-label={`Ticket #${ticket} expires`}
      data-testid={`card-${ticket}-expiry`}
      title={`Expires at ${new Date(expiresAtMs).toLocaleTimeString()}`}
    >
      {formatCountdown(expiresAtMs, now)}
    </span>
  );
}

/** "approved, waiting for #42" with #42 a link to that card (a card's own number stays text). */
export function LinkedTickets({ text, self }: { text: string; self?: number }) {
  const parts = text.split(/(#\d+)/);
  return (
    <>
      {parts.map((part, i) =>
        /^#\d+$/.test(part) && part !== `#${self}` ? (
          <a key={i} href={`#ticket-${part.slice(1)}`}>
            {part}
          </a>
        ) : (
          part
        ),
      )}
    </>
  );
}

// eslint-disable-next-line max-lines-per-function -- a flat <dl> of the card's facts, one short row each
function CardFacts({ card }: { card: ApprovalCard }) {
  const s = card.session;
  return (
    <dl className="card-facts">
      <dt>Agent</dt>
      <dd data-testid={`card-${card.ticket}-agent`}>
        {s === null ? (
          <span className="muted">no session recorded</span>
        ) : (
          <>
            <strong>{processName(s.exe) ?? '(process unknown)'}</strong> · pid {s.pid}
            {s.client_name !== null && <> · client {s.client_name}</>} · session {s.status}
            <br />
            <code title="Executable">{s.exe ?? '(executable unknown)'}</code>
            {s.cwd !== null && (
              <>
                {' '}
                in <code title="Working directory">{s.cwd}</code>
              </>
            )}
            {s.parent_exe !== null && (
              <>
                <br />
                <span className="muted">
                  parent <code>{s.parent_exe}</code>
                </span>
              </>
            )}
          </>
        )}
      </dd>
      <dt>{targetLabel[card.channel]}</dt>
      <dd>
        <code>{card.target}</code>
        {card.lane === null && <span className="muted"> (a read outside lanes)</span>}
      </dd>
      {card.channel === 'http' ? (
        <>
          <dt>Request</dt>
          <dd>
            <code data-testid={`card-${card.ticket}-request`}>
              {card.method ?? '?'} {card.path ?? ''}
            </code>
          </dd>
          {card.query.length > 0 && (
            <>
              <dt>Query</dt>
              <dd>
                <Pairs pairs={card.query} />
              </dd>
            </>
          )}
          {card.headers.length > 0 && (
            <>
              <dt>Headers</dt>
              <dd>
                <Pairs pairs={card.headers} />
              </dd>
            </>
          )}
          {card.request_details !== undefined && card.request_details !== 'shown' && (
            <>
              <dt>Query, headers</dt>
              <dd className="muted" data-testid={`card-${card.ticket}-request-details`}>
                {requestDetailsGone[card.request_details]}
              </dd>
            </>
          )}
        </>
      ) : (
        <>
          <dt>{card.channel === 'mcp' ? 'Tool' : 'Command'}</dt>
          <dd>
            {card.command === null ? (
              <code data-testid={`card-${card.ticket}-request`}>(not shown)</code>
            ) : (
              <CommandText command={card.command} ticket={card.ticket} />
            )}
          </dd>
        </>
      )}
      <dt>{card.channel === 'mcp' ? 'Arguments' : 'Body'}</dt>
      <dd>
        {card.body_preview !== null ? (
          <>
            <pre className="body-preview" data-testid={`card-${card.ticket}-body`}>
              {card.body_preview}
            </pre>
            <span className="muted">
              {card.body_bytes} bytes as the agent sent them, before any credential was added
            </span>
          </>
        ) : previewKept(card) || bodySizeKnownEmpty(card) ? (
          <span className="muted">none</span>
        ) : (
          <span className="muted" data-testid={`card-${card.ticket}-body-gone`}>
            {previewGone(card)}
          </span>
        )}
      </dd>
      <dt>Credential</dt>
      <dd>
        <code data-testid={`card-${card.ticket}-credential`}>{card.credential}</code>{' '}
        <span className="muted">(its name; the value never leaves the vault)</span>
      </dd>
      <dt>Action</dt>
      <dd>
        <a
          href={actionHref(card.action_id)}
          title="Open this action's detail: orders, chronology, evidence"
          data-testid={`card-${card.ticket}-detail`}
        >
          <code>{card.action_id}</code>
        </a>
        <span className="muted" title={card.request_fingerprint}>
          {' '}
          · fingerprint {card.request_fingerprint.slice(7, 19)}…
        </span>
      </dd>
    </dl>
  );
}

/**
 * The whole command, whitespace kept (pre-wrap, scrollable) and every invisible character shown as a marked
 * escape, with its size: a person approves exactly what runs, never a tail they could not see.
 */
function CommandText({ command, ticket }: { command: string; ticket: number }) {
  return (
    <>
      <pre className="command-text" data-testid={`card-${ticket}-request`}>
        {visibleCommand(command).map((piece, i) =>
          piece.kind === 'text' ? (
            piece.text
          ) : (
            <span key={i} className="invisible-char" title={piece.title}>
              {piece.text}
            </span>
          ),
        )}
      </pre>
      <span className="muted" data-testid={`card-${ticket}-request-size`}>
        {commandSize(command)}, shown whole; marked escapes stand for characters that would not show
      </span>
    </>
  );
}

/** Query or header pairs; a side the broker cut is followed, outside its text, by how much of it is hidden. */
function Pairs({ pairs }: { pairs: readonly CardPair[] }) {
  return (
    <ul className="pairs">
      {pairs.map(([name, value, cut], i) => (
        <li key={i}>
          <code>{name}</code>
          <CutNote hidden={cut?.name_hidden} />: <code>{value}</code>
          <CutNote hidden={cut?.value_hidden} />
        </li>
      ))}
    </ul>
  );
}

function CutNote({ hidden }: { hidden: number | undefined }) {
  if (hidden === undefined || hidden === 0) return null;
  return <span className="muted"> [cut: {hidden.toLocaleString('en-US')} more characters not shown]</span>;
}

/**
 * Whether a null preview means "no body". The broker keeps previews in memory only until the call
 * is sent (or the broker restarts); after that a card is rebuilt from the journaled target with no
 * preview and body_bytes 0, which must not read as an empty body.
 */
function previewKept(card: ApprovalCard): boolean {
  return card.state !== 'blocked_head' && card.state !== 'dispatching';
}

/** Why a card rebuilt from the journal shows no query or headers: an empty list there proves nothing. */
const requestDetailsGone = {
  sealed:
    'not shown: sealed in the journal by an earlier run of the broker, and the vault is locked. Unlock it to see the query, the headers and the body size the agent sent',
  not_recorded: 'not recorded: a broker that did not journal them admitted this call; the journal keeps its target',
} as const;

/** A route's HTTP card whose request details were shown (request_details absent) knows its body size, 0 included. */
function bodySizeKnown(card: ApprovalCard): boolean {
  return card.channel === 'http' && card.target.startsWith('route:') && card.request_details === undefined;
}

function bodySizeKnownEmpty(card: ApprovalCard): boolean {
  return bodySizeKnown(card) && card.body_bytes === 0;
}

/** Why a card no longer shows its body, saying only what is known about whether the call was sent. */
function previewGone(card: ApprovalCard): string {
  const size = bodySizeKnown(card) ? `${card.body_bytes} bytes; ` : '';
  return `${size}${previewGoneWhy(card)}`;
}

function previewGoneWhy(card: ApprovalCard): string {
  if (card.state === 'blocked_head' && !card.dispatch_recorded)
    return 'preview lost: previews live only in the running broker’s memory, and it restarted before any dispatch of this call was recorded. Whether the call was sent is unknown; the journal keeps its target';
  return 'preview no longer kept (previews live in memory until the call is sent; the journal keeps its target)';
}

function processName(exe: string | null): string | null {
  if (exe === null) return null;
  return exe.split(/[\\/]/).at(-1) ?? exe;
}

export function CallResultLine({ result }: { result: CallResult }) {
  if (result.ok) {
    return (
      <p className="call-result ok" role="status">
        {result.message}
      </p>
    );
  }
  return (
    <p className="call-result error" role="alert">
      <strong>{result.error.code}</strong> {result.error.message}
    </p>
  );
}
