import { useEffect, useRef, useState } from 'react';
import type { ApprovalCard, CardPair } from '../../../broker/contract/index.js';
import { commandNotKeptText } from '../../../broker/contract/command-not-kept.js';
import { sessionRecordWords, type SessionRecordCheck } from '../../../broker/contract/session-record.js';
import { brokerStopped } from '../store/approvals-tally.js';
import { useAppStore } from '../store/app-store.js';
import { cardStatusLabel, needsDecision, stoppedCardLabel } from '../store/card-groups.js';
import { countdownUrgentMs, formatCountdown } from '../store/countdown.js';
import { actionHref, tabOrigin } from '../store/hash-route.js';
import { dateTime } from '../../../broker/contract/time-words.js';
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
  // While the broker is stopped nothing on the card can be decided: its buttons are disabled, not only faded.
  const stopped = useAppStore((state) => brokerStopped(state.approvalsView));
  const [open, setOpen] = useState<OpenForm>(null);
  const formFocus = useFormFocus(open);
  const titleId = `card-${t}-title`;
  const disabled = busy !== undefined || stopped;
  const decided = (accepted: boolean): boolean => {
    if (accepted) focusAfterDecision(t, formFocus.order);
    return accepted;
  };

  return (
    <article
      className={stopped ? `card state-${card.state} stopped` : `card state-${card.state}`}
      aria-labelledby={titleId}
      data-testid={`card-${t}`}
      data-decidable={needsDecision(card) && !stopped}
      id={`ticket-${t}`}
      tabIndex={-1}
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
        {card.expires_at_ms !== null && needsDecision(card) && !stopped && (
          <Countdown expiresAtMs={card.expires_at_ms} ticket={t} />
        )}
      </header>
      <p className="card-status" data-testid={`card-${t}-status`}>
        <LinkedTickets text={stopped ? stoppedCardLabel(card) : cardStatusLabel(card, blockedBy)} self={t} />
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
            <button
              type="button"
              className="primary"
              disabled={disabled}
              onClick={() => {
                formFocus.remember();
                void approve(t).then(decided);
              }}
            >
              Approve
            </button>
            <button
              type="button"
              className="danger"
              disabled={disabled}
              ref={formFocus.opener('reject')}
              onClick={() => setOpen('reject')}
            >
              Reject…
            </button>
            {card.state === 'awaiting_session' && card.session !== null && (
              <button
                type="button"
                disabled={disabled}
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
            disabled={disabled}
            ref={formFocus.opener('cancel')}
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
          busy={disabled}
          onSubmit={(reason) => {
            formFocus.remember();
            return reject(t, reason).then(decided);
          }}
          onClose={() => setOpen(null)}
        />
      )}
      {open === 'cancel' && (
        <ReasonForm
          label={`Why cancel #${t}? (optional)`}
          submitLabel={`Cancel #${t}`}
          required={false}
          busy={disabled}
          onSubmit={(reason) => cancel(t, reason === '' ? 'cancelled by the operator' : reason)}
          onClose={() => setOpen(null)}
        />
      )}
      {card.state === 'blocked_head' && <BlockedHeadWaysOut card={card} busy={disabled} />}
      {busy !== undefined && (
        <p className="muted" role="status">
          {busy}…
        </p>
      )}
      {last !== undefined && !(stopped && !last.ok && last.error.code === 'BROKER_UNREACHABLE') && (
        // While stopped the card's state line says so; the shell's banner names the error once.
        <CallResultLine result={last} />
      )}
    </article>
  );
}

/**
 * Keyboard focus around a card's forms and decisions. A form closed without a decision (Escape, Back) hands focus back
 * to the button that opened it; `remember` notes the decidable cards in page order before a decision, for
 * focusAfterDecision.
 */
function useFormFocus(open: OpenForm) {
  const openers = useRef<Partial<Record<'reject' | 'cancel', HTMLButtonElement | null>>>({});
  const wasOpen = useRef<OpenForm>(null);
  const order = useRef<string[]>([]);
  useEffect(() => {
    const closed = wasOpen.current;
    wasOpen.current = open;
    // The form unmounted with focus inside it, so focus fell to <body>: give it back to its opener, if still shown.
    if (open === null && closed !== null && document.activeElement === document.body) openers.current[closed]?.focus();
  }, [open]);
  return {
    opener: (form: 'reject' | 'cancel') => (el: HTMLButtonElement | null) => {
      openers.current[form] = el;
    },
    remember: () => {
      order.current = decidableCardIds();
    },
    get order() {
      return order.current;
    },
  };
}

function decidableCardIds(): string[] {
  return [...document.querySelectorAll<HTMLElement>('article[data-decidable="true"]')].map((el) => el.id);
}

/**
 * After a decision on card `ticket` the button pressed is gone (the card closed, or shows other buttons), and focus
 * would fall to <body>: move it to the next card still waiting for a decision (in page order, else any), or to the
 * Approvals heading when none is left. Never when the person already moved focus elsewhere.
 */
function focusAfterDecision(ticket: number, before: readonly string[]): void {
  // After the refresh has rendered (the decision's promise resolves once the list was re-read).
  setTimeout(() => {
    const self = document.getElementById(`ticket-${ticket}`);
    const active = document.activeElement;
    if (active !== null && active !== document.body && !(self?.contains(active) ?? false)) return;
    const now = decidableCardIds();
    const after = before.slice(before.indexOf(`ticket-${ticket}`) + 1);
    const next = after.find((id) => now.includes(id)) ?? now.find((id) => id !== `ticket-${ticket}`);
    (document.getElementById(next ?? 'approvals-heading') ?? null)?.focus();
  }, 0);
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
      title={`Expires at ${dateTime(expiresAtMs)}`}
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
            <SessionRecordNote record={s.record} testId={`card-${card.ticket}-session-record`} />
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
                <Pairs
                  pairs={card.query}
                  noun={['query parameter', 'query parameters']}
                  testId={`card-${card.ticket}-query`}
                />
              </dd>
            </>
          )}
          {card.headers.length > 0 && (
            <>
              <dt>Headers</dt>
              <dd>
                <Pairs pairs={card.headers} noun={['header', 'headers']} testId={`card-${card.ticket}-headers`} />
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
              <CommandNotKept card={card} />
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
          href={actionHref(card.action_id, tabOrigin('approvals'))}
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
 * An SSH card rebuilt from the journal (a blocked head after its executor returned, or after a restart) has no
 * command: the journal holds only its digest. Said in the words `postern approvals list` uses, never a blank.
 * An MCP card always names its tool; were it ever null, the same words say what is known.
 */
function CommandNotKept({ card }: { card: ApprovalCard }) {
  return (
    <span className="muted" data-testid={`card-${card.ticket}-request`}>
      {commandNotKeptText({ ...card, accepted: dateTime(card.accepted_at_ms) })}
    </span>
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

/**
 * Query or header pairs; a side the broker cut is followed, outside its text, by how much of it is hidden. The pairs
 * the broker did not show are counted after the list, in the page's own words, from the summary pair's third element
 * (`{pairs_hidden}`, which only the broker writes): an agent's pair named "…" valued "6 more not shown" is listed as
 * the agent's pair it is, never taken for the count.
 */
function Pairs({ pairs, noun, testId }: { pairs: readonly CardPair[]; noun: [string, string]; testId: string }) {
  const more = pairs.reduce((sum, pair) => sum + (pairsHiddenOf(pair) ?? 0), 0);
  return (
    <>
      <ul className="pairs" data-testid={testId}>
        {pairs.map((pair, i) => {
          if (pairsHiddenOf(pair) !== null) return null;
          const [name, value] = pair;
          const cut = cutOf(pair);
          return (
            <li key={i}>
              <code>{name}</code>
              <CutNote hidden={cut?.name_hidden} />: <code>{value}</code>
              <CutNote hidden={cut?.value_hidden} />
            </li>
          );
        })}
      </ul>
      {more > 0 && (
        <p className="muted pairs-more" data-testid={`${testId}-more`}>
          {more.toLocaleString('en-US')} more {more === 1 ? noun[0] : noun[1]} not shown
        </p>
      )}
    </>
  );
}

/** The broker's count of pairs not shown (its summary pair's third element), or null for any other pair. */
function pairsHiddenOf(pair: CardPair): number | null {
  const extra = pair[2];
  return extra !== undefined && 'pairs_hidden' in extra ? extra.pairs_hidden : null;
}

function cutOf(pair: CardPair): { name_hidden: number; value_hidden: number } | undefined {
  const extra = pair[2];
  return extra !== undefined && 'name_hidden' in extra ? extra : undefined;
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
  sealed_for_good:
    'not shown: sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them',
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

/**
 * Beside a session's status on a card: that the status is an earlier run's row its sealed events have not confirmed
 * (SessionRecordCheck), so "approved" there is the file's word, not a decision the journal vouches for. Nothing for a
 * confirmed record.
 */
export function SessionRecordNote({ record, testId }: { record: SessionRecordCheck; testId: string }) {
  const words = sessionRecordWords[record];
  if (words === null) return null;
  return (
    <strong className="session-record-note" data-testid={testId}>
      {' '}
      ({words})
    </strong>
  );
}
