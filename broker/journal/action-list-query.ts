import type { Database, Statement } from 'better-sqlite3';
import { expiredWords } from '../contract/index.js';
import { openActionsCondition } from './migrations/020-open-includes-blocking-unknown.js';
import { settledOutcomeCondition } from './migrations/021-outcome-filter-settled.js';
import { actionListScanRowsMax } from './action-list-scan-rows.js';

/** What a page of the action list is narrowed by; every field optional (AND of the ones given). */
export interface ActionListFilter {
  /** Keyset paging: only rows whose first_seq is below this. */
  readonly beforeSeq?: number;
  readonly limit: number;
  readonly sessionId?: string;
  readonly lane?: string;
  /** The route or host name, without its `route:` / `host:` prefix. */
  readonly targetName?: string;
  /**
   * Only actions settled with this outcome (schema 21's partial index): a dispatched action still running says unknown
   * provisionally and is left out (`open` finds it), as `status` counts unknown.
   */
  readonly outcome?: string;
  readonly code?: string;
  /**
   * Only actions not yet settled or closed, and those whose recorded unknown outcome their lane still waits on (not
   * attested, reconciled or abandoned): schema 20's partial index.
   */
  readonly open?: boolean;
  /** Lower-cased needle; matched case-insensitively as a substring. */
  readonly text?: string;
}

/** One stored row of the action list: the projection's columns and the session's agent (schema 10). */
export interface ActionListDbRow {
  action_id: string;
  ticket: number | null;
  accepted_at_ms: number;
  session_id: string | null;
  channel: string;
  target: string;
  target_name: string | null;
  lane: string | null;
  stage: string;
  decision: string | null;
  decided_by: string | null;
  decided_seq: number | null;
  outcome: string | null;
  code: string | null;
  effect: string | null;
  decided_at_ms: number | null;
  dispatched_at_ms: number | null;
  settled_at_ms: number | null;
  first_seq: number;
  last_seq: number;
  agent_pid: number | null;
  agent_name: string | null;
  agent_exe: string | null;
  /** ACTION_ACCEPTED's approval mode and the rule that set it (the state the projection holds). */
  approval: string | null;
  approval_rule: string | null;
}

/** The earlier tickets of a lane a wait computation reads: newest first, bounded. */
export interface LaneTicketRow {
  action_id: string;
  ticket: number;
  resolved_at_ms: number | null;
}

const listColumns = `
  a.action_id, a.ticket, a.accepted_at_ms, a.session_id, a.channel, a.target, a.target_name, a.lane, a.stage,
  a.decision, a.decided_by, a.decided_seq, a.outcome, a.code, a.effect, a.decided_at_ms, a.dispatched_at_ms,
  a.settled_at_ms, a.first_seq, a.last_seq, s.pid AS agent_pid,
  json_extract(s.state, '$.client_name') AS agent_name, json_extract(s.state, '$.exe') AS agent_exe,
  json_extract(a.state, '$.approval') AS approval, json_extract(a.state, '$.approval_rule') AS approval_rule`;

/**
 * Who decided, in the words the list shows (decisionText in broker/contract/operator-actor.ts):
 * `<decision> by <decided_by>`, else the decision alone. A call policy allowed at admission (approval: none) has
 * neither; its words come from the state (policyWordsCondition).
 */
const decisionWords = `CASE WHEN a.decision = 'expired' THEN '${expiredWords}'
  WHEN a.decided_by IS NOT NULL THEN coalesce(a.decision, 'allowed') || ' by ' || a.decided_by
  ELSE a.decision END`;

/** Each text-searchable column; a null column never matches. */
const textColumns = ['a.target', 'a.action_id', 'a.lane', `'#' || a.ticket`, 'a.code', decisionWords];

/**
 * The fixed words a call policy allowed at admission shows for who decided (admissionPolicyDecider in broker/core,
 * after decisionText's `allowed by`): `allowed by policy (approval: none)`, or with its rule
 * `allowed by policy (approval: none; <approval_rule>)`.
 */
const policyWords = 'allowed by policy (approval: none';

/** A row no decision event decided (cheap columns; the state is read after them). */
const noDecisionEvent = 'a.decided_by IS NULL AND a.decided_seq IS NULL';
/** Admitted under `approval: none` (the plaintext state ACTION_ACCEPTED left): parses the state. */
const approvalNone = `json_extract(a.state, '$.approval') = 'none'`;
/** The words such a row shows, rule included (parses the state again). */
const policyPhrase = `'${policyWords}' || coalesce('; ' || json_extract(a.state, '$.approval_rule'), '') || ')'`;

/**
 * How a text search matches those words, cheaply (the state is ~1 KB of JSON): a needle within the words every such
 * row shows matches each row admitted under `approval: none`; one that reaches into a rule is looked for first in the
 * stored state's raw text (a LIKE, no parse) — its part past the fixed words is there as typed when the row's rule
 * holds it — and only then in the whole phrase. A search for words nowhere in a row's state so never parses it.
 */
export function policyWordsCondition(needle: string): { sql: string; values: unknown[] } {
  if (policyWords.includes(needle)) return { sql: `(${noDecisionEvent} AND ${approvalNone})`, values: [] };
  const phrase = { sql: `${approvalNone} AND instr(lower(${policyPhrase}), ?) > 0`, values: [needle] };
  const fixed = `${policyWords}; `;
  // Within `…none)` or `…none; `: only the phrase tells (a rare needle: it ends in the paren or the semicolon).
  if (fixed.includes(needle) || `${policyWords})`.includes(needle))
    return { sql: `(${noDecisionEvent} AND ${phrase.sql})`, values: phrase.values };
  // The longest head of the needle that ends the fixed words: the rest lies in the rule (and its closing paren).
  let head = 0;
  for (let k = Math.min(needle.length - 1, fixed.length); k > 0; k -= 1)
    if (fixed.endsWith(needle.slice(0, k))) {
      head = k;
      break;
    }
  const inRule = needle.slice(head).replace(/\)$/, '');
  // Text JSON escapes (a quote, a backslash, a control character) is not in the raw state as typed: the phrase tells.
  if (inRule === '' || [...inRule].some((c) => c === '"' || c === '\\' || c < ' '))
    return { sql: `(${noDecisionEvent} AND ${phrase.sql})`, values: phrase.values };
  return {
    sql: `(${noDecisionEvent} AND a.state LIKE ? ESCAPE '\\' AND ${phrase.sql})`,
    values: [`%${inRule.replace(/[\\%_]/g, (c) => `\\${c}`)}%`, ...phrase.values],
  };
}

export { actionListScanRowsMax };

/** One page: `limit + 1` rows at most (the extra one says another page follows). */
export interface ActionListPage {
  rows: ActionListDbRow[];
  /**
   * Set when the page stopped at the scan bound before finding `limit + 1` rows: every action from
   * `beforeSeq` down to this first_seq (inclusive) was examined, none older; the next page is `beforeSeq` = this.
   */
  searchedBeforeSeq: number | null;
}

/** A filter as SQL: the condition, its bound values, and the index whose range it reads. */
interface Condition {
  readonly sql: string;
  readonly values: readonly unknown[];
  readonly index: string;
}

/**
 * The SQL of one page, built from fixed fragments (values are bound). One filter drives the read —
 * an index ending in first_seq (migration 010), chosen in a fixed order and named with INDEXED BY so
 * the plan never changes under the bound — and the others (and the text) test the rows it yields.
 * With none to test, a page is one index range read of `limit + 1` rows however deep it is; with
 * some, `floorSql` first finds the oldest first_seq within `scanRowsMax` rows of the driving range
 * (index only), and the page reads no further than it.
 */
export function actionListSql(filter: Omit<ActionListFilter, 'limit'>): {
  sql: string;
  floorSql: string | null;
  /** The driving filter's and `beforeSeq`'s values (the floor's, then the page's first). */
  rangeArgs: unknown[];
  /** The tested filters' values: in the page's SQL after the floor's own `first_seq >= ?`. */
  testedArgs: unknown[];
} {
  const equalities: Condition[] = [];
  if (filter.code !== undefined)
    equalities.push({ sql: 'a.code IS NOT NULL AND a.code = ?', values: [filter.code], index: 'actions_list_by_code' });
  if (filter.open === true)
    equalities.push({ sql: `(${openActionsCondition})`, values: [], index: 'actions_list_open' });
  if (filter.lane !== undefined)
    equalities.push({ sql: 'a.lane = ?', values: [filter.lane], index: 'actions_list_by_lane' });
  if (filter.targetName !== undefined)
    equalities.push({ sql: 'a.target_name = ?', values: [filter.targetName], index: 'actions_list_by_target' });
  if (filter.sessionId !== undefined)
    equalities.push({ sql: 'a.session_id = ?', values: [filter.sessionId], index: 'actions_list_by_session' });
  if (filter.outcome !== undefined)
    equalities.push({
      sql: `a.outcome = ? AND ${settledOutcomeCondition}`,
      values: [filter.outcome],
      index: 'actions_list_by_outcome',
    });
  const [driving, ...tested] = equalities;
  if (filter.text !== undefined) {
    const policy = policyWordsCondition(filter.text);
    tested.push({
      sql: `(${[...textColumns.map((c) => `instr(lower(${c}), ?) > 0`), policy.sql].join(' OR ')})`,
      values: [...textColumns.map(() => filter.text), ...policy.values],
      index: '',
    });
  }
  const range: Condition[] = [
    ...(driving === undefined ? [] : [driving]),
    ...(filter.beforeSeq === undefined ? [] : [{ sql: 'a.first_seq < ?', values: [filter.beforeSeq], index: '' }]),
  ];
  const index = driving?.index ?? 'actions_list';
  const where = (conditions: readonly Condition[]): string =>
    conditions.length === 0 ? '' : `WHERE ${conditions.map((c) => c.sql).join(' AND ')}`;
  const values = (conditions: readonly Condition[]): unknown[] => conditions.flatMap((c) => c.values);
  if (tested.length === 0) {
    return {
      sql: `SELECT ${listColumns} FROM actions a INDEXED BY ${index} LEFT JOIN sessions s ON s.session_id = a.session_id
        ${where(range)} ORDER BY a.first_seq DESC LIMIT ?`,
      floorSql: null,
      rangeArgs: values(range),
      testedArgs: [],
    };
  }
  const bounded = [...range, { sql: 'a.first_seq >= ?', values: [], index: '' }, ...tested];
  return {
    sql: `SELECT ${listColumns} FROM actions a INDEXED BY ${index} LEFT JOIN sessions s ON s.session_id = a.session_id
      ${where(bounded)} ORDER BY a.first_seq DESC LIMIT ?`,
    floorSql: `SELECT a.first_seq FROM actions a INDEXED BY ${index} ${where(range)}
      ORDER BY a.first_seq DESC LIMIT 2 OFFSET ?`,
    rangeArgs: values(range),
    testedArgs: values(tested),
  };
}

/**
 * The action list's reads: newest first by first_seq, keyset paged (actionListSql). One prepared
 * statement per SQL text.
 */
export class ActionListQuery {
  private readonly statements = new Map<string, Statement<unknown[], unknown>>();
  private laneStatement: Statement<[string, number, number], LaneTicketRow> | undefined;
  private lastAtStatement: Statement<[], { at_ms: number }> | undefined;

  constructor(private readonly db: Database) {}

  /**
   * `limit + 1` rows at most, examining at most `scanRowsMax` rows (default actionListScanRowsMax)
   * when a filter beyond the driving one tests each row.
   */
  page(filter: ActionListFilter, scanRowsMax = actionListScanRowsMax): ActionListPage {
    if (!Number.isSafeInteger(scanRowsMax) || scanRowsMax < 1) throw new RangeError('scanRowsMax must be positive');
    const { sql, floorSql, rangeArgs, testedArgs } = actionListSql(filter);
    const end = filter.limit + 1;
    if (floorSql === null)
      return { rows: this.all<ActionListDbRow>(sql, [...rangeArgs, end]), searchedBeforeSeq: null };
    // The bound's row (the oldest it lets a page examine) and whether anything older follows it.
    const floor = this.all<{ first_seq: number }>(floorSql, [...rangeArgs, scanRowsMax - 1]);
    const low = floor.length < 2 ? null : (floor[0]?.first_seq ?? null);
    const rows = this.all<ActionListDbRow>(sql, [...rangeArgs, low ?? 0, ...testedArgs, end]);
    return { rows, searchedBeforeSeq: low === null || rows.length > filter.limit ? null : low };
  }

  private all<Row>(sql: string, args: readonly unknown[]): Row[] {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement.all(...args) as Row[];
  }

  /** The lane's tickets below `ticket`, newest first, at most `limit` (the (lane, ticket) index). */
  laneTicketsBefore(lane: string, ticket: number, limit: number): LaneTicketRow[] {
    this.laneStatement ??= this.db.prepare(`
      SELECT action_id, ticket, resolved_at_ms FROM actions
      WHERE lane = ? AND ticket < ? ORDER BY ticket DESC LIMIT ?`) as Statement<
      [string, number, number],
      LaneTicketRow
    >;
    return this.laneStatement.all(lane, ticket, limit);
  }

  /** The wall time of the newest event: "now" as the journal last recorded it. */
  lastEventAtMs(): number | null {
    this.lastAtStatement ??= this.db.prepare(`SELECT at_ms FROM events ORDER BY seq DESC LIMIT 1`) as Statement<
      [],
      { at_ms: number }
    >;
    return this.lastAtStatement.get()?.at_ms ?? null;
  }
}
