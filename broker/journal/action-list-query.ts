import type { Database, Statement } from 'better-sqlite3';

/** What a page of the action list is narrowed by; every field optional (AND of the ones given). */
export interface ActionListFilter {
  /** Keyset paging: only rows whose first_seq is below this. */
  readonly beforeSeq?: number;
  readonly limit: number;
  readonly sessionId?: string;
  readonly lane?: string;
  /** The route or host name, without its `route:` / `host:` prefix. */
  readonly targetName?: string;
  readonly outcome?: string;
  readonly code?: string;
  /** Only actions with no settled time (schema 10's partial index). */
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
  json_extract(s.state, '$.client_name') AS agent_name, json_extract(s.state, '$.exe') AS agent_exe`;

/** Each text-searchable column; a null column never matches. */
const textColumns = ['a.target', 'a.action_id', 'a.lane', `'#' || a.ticket`, 'a.code', 'a.decided_by'];

/**
 * The action list's SQL: newest first by first_seq, keyset paged, each filter an equality on a
 * column whose index ends in first_seq (migration 010), so a page is one index range read of
 * `limit + 1` rows however deep it is. Only the text filter reads rows it may not return. One
 * prepared statement per combination of filters, built from fixed fragments (values are bound).
 */
export class ActionListQuery {
  private readonly statements = new Map<string, Statement<unknown[], ActionListDbRow>>();
  private laneStatement: Statement<[string, number, number], LaneTicketRow> | undefined;
  private lastAtStatement: Statement<[], { at_ms: number }> | undefined;

  constructor(private readonly db: Database) {}

  /** `limit + 1` rows at most: the extra one says whether another page follows. */
  page(filter: ActionListFilter): ActionListDbRow[] {
    const where: string[] = [];
    const args: unknown[] = [];
    const add = (sql: string, ...values: unknown[]): void => {
      where.push(sql);
      args.push(...values);
    };
    if (filter.beforeSeq !== undefined) add('a.first_seq < ?', filter.beforeSeq);
    if (filter.sessionId !== undefined) add('a.session_id = ?', filter.sessionId);
    if (filter.lane !== undefined) add('a.lane = ?', filter.lane);
    if (filter.targetName !== undefined) add('a.target_name = ?', filter.targetName);
    if (filter.outcome !== undefined) add('a.outcome = ?', filter.outcome);
    if (filter.code !== undefined) add('a.code IS NOT NULL AND a.code = ?', filter.code);
    if (filter.open === true) add('a.settled_at_ms IS NULL');
    if (filter.text !== undefined) {
      add(
        `(${textColumns.map((c) => `instr(lower(${c}), ?) > 0`).join(' OR ')})`,
        ...textColumns.map(() => filter.text),
      );
    }
    const sql = `SELECT ${listColumns} FROM actions a LEFT JOIN sessions s ON s.session_id = a.session_id
      ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`} ORDER BY a.first_seq DESC LIMIT ?`;
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql) as Statement<unknown[], ActionListDbRow>;
      this.statements.set(sql, statement);
    }
    return statement.all(...args, filter.limit + 1);
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
