import type { Command } from 'commander';
// Schema-free modules of the contract, not its index: every command registers without loading zod (issue 18: cold
// start); the control client (no schema either) loads when a command asks the broker.
import type {
  ActionListRow,
  ActionWait,
  ApprovalCard,
  BrokerApi,
  BrokerApiMethod,
  CardPair,
  LaneRelease,
  Reply,
} from '../contract/index.js';
import { pairCut, pairsHidden } from '../contract/card-pair-parts.js';
import { isMember } from '../contract/closed-set.js';
import { CodedError } from '../contract/coded-error.js';
import { commandNotKeptText } from '../contract/command-not-kept.js';
import { ErrorCode } from '../contract/error-codes.js';
import { actorLabel, decisionText } from '../contract/operator-actor.js';
import {
  actionListLimitMax,
  activityPageDefault,
  activityPageMax,
  attestBasisCharsMax,
  decisionReasonCharsMax,
  secretInputFields,
} from '../contract/operator-limits.js';
import { Effect, Outcome } from '../contract/outcome.js';
import { sessionRecordWords } from '../contract/session-record.js';
import { unknownWaysOut } from '../contract/unknown-ways-out.js';
import { isHttpToken } from '../core/check-wire-request.js';
import type { ControlRequest } from '../host/control-client.js';
import { controlSocketPath } from '../host/control-socket-path.js';
import { readProofFromTerminal } from './secret-input.js';
import {
  brokerDataDir,
  defaultSubcommand,
  withDataDir,
  type CommandContext,
  type CommonOptions,
} from './command-context.js';

interface JsonOptions extends CommonOptions {
  json?: boolean;
}
interface ReasonOptions extends CommonOptions {
  reason?: string;
}
interface AttestOptions extends CommonOptions {
  outcome: string;
  effect: string;
  basis: string;
}
interface ActivityOptions extends JsonOptions {
  from?: string;
  limit?: string;
  session?: string;
  lane?: string;
  action?: string;
  outcome?: string;
  code?: string;
  text?: string;
  newest?: boolean;
}
interface ActionListOptions extends JsonOptions {
  limit?: string;
  before?: string;
  session?: string;
  lane?: string;
  target?: string;
  outcome?: string;
  code?: string;
  open?: boolean;
  text?: string;
}

/**
 * The operator CLI: `postern approvals list|approve|reject|cancel|abandon`, `postern actions
 * list|show|attest|reconcile|retry`,
 * `postern sessions [approve|revoke]`, `postern activity`. Every command is one operator API call
 * over the running daemon's control socket (0600 in the 0700 data directory) — the same API the
 * desktop UI uses. Agents never reach it: their socket speaks only the six MCP tools.
 */
// eslint-disable-next-line max-lines-per-function -- flat commander registrations, one short block per subcommand
export function registerOperatorCommands(program: Command, context: CommandContext): void {
  const { env } = context;
  // Text output carries agent-chosen strings (commands, paths, executable names): never raw.
  const io = { out: (line: string) => context.io.out(printable(line)) };
  // A decision refused for want of proof is asked again with the passphrase typed on this terminal.
  const call = async <M extends BrokerApiMethod>(
    options: CommonOptions,
    method: M,
    input: BrokerApi[M]['input'],
  ): Promise<BrokerApi[M]['output']> =>
    callOperator(brokerDataDir(options, env), method, input, { proveOnTerminal: true });

  const approvals = program
    .command('approvals')
    .description('Approval cards in ticket order, and the decisions a person makes on them.');
  withDataDir(approvals.command('list').description('Open cards, grouped by lane, in ticket order.'))
    .option('--json', 'print one JSON object')
    .action(async (options: JsonOptions) => {
      const { cards } = await call(options, 'approvals.list', {});
      if (options.json === true) return io.out(JSON.stringify({ cards }));
      if (cards.length === 0) return io.out('No open approval cards.');
      for (const card of cards) io.out(cardLine(card));
    });
  withDataDir(
    approvals
      .command('approve')
      .argument('<ticket>', 'ticket number')
      .description('Approve a ticket (it is sent when it reaches the head of its lane).'),
  ).action(async (ticket: string, options: CommonOptions) => {
    const result = await call(options, 'approvals.approve', { ticket: ticketNumber(ticket) });
    io.out(`Ticket #${result.ticket} approved (journal seq ${result.journal_seq}).`);
  });
  withDataDir(
    approvals
      .command('reject')
      .argument('<ticket>', 'ticket number')
      .description('Reject a ticket with a reason; it is never sent.'),
  )
    .requiredOption('--reason <text>', reasonHelp(true))
    .action(async (ticket: string, options: ReasonOptions) => {
      const result = await call(options, 'approvals.reject', {
        ticket: ticketNumber(ticket),
        reason: reasonText(options.reason),
      });
      io.out(`Ticket #${result.ticket} rejected (journal seq ${result.journal_seq}).`);
    });
  withDataDir(
    approvals
      .command('cancel')
      .argument('<ticket>', 'ticket number')
      .description('Cancel a ticket that has not been sent (even an approved one).'),
  )
    .option('--reason <text>', reasonHelp(false))
    .action(async (ticket: string, options: ReasonOptions) => {
      const result = await call(options, 'approvals.cancel', {
        ticket: ticketNumber(ticket),
        ...(options.reason === undefined ? {} : { reason: reasonText(options.reason) }),
      });
      io.out(`Ticket #${result.ticket} cancelled (journal seq ${result.journal_seq}).`);
    });
  withDataDir(
    approvals
      .command('abandon')
      .argument('<ticket>', 'ticket number')
      .description('Release the lane behind a blocked head whose outcome is unknown. The outcome stays unknown.'),
  )
    .requiredOption('--reason <text>', reasonHelp(true))
    .action(async (ticket: string, options: ReasonOptions) => {
      const result = await call(options, 'approvals.abandon', {
        ticket: ticketNumber(ticket),
        reason: reasonText(options.reason),
      });
      io.out(
        `Ticket #${result.ticket} abandoned; its lane moves on. Its outcome stays unknown (journal seq ${result.journal_seq}).`,
      );
    });

  const actions = program.command('actions').description('Actions as the journal records them.');
  withDataDir(
    actions
      .command('show')
      .argument('<action_id>', 'the action (invocation) id')
      .description("One action's state, queue position and events."),
  )
    .option('--json', 'print one JSON object')
    .action(async (actionId: string, options: JsonOptions) => {
      const shown = await call(options, 'actions.show', { action_id: actionId }).catch((error: unknown) => {
        throw error instanceof SealedForGoodRefusal ? sealedForGoodShow(actionId, error) : error;
      });
      if (options.json === true) return io.out(JSON.stringify(shown));
      const s = shown.state;
      io.out(`${s.action_id}  ticket #${s.ticket ?? '-'}  lane ${s.lane ?? '(none)'}  ${s.target}`);
      io.out(
        `  stage ${s.stage}  decision ${s.decision ?? '-'}  outcome ${s.outcome ?? '-'}  phase ${s.phase ?? '-'}  retry ${s.retry ?? '-'}  code ${s.code ?? '-'}`,
      );
      io.out(
        `  effect ${s.effect ?? '-'}  basis ${s.outcome_basis ?? '-'}  source ${s.source ?? '-'}${s.abandoned ? '  ABANDONED (lane released by a person)' : ''}`,
      );
      for (const line of showIdentityLines(s)) io.out(line);
      if (shown.released_by !== null) io.out(`  ${releaseLine(shown.released_by)}`);
      if (shown.queue !== null) io.out(`  queue: ${shown.queue.text}`);
      for (const w of shown.waited_for) io.out(`  ${waitLine(w)}`);
      for (const e of shown.events)
        io.out(`  #${e.seq} ${new Date(e.at_ms).toISOString()} ${e.kind}${e.summary === '' ? '' : `  ${e.summary}`}`);
    });

  withDataDir(
    actions
      .command('list')
      .description(
        'One line per action, newest first: time, ticket, agent, target, request, lane, who decided, outcome, duration.',
      ),
  )
    .option('--json', 'print one JSON object (the page, next_before, searched_before_seq and as_of_seq)')
    .option('--limit <n>', `rows (default 100, at most ${actionListLimitMax})`)
    .option('--before <seq>', 'only actions accepted before this journal position (the previous page\'s "more" line)')
    .option('--session <id>', 'only this agent session (an id the journal does not hold is refused)')
    .option('--lane <lane>', 'only this lane')
    .option('--target <name>', 'only this route or SSH host (name, or route:name / host:name)')
    .option(
      '--outcome <outcome>',
      'only actions settled with this outcome (not_attempted, rejected, committed, unknown); a running one is --open',
    )
    .option('--code <code>', `only this error code (${codesWhere})`)
    .option('--open', 'only actions not yet settled or closed')
    .option(
      '--text <text>',
      'only rows whose target, request, lane, id, ticket, code or decider contain this (case-insensitive)',
    )
    .action(async (options: ActionListOptions) => {
      const page = await call(options, 'actions.list', actionListInput(options));
      if (page.actions.length === 0 && options.session !== undefined)
        await requireKnownIds(options, { session_id: options.session }, false);
      if (options.json === true) return io.out(JSON.stringify(page));
      for (const line of actionPageLines(page)) io.out(line);
    });

  withDataDir(
    actions
      .command('recording')
      .argument('<action_id>', 'an SSH action')
      .description('An SSH action\'s session recording as asciicast v2 (stdout "o", stderr "e", markers "m").'),
  )
    .option('--out <file>', 'write the .cast file (created 0600, never overwritten) instead of printing it')
    .action(async (actionId: string, options: CommonOptions & { out?: string }) => {
      const recording = await call(options, 'actions.recording', { action_id: actionId });
      // Line by line through the terminal-safe printer: JSON already escapes control bytes, and a bidi override it
      // leaves raw becomes the \uXXXX escape JSON reads as the same character, so the printed cast stays the same cast.
      if (options.out === undefined)
        return recording.cast
          .trimEnd()
          .split('\n')
          .forEach((line) => io.out(line));
      const { writeFileSync } = await import('node:fs');
      try {
        // The scrubbed output is still the operator's to hand out: private to the user, and no file is replaced.
        writeFileSync(options.out, recording.cast, { mode: 0o600, flag: 'wx' });
      } catch (error) {
        const reason = (error as NodeJS.ErrnoException).code === 'EEXIST' ? 'it exists' : 'it cannot be created';
        throw new CodedError('INVALID_ARGUMENT', `--out: ${reason}; nothing was written`, { field: 'out' });
      }
      io.out(`${recording.bytes} bytes written to ${options.out}${recording.truncated ? ' (output truncated)' : ''}`);
    });

  withDataDir(
    actions
      .command('attest')
      .argument(
        '<action_id>',
        "an action whose recorded outcome is unknown (dispatched, or recorded unknown by a quarantined journal's recovery)",
      )
      .description(
        'Settle an unknown outcome with your written basis (recorded as operator_attested; its lane moves on).',
      ),
  )
    .requiredOption(
      '--outcome <outcome>',
      '(required) committed or rejected (never not_attempted: an unknown outcome may have taken effect)',
    )
    .requiredOption(
      '--effect <effect>',
      '(required) committed: succeeded, failed or partial_effect; rejected: rejected or no_effect',
    )
    .requiredOption(
      '--basis <text>',
      `(required) how you know, 1 to ${attestBasisCharsMax} characters (recorded in the journal and shown everywhere)`,
    )
    .action(async (actionId: string, options: AttestOptions) => {
      const outcome = options.outcome === 'committed' || options.outcome === 'rejected' ? options.outcome : undefined;
      if (outcome === undefined)
        throw new CodedError('INVALID_ARGUMENT', 'must be committed or rejected', { field: '--outcome' });
      if (!isMember(Effect, options.effect))
        throw new CodedError('INVALID_ARGUMENT', `must be one of ${Object.keys(Effect).join(', ')}`, {
          field: '--effect',
        });
      const result = await call(options, 'actions.attest', {
        action_id: actionId,
        outcome,
        effect: options.effect,
        basis: boundedText(options.basis, '--basis', attestBasisCharsMax),
      });
      io.out(
        `${actionId} (ticket #${result.ticket}) settled by your attestation: ${outcome} (journal seq ${result.journal_seq}).`,
      );
    });

  withDataDir(
    actions
      .command('reconcile')
      .argument(
        '<action_id>',
        "an action whose recorded outcome is unknown (dispatched, or recorded unknown by a quarantined journal's recovery)",
      )
      .description(
        "Ask the remote what happened, through the route's lookup or its bounded read-back (recorded as its own action); a conclusive answer settles it as source remote_query.",
      ),
  )
    .option('--json', 'print one JSON object')
    .action(async (actionId: string, options: JsonOptions) => {
      // Refused before the passphrase prompt when it cannot work (no lookup, not unknown…): no secret asked for nothing.
      await call(options, 'actions.precheck', { action_id: actionId, operation: 'reconcile' });
      const r = await call(options, 'actions.reconcile', { action_id: actionId });
      if (options.json === true) return io.out(JSON.stringify(r));
      const verdict = r.outcome === 'unknown' ? 'inconclusive, still unknown' : `${r.outcome} (${r.effect})`;
      io.out(
        `${actionId} (ticket #${r.ticket}) reconciled by lookup ${r.lookup_action_id} via ${r.correlation}: ${verdict}, basis ${r.outcome_basis} (journal seq ${r.journal_seq}).`,
      );
      // What the record says about the answer (a "no record" asked too soon, a read-back's ambiguity) is part of it.
      if (r.read_back !== undefined)
        io.out(`read-back: ${r.read_back.matched} matched of ${r.read_back.examined} examined.`);
      if (r.note !== undefined) io.out(`note: ${r.note}`);
    });

  withDataDir(
    actions
      .command('retry')
      .argument('<action_id>', 'an unknown action on a route with an idempotency contract and a retry policy')
      .description(
        'Retry it with the same idempotency key: the kept request is resent as its next attempt under a lease (your command is the fresh decision).',
      ),
  )
    .option('--json', 'print one JSON object')
    .action(async (actionId: string, options: JsonOptions) => {
      await call(options, 'actions.precheck', { action_id: actionId, operation: 'retry' });
      const r = await call(options, 'actions.retry', { action_id: actionId });
      if (options.json === true) return io.out(JSON.stringify(r));
      const how =
        r.generation === null
          ? 'no retry was sent (the record answered)'
          : `retried under lease generation ${r.generation}`;
      io.out(
        `${actionId} (ticket #${r.ticket}): ${how}; now ${r.outcome}${r.effect === null ? '' : ` (${r.effect})`}${r.code === null ? '' : `, ${r.code}`}${r.retry === null ? '' : `, retry ${r.retry}`} (journal seq ${r.journal_seq}).`,
      );
    });

  withDataDir(
    program
      .command('metrics')
      .description(
        'Actions by phase × outcome, by code, and closed before dispatch by a decision or a restart (never one "failures" number).',
      ),
  )
    .option('--json', 'print one JSON object')
    .action(async (options: JsonOptions) => {
      const m = await call(options, 'metrics', {});
      if (options.json === true) return io.out(JSON.stringify(m));
      io.out(`${m.total} actions, ${m.open} open`);
      for (const p of m.by_phase_outcome)
        io.out(`  ${p.phase.padEnd(22)} ${p.outcome.padEnd(14)} ${String(p.count).padStart(8)}`);
      for (const c of m.by_code) io.out(`  ${c.code.padEnd(37)} ${String(c.count).padStart(8)}`);
      // A rejection, an expiry, a cancel or the caller withdrawing is a decision, not a failed phase.
      if (m.decisions.length > 0) io.out('closed before dispatch by a decision or a restart:');
      for (const d of m.decisions) io.out(`  ${d.decision.padEnd(37)} ${String(d.count).padStart(8)}`);
    });

  const sessions = program.command('sessions').description('Agent sessions: one per agent process.');
  withDataDir(
    defaultSubcommand(sessions, 'list').description(
      'The newest 1,000 sessions, oldest first, with status and call counts.',
    ),
  )
    .option('--json', 'print one JSON object')
    .action(async (options: JsonOptions) => {
      const { sessions: list } = await call(options, 'sessions.list', {});
      if (options.json === true) return io.out(JSON.stringify({ sessions: list }));
      if (list.length === 0) return io.out('No agent sessions yet.');
      for (const s of list) {
        // Why an allowlist entry matched this executable but did not approve it: the Sessions card's words.
        const withheld = s.allowlist_withheld === null ? '' : `  allowlist not applied: ${s.allowlist_withheld}`;
        // An earlier run's row its sealed events have not confirmed: the status is the file's word, not the journal's.
        const record = sessionRecordWords[s.record];
        io.out(
          `${s.session_id}  ${s.status}${record === null ? '' : ` (${record})`}${s.connected ? ' (connected)' : ''}  pid ${s.pid}  ${s.exe ?? '(exe unknown)'}  calls ${s.calls}, pending ${s.pending}  since ${new Date(s.started_at_ms).toISOString()}${withheld}`,
        );
      }
    });
  withDataDir(
    sessions
      .command('approve')
      .argument('<session_id>', 'the session (ses_…), as `postern sessions` lists it')
      .description('Approve an agent process once; its session-approval calls may proceed.'),
  ).action(async (sessionId: string, options: CommonOptions) => {
    const s = await call(options, 'sessions.approve', { session_id: sessionId });
    io.out(`Session ${s.session_id} approved (pid ${s.pid}).`);
  });
  withDataDir(
    sessions
      .command('revoke')
      .argument('<session_id>', 'the session (ses_…), as `postern sessions` lists it')
      .description('Revoke a session: new calls are refused, undispatched tickets cancelled.'),
  )
    .requiredOption('--reason <text>', reasonHelp(true))
    .action(async (sessionId: string, options: ReasonOptions) => {
      const s = await call(options, 'sessions.revoke', { session_id: sessionId, reason: reasonText(options.reason) });
      io.out(`Session ${s.session_id} revoked.`);
    });

  withDataDir(
    program.command('activity').description('The journal in append order (filters keep the original positions).'),
  )
    .option('--json', 'print one JSON object')
    .option('--from <seq>', 'start at this journal position')
    .option(
      '--newest',
      `the last page of the journal (the newest --limit events, default ${activityPageDefault}), newest last; filters apply within it`,
    )
    .option('--limit <n>', `rows (default ${activityPageDefault}, at most ${activityPageMax})`)
    .option('--session <id>', 'only this session (an id the journal does not hold is refused)')
    .option('--lane <lane>', 'only this lane')
    .option('--action <id>', 'only this action (an id the journal does not hold is refused)')
    .option(
      '--outcome <outcome>',
      'only events whose own classification says this outcome (not_attempted, rejected, committed, unknown)',
    )
    .option('--code <code>', `only events whose own classification carries this error code (${codesWhere})`)
    .option('--text <text>', 'only rows containing this text (case-insensitive)')
    .action(async (options: ActivityOptions) => {
      const filters = activityFilters(options);
      if (options.newest === true && options.from !== undefined)
        throw new CodedError('INVALID_ARGUMENT', '--newest and --from choose the page two ways: give one', {
          field: '--newest',
        });
      const limit = options.limit === undefined ? undefined : pageLimit(options.limit, activityPageMax);
      const from =
        options.newest === true
          ? await newestFrom(options, limit ?? activityPageDefault)
          : options.from === undefined
            ? undefined
            : positive(options.from, '--from');
      const page = await call(options, 'activity.list', {
        ...(from === undefined ? {} : { from_seq: from }),
        ...(limit === undefined ? {} : { limit }),
        ...filters,
      });
      if (page.events.length === 0)
        await requireKnownIds(options, filters, from === undefined && page.next_seq === null);
      if (options.json === true) return io.out(JSON.stringify(page));
      if (page.events.length === 0) io.out('No events match.');
      for (const e of page.events) {
        io.out(
          `#${e.seq} ${new Date(e.at_ms).toISOString()} ${e.kind} ${e.action_id}${e.ticket === null ? '' : ` #${e.ticket}`}${e.lane === null ? '' : ` [${e.lane}]`}${e.summary === '' ? '' : `  ${e.summary}`}`,
        );
      }
      if (page.next_seq !== null) io.out(`(more: --from ${page.next_seq})`);
    });
  // The last page starts `limit` positions before the journal's end, as the daemon reports it now.
  const newestFrom = async (options: CommonOptions, limit: number): Promise<number> => {
    const { journal } = await call(options, 'status', {});
    return Math.max(1, journal.last_seq - limit + 1);
  };
  /**
   * An empty page for an id the journal never held is a mistyped id, said as `actions show` says one
   * (NOT_FOUND). Asked only when nothing matched; `scanned` says the page already read the whole
   * journal with that id as its only filter, so its emptiness is the answer.
   */
  const requireKnownIds = async (options: CommonOptions, filters: ActivityFilters, scanned: boolean) => {
    const only = Object.keys(filters).length === 1;
    for (const [field, key, what] of idFilters) {
      const id = filters[key];
      if (id === undefined) continue;
      const known = scanned && only ? false : await journalHolds(options, { [key]: id });
      if (!known) throw new CodedError('NOT_FOUND', `no ${what} ${id} in this journal`, { field });
    }
  };
  // Whether any event carries the id: the daemon reads that id's rows by its index, so the first page answers (the loop
  // follows next_seq only should a page ever stop at the scan bound).
  const journalHolds = async (options: CommonOptions, filter: ActivityFilters): Promise<boolean> => {
    for (let from: number | null = 1; from !== null;) {
      const page: BrokerApi['activity.list']['output'] = await call(options, 'activity.list', {
        ...filter,
        from_seq: from,
        limit: 1,
      });
      if (page.events.length > 0) return true;
      from = page.next_seq;
    }
    return false;
  };
}

type ActivityFilters = Omit<BrokerApi['activity.list']['input'], 'from_seq' | 'limit'>;

/** The id filters whose unknown value is refused: the option, the API field, the word for it. */
const idFilters = [
  ['--session', 'session_id', 'session'],
  ['--action', 'action_id', 'action'],
] as const;

function activityFilters(options: ActivityOptions): ActivityFilters {
  const outcome = outcomeFilter(options.outcome);
  const code = codeFilter(options.code);
  return {
    ...(options.session === undefined ? {} : { session_id: idFilter(options.session, '--session') }),
    ...(options.lane === undefined ? {} : { lane: options.lane }),
    ...(options.action === undefined ? {} : { action_id: idFilter(options.action, '--action') }),
    ...(outcome === undefined ? {} : { outcome }),
    ...(code === undefined ? {} : { code }),
    ...(options.text === undefined ? {} : { text: options.text }),
  };
}

/** A blank id (`--session=`, `--session ""`) is a command line gone wrong, said before any broker is asked. */
function idFilter(raw: string, field: '--session' | '--action'): string {
  if (raw.trim() !== '') return raw;
  const lister = field === '--session' ? 'postern sessions' : 'postern actions list';
  throw new CodedError('INVALID_ARGUMENT', `must be an id as \`${lister}\` shows one, not blank`, { field });
}

function outcomeFilter(raw: string | undefined): Outcome | undefined {
  if (raw === undefined) return undefined;
  if (isMember(Outcome, raw)) return raw;
  throw new CodedError('INVALID_ARGUMENT', `must be one of ${Object.keys(Outcome).join(', ')}`, {
    field: '--outcome',
  });
}

const codesWhere = 'the codes are listed in docs/error-codes.md, the closed set in broker/contract/error-codes.ts';

/** Codes are a closed set: a typo would otherwise match nothing and look like "no such failures". */
function codeFilter(raw: string | undefined): ErrorCode | undefined {
  if (raw === undefined) return undefined;
  if (isMember(ErrorCode, raw)) return raw;
  const upper = raw.toUpperCase();
  const hint = isMember(ErrorCode, upper) ? `; did you mean ${upper}?` : '';
  throw new CodedError('INVALID_ARGUMENT', `not an error code (got ${JSON.stringify(raw)}); ${codesWhere}${hint}`, {
    field: '--code',
  });
}

/**
 * A page of `actions list` as lines: one per row, then where to go on. A search stops at its bound of rows
 * examined per page and says how far back it looked, so an empty page is not taken for "nothing older matches".
 */
export function actionPageLines(page: BrokerApi['actions.list']['output']): string[] {
  const lines = page.actions.map(actionLine);
  if (page.searched_before_seq !== null)
    return [
      ...(lines.length === 0 ? ['No actions match among the newest searched.'] : lines),
      `(searched back to seq ${page.searched_before_seq}; more: --before ${page.searched_before_seq})`,
    ];
  if (lines.length === 0) return ['No actions match.'];
  return page.next_before === null ? lines : [...lines, `(more: --before ${page.next_before})`];
}

function actionListInput(options: ActionListOptions): BrokerApi['actions.list']['input'] {
  const outcome = outcomeFilter(options.outcome);
  const code = codeFilter(options.code);
  const limit = options.limit === undefined ? undefined : pageLimit(options.limit, actionListLimitMax);
  return {
    ...(limit === undefined ? {} : { limit }),
    ...(options.before === undefined ? {} : { before_seq: positive(options.before, '--before') }),
    ...(options.session === undefined ? {} : { session_id: idFilter(options.session, '--session') }),
    ...(options.lane === undefined ? {} : { lane: options.lane }),
    ...(options.target === undefined ? {} : { target: options.target }),
    ...(outcome === undefined ? {} : { outcome }),
    ...(code === undefined ? {} : { code }),
    ...(options.open === true ? { open: true } : {}),
    ...(options.text === undefined ? {} : { text: options.text }),
  };
}

/** A page size: one message for every bad value (0, -1, abc, 1e9, over the page bound), naming --limit. */
function pageLimit(raw: string, max: number): number {
  const n = /^\d{1,15}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > max)
    throw new CodedError('INVALID_ARGUMENT', `must be an integer from 1 to ${max} (got ${JSON.stringify(raw)})`, {
      field: '--limit',
    });
  return n;
}

/** One action on one line: when, ticket, agent, target, request, lane, who decided, outcome, how long. */
export function actionLine(a: ActionListRow): string {
  const agent = a.agent === null ? 'broker' : `${a.agent.name ?? '(unnamed)'} pid ${a.agent.pid ?? '?'}`;
  const request = a.method === null ? a.request : `${a.method} ${a.request}`;
  const decided = decisionText(a) ?? 'undecided';
  // Open (settled_at_ms null) shows its furthest stage: the row has no outcome until one is recorded.
  const outcome =
    a.outcome === null || a.settled_at_ms === null
      ? a.stage
      : `${a.outcome}${a.effect === null ? '' : `/${a.effect}`}${a.code === null ? '' : ` (${a.code})`}`;
  const took = a.duration_ms === null ? 'open' : formatMs(a.duration_ms);
  return `${new Date(a.accepted_at_ms).toISOString()}  #${a.ticket ?? '-'}  ${agent}  ${a.target}  ${request}  [${a.lane ?? 'no lane'}]  ${decided}  ${outcome}  ${took}`;
}

/** "#5 waited 41 s for #4": the wait's own words, from the journal's recorded times. */
export function waitLine(w: ActionWait): string {
  return w.ongoing
    ? `waiting for #${w.ticket} (${w.action_id}) for ${formatMs(w.waited_ms)} so far`
    : `waited ${formatMs(w.waited_ms)} for #${w.ticket} (${w.action_id})`;
}

export function formatMs(ms: number): string {
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 10_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)} s`;
  if (ms < 60_000) return `${Math.floor(ms / 1_000)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.floor((ms % 60_000) / 1_000)} s`;
}

/**
 * One operator call over the daemon's control socket; a coded error comes back as a throw. A
 * decision goes first without proof (accepted only under `operator.unattended_decisions`, and then
 * journaled as this process); refused with OPERATOR_PROOF_REQUIRED and `proveOnTerminal`, it is
 * sent again with the vault passphrase typed on the controlling terminal (the person's proof) — unless the refusal
 * says no passphrase can prove a person here (`proof_refusal`: a broker unlocked from a passphrase file).
 * `timeoutMs` bounds the wait for each reply (default: the control client's).
 */
export async function callOperator<M extends BrokerApiMethod>(
  dataDir: string,
  method: M,
  input: BrokerApi[M]['input'],
  options: { proveOnTerminal?: boolean; timeoutMs?: number } = {},
): Promise<BrokerApi[M]['output']> {
  const first = await sendOperator(dataDir, { op: 'api', method, input }, options.timeoutMs);
  // A refusal no passphrase lifts (the broker's passphrase was read from a file): said as it is, nobody is asked.
  if (
    first.ok ||
    first.error.code !== 'OPERATOR_PROOF_REQUIRED' ||
    first.error.proof_refusal !== undefined ||
    options.proveOnTerminal !== true
  )
    return valueOfReply(first) as BrokerApi[M]['output'];
  const refusal = first.error;
  const passphrase = await readProofFromTerminal(
    `Postern decision: ${printable(describeDecision(method, input))}\r\nType the vault passphrase to confirm it is you: `,
    () =>
      new CodedError('OPERATOR_PROOF_REQUIRED', `${refusal.message} (this process has no terminal to ask on)`, {
        field: 'proof',
      }),
  );
  try {
    return valueOfReply(
      await sendOperator(dataDir, { op: 'api', method, input, proof: { passphrase: passphrase.toString('utf8') } }),
    ) as BrokerApi[M]['output'];
  } finally {
    passphrase.fill(0);
  }
}

async function sendOperator(
  dataDir: string,
  request: Extract<ControlRequest, { op: 'api' }>,
  timeoutMs?: number,
): Promise<Reply<unknown>> {
  // The client and its check of the listener load only for a command that asks the broker (it loads no schema).
  const { sendControlRequest } = await import('../host/control-client.js');
  try {
    return await sendControlRequest(controlSocketPath(dataDir), request, timeoutMs);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ECONNREFUSED') {
      throw new CodedError(
        'NOT_FOUND',
        `no broker is running for ${dataDir} (start one with: postern daemon --data-dir ${dataDir})`,
        { field: '--data-dir' },
      );
    }
    throw error;
  }
}

function valueOfReply(reply: Reply<unknown>): unknown {
  if (reply.ok) return reply.value;
  // The daemon answers with contract codes; anything else (a newer daemon's code) is shown as INTERNAL.
  const code = isMember(ErrorCode, reply.error.code) ? reply.error.code : 'INTERNAL';
  const options = reply.error.field === undefined ? {} : { field: reply.error.field };
  if (reply.error.sealed_for_good === true) throw new SealedForGoodRefusal(code, reply.error.message, options);
  throw new CodedError(code, reply.error.message, options);
}

/**
 * A refused read whose reply says `sealed_for_good`: what it asked for was sealed by a broker run that ended before any
 * audit key existed, so no unlock opens it, locked or not (the same code from a locked vault opens once unlocked).
 */
class SealedForGoodRefusal extends CodedError {}

/**
 * `actions show` of an action such a run recorded: said plainly, with no unlock suggested (none would open them), and
 * where what the journal keeps in plaintext of it is still read — its `actions list` row (outcome, code, who decided).
 */
function sealedForGoodShow(actionId: string, refusal: SealedForGoodRefusal): CodedError {
  return new CodedError(
    refusal.code,
    `${actionId}: its events are sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them. What the journal keeps in plaintext of it: postern actions list --text ${actionId}`,
    refusal.field === undefined ? {} : { field: refusal.field },
  );
}

/** What the person is confirming, in one line: the method and its input's values (bounded). */
export function describeDecision(method: BrokerApiMethod, input: unknown): string {
  const parts = Object.entries((input ?? {}) as Record<string, unknown>)
    .filter(([k]) => !(secretInputFields as readonly string[]).includes(k))
    .map(([k, v]) => `${k} ${typeof v === 'string' ? JSON.stringify(v.slice(0, 80)) : JSON.stringify(v)}`);
  return [method, ...parts].join(', ').slice(0, 400);
}

/**
 * Which mechanism released the lane this action blocked as an unknown head, e.g. "lane released
 * by: reconciliation (remote_query) at seq 42; outcome committed" or "lane released by: abandoned
 * by person:alice at seq 57: the remote is gone; outcome stays unknown".
 */
export function releaseLine(r: LaneRelease): string {
  const source = r.kind === 'reconciliation' && r.source !== undefined ? ` (${r.source})` : '';
  const by = r.actor === undefined ? '' : ` by ${actorLabel(r.actor)}`;
  const lease = r.lease_seq === undefined ? '' : ` (retry lease at seq ${r.lease_seq})`;
  const reason = r.reason === undefined ? '' : `: ${r.reason}`;
  const outcome = r.kind === 'abandoned' ? 'outcome stays unknown' : `outcome ${r.outcome}`;
  return `lane released by: ${r.kind}${source}${by} at seq ${r.seq}${lease}${reason}; ${outcome}`;
}

/** A card's body preview on its line is cut to this many characters (`--json` has the whole bounded preview). */
export const cardLineBodyCharsMax = 200;
/** A card's query on its line is cut to this many characters. */
export const cardLineQueryCharsMax = 1_000;

/**
 * One card on one line. Everything an agent chose is made single-line and unforgeable before it is printed: the query
 * percent-encoded as it is sent, each header value and the body preview as a JSON string (quotes, newlines and escape
 * sequences escaped, so neither can end early or paint a line of its own); `printable` then escapes what remains.
 */
export function cardLine(card: ApprovalCard): string {
  const shownHeaders = card.headers.filter((pair) => pairsHidden(pair) === null);
  const headers =
    card.headers.length === 0
      ? ''
      : ` [${shownHeaders.map(headerText).join('; ')}]${pairsNote(card.headers, 'header', 'headers')}`;
  const what =
    card.channel === 'http'
      ? `${card.method ?? ''} ${card.path ?? ''}${queryText(card.query, cardLineQueryCharsMax)}${headers}${bodyText(card)}${requestDetailsText(card)}`
      : card.channel === 'mcp'
        ? `tool ${card.command ?? ''}${bodyText(card)}`
        : sshCommandText(card);
  const agent = card.session === null ? 'no session' : `pid ${card.session.pid} ${card.session.exe ?? ''}`;
  const expires = card.expires_at_ms === null ? '' : `  expires ${new Date(card.expires_at_ms).toISOString()}`;
  // The lane's words may open with the ticket ("#18 dispatched, …"); the line already starts with it.
  const text = card.text.startsWith(`#${card.ticket} `) ? card.text.slice(`#${card.ticket} `.length) : card.text;
  return `#${card.ticket} [${card.lane ?? 'no lane'}] ${text}  ${card.target} ${what}  (${card.approval}; credential ${card.credential}; ${agent})${expires}${waysOutText(card)}`;
}

/**
 * An SSH card's command. A card rebuilt from the journal (a blocked head after its executor returned, or after a
 * restart) has none: the journal never holds a command (it may hold anything, like a body: docs/queue.md), only its
 * digest — the request fingerprint the approval bound. The line says so and names what identifies it, never "$ ".
 */
function sshCommandText(card: ApprovalCard): string {
  if (card.command !== null) return `$ ${card.command}`;
  return `$ (${commandNotKeptText({ ...card, accepted: new Date(card.accepted_at_ms).toISOString() })})`;
}

/** A blocked head's ways out, as command lines: the action id they need is on no other part of the line. */
function waysOutText(card: ApprovalCard): string {
  if (card.state !== 'blocked_head') return '';
  const ways = waysOut({ ...card, abandoned: false });
  return `  ways out: ${ways}${card.retry_possible ? `, or resend it under its key: postern actions retry ${card.action_id}` : ''}`;
}

/** What a person can do about an unknown outcome; for HTTP also the route's lookup (SSH and MCP have none). */
function waysOut(a: { action_id: string; ticket: number | null; abandoned: boolean; channel: string }): string {
  const lookup =
    a.channel === 'http'
      ? `; or ask the remote: postern actions reconcile ${a.action_id} (where its route declares a lookup or read-back)`
      : '';
  return `${unknownWaysOut(a)}${lookup}`;
}

/**
 * `actions show`'s lines on what the action was, beyond its sanitized target: an SSH command is never journaled (only
 * its digest, the request fingerprint), so the line says so rather than leave it to be guessed; and an unknown
 * outcome's ways out, as command lines.
 */
function showIdentityLines(s: BrokerApi['actions.show']['output']['state']): string[] {
  const lines: string[] = [];
  if (s.channel === 'ssh')
    lines.push(
      `  command: not kept (the journal holds only its digest ${s.request_fingerprint}, never the command); accepted ${new Date(s.accepted_at_ms).toISOString()}`,
    );
  if (s.recorded && s.outcome === 'unknown') lines.push(`  ways out: ${waysOut(s)}`);
  return lines;
}

/** Why a card rebuilt from the journal shows no query or headers: never an empty list passed off as "none". */
function requestDetailsText(card: ApprovalCard): string {
  if (card.request_details === 'sealed')
    return '  [query, headers and body size sealed in the journal: unlock the vault to show them]';
  if (card.request_details === 'sealed_for_good')
    return '  [query, headers and body size sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them]';
  if (card.request_details === 'not_recorded')
    return '  [query, headers and body size not recorded: an older broker admitted this call]';
  return '';
}

/**
 * "?a=1&b=x%20y": the pairs percent-encoded as the request sends them, cut at `charsMax` characters of the query with
 * what is hidden said. A side the card cut says so right after it, `…[N more characters not shown]`, in characters a
 * percent-encoded query never holds (an agent's own "…" shows as %E2%80%A6, its "[" as %5B), so no value can fake a cut
 * and the note is never taken for part of the query sent. The line's cut never splits a character's encoding or a note.
 */
export function queryText(query: readonly CardPair[], charsMax: number): string {
  if (query.length === 0) return '';
  let out = '?';
  let shown = out.length;
  let hidden = 0;
  let atLeast = false;
  const add = (prefix: string, raw: string, cutHidden: number | undefined): void => {
    // A character's whole percent-encoding (up to %F0%9F%98%80) is one unit: the cut keeps it whole or leaves it out.
    for (const unit of [prefix, ...[...raw].map(encodedChar)]) {
      if (shown + unit.length <= charsMax && hidden === 0) {
        out += unit;
        shown += unit.length;
      } else hidden += unit.length;
    }
    if (cutHidden === undefined || cutHidden === 0) return;
    if (hidden === 0) out += cutNote(cutHidden);
    else {
      // Past the line's cut: the card's hidden characters count too, at least one each once encoded.
      hidden += cutHidden;
      atLeast = true;
    }
  };
  query.forEach((pair, i) => {
    if (pairsHidden(pair) !== null) return;
    const [k, v] = pair;
    const cut = pairCut(pair);
    add(i === 0 ? '' : '&', k, cut.name_hidden);
    add('=', v, cut.value_hidden);
  });
  const line = hidden === 0 ? out : `${out}… (${atLeast ? 'at least ' : ''}${hidden} more characters)`;
  return `${line}${pairsNote(query, 'query parameter', 'query parameters')}`;
}

/**
 * The broker's count of the pairs a card did not show, `…[6 more query parameters not shown]`, from the summary pair's
 * third element only (which no agent's pair carries): an agent's own pair named "…" is printed as its pair, encoded.
 */
function pairsNote(pairs: readonly CardPair[], one: string, many: string): string {
  const n = pairs.reduce((sum, pair) => sum + (pairsHidden(pair) ?? 0), 0);
  return n === 0 ? '' : `…[${n.toLocaleString('en-US')} more ${n === 1 ? one : many} not shown]`;
}

/** One character percent-encoded; a lone surrogate (an older journal's cut could leave one) as U+FFFD's encoding. */
function encodedChar(c: string): string {
  return encodeURIComponent(/^[\uD800-\uDFFF]$/.test(c) ? '\uFFFD' : c);
}

/**
 * A card pair's header as `name: "value"`, a side the card cut followed by its note (as in queryText). A value may hold
 * any visible ASCII, so "]...[2 more headers not shown" or "1; x-b: 2" would pass for the broker's count or another
 * header: the value is a JSON string (its own quotes escaped), and a name that is not an HTTP token (an older card's
 * summary pair "…") one too, so only the broker's notes and separators stand outside quotes.
 */
function headerText(pair: CardPair): string {
  const [k, v] = pair;
  const cut = pairCut(pair);
  const note = (n: number): string => (n > 0 ? cutNote(n) : '');
  const name = isHttpToken(k) ? k : JSON.stringify(k);
  return `${name}${note(cut.name_hidden)}: ${JSON.stringify(v)}${note(cut.value_hidden)}`;
}

function cutNote(hidden: number): string {
  return `…[${hidden.toLocaleString('en-US')} more characters not shown]`;
}

function bodyText(card: ApprovalCard): string {
  if (card.body_bytes === 0 || card.body_preview === null) return '';
  if (card.body_preview === `${card.body_bytes} bytes of binary`) return `  body ${card.body_preview}`;
  const preview = [...card.body_preview];
  const shown =
    preview.length <= cardLineBodyCharsMax ? card.body_preview : `${preview.slice(0, cardLineBodyCharsMax).join('')}…`;
  return `  body ${card.body_bytes} bytes ${JSON.stringify(shown)}`;
}

/** Help and the local check use the bounds the daemon's schemas are built from (operator-limits.ts): no drift. */
function reasonHelp(required: boolean): string {
  return `${required ? '(required) ' : ''}why, 1 to ${decisionReasonCharsMax} characters (recorded in the journal)`;
}

function reasonText(raw: string | undefined): string {
  return boundedText(raw ?? '', '--reason', decisionReasonCharsMax);
}

/** Checked here so the error names the option the person typed, not the API field behind it. */
function boundedText(raw: string, field: string, max: number): string {
  const text = raw.trim();
  if (text.length === 0 || text.length > max) {
    throw new CodedError('INVALID_ARGUMENT', `must be 1 to ${max} characters, not blank (got ${text.length})`, {
      field,
    });
  }
  return text;
}

function ticketNumber(raw: string): number {
  return positive(raw.replace(/^#/, ''), 'ticket');
}

function positive(raw: string, field: string): number {
  const n = /^\d{1,15}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n <= 0)
    throw new CodedError('INVALID_ARGUMENT', `must be a positive integer (got ${JSON.stringify(raw)})`, { field });
  return n;
}

/**
 * A line safe to print on an operator's terminal: C0/C1 control characters (escape sequences,
 * carriage returns that overwrite what was printed) and Unicode bidirectional overrides become
 * visible \uXXXX escapes. Agents choose commands, paths and executable names; none of that may
 * repaint the operator's screen.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point here
const unprintable = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

export function printable(line: string): string {
  return line.replace(unprintable, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
