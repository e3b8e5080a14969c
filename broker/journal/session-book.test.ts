import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SessionState } from '../contract/index.js';
import { SessionBook } from './session-book.js';

/** A session's state as the projection writes it, in `status`, first written at `seq`. */
function session(n: number, status: SessionState['status'], seq = n, ended = status === 'ended'): SessionState {
  return {
    session_id: `ses_${n}`,
    status,
    pid: 10_000 + n,
    uid: 1000,
    start_time: `${n}00`,
    ppid: 1,
    exe: '/usr/bin/node',
    cwd: '/home/ann',
    parent_exe: null,
    client_name: 'agent',
    client_version: '1',
    allowlist_withheld: null,
    approved_by: null,
    revoked_by: null,
    revoke_reason: null,
    end_reason: ended ? 'process_exited' : null,
    first_seq: seq,
    last_seq: seq,
    started_at_ms: 1_000 + n,
    ended_at_ms: ended ? 2_000 + n : null,
    updated_at_ms: 1_000 + n,
    approved_at_ms: null,
    reconnects: 0,
  };
}

const write = (book: SessionBook, s: SessionState) => book.committed([[s.session_id, s]]);

describe('SessionBook when an agent starts processes by the thousand, each connecting and exiting (THREAT-MODEL 4)', () => {
  it('holds a bounded number of ended sessions, every unended and revoked one, and lists what an unbounded book lists', () => {
    const rows = new Map<string, SessionState>();
    const book = new SessionBook([], { endedKept: 100, fromLog: (id) => rows.get(id) });
    const all = new Map<string, SessionState>();
    const put = (s: SessionState) => {
      rows.set(s.session_id, s);
      all.set(s.session_id, s);
      write(book, s);
    };
    for (let n = 1; n <= 10_000; n++) {
      put(session(n, 'pending'));
      if (n % 1_000 === 0) continue; // this one's process lives on
      if (n % 997 === 0) {
        put({ ...session(n, 'revoked'), last_seq: n });
        put({ ...session(n, 'revoked', n, true) }); // revoked, then its process exited
      } else put(session(n, 'ended'));
    }
    // 10 live, 10 revoked (one of them at 9,970, live as n = 9,970 is not a multiple of 1,000), 100–125 ended.
    expect(book.size()).toBeLessThanOrEqual(10 + 10 + 125);
    expect(book.unendedSessions().map((s) => s.session_id)).toEqual(
      [...all.values()].filter((s) => s.ended_at_ms === null).map((s) => s.session_id),
    );
    // Every list a journal asks for (at most endedKept long) is the list of every session ever written.
    const reference = (limit: number, statuses?: SessionState['status'][]) =>
      [...all.values()]
        .filter((s) => statuses === undefined || statuses.includes(s.status))
        .sort((a, b) => a.first_seq - b.first_seq)
        .slice(-limit);
    for (const limit of [1, 50, 100])
      for (const statuses of [undefined, ['ended' as const], ['pending' as const], ['revoked' as const]])
        expect(book.list(limit, statuses)).toEqual(reference(limit, statuses));
    // A session let go: its process is gone, so no process finds it; asked for by id, it is its row's `ended`.
    expect(book.held('ses_1')).toBeUndefined();
    expect(book.findByProcess(10_001, '100')).toBeUndefined();
    expect(book.get('ses_1')).toEqual(all.get('ses_1'));
    // Revoked sessions and live ones are never let go.
    expect(book.held('ses_997')?.status).toBe('revoked');
    expect(book.findByProcess(11_000, '100000')?.session_id).toBe('ses_1000');
  });

  it('lets go the oldest by first event, not the first to end: the newest sessions stay listed when they end first', () => {
    const book = new SessionBook([], { endedKept: 4 });
    for (let n = 1; n <= 20; n++) write(book, session(n, 'pending'));
    for (let n = 20; n >= 1; n--) write(book, session(n, 'ended'));
    expect(book.list(4).map((s) => s.session_id)).toEqual(['ses_17', 'ses_18', 'ses_19', 'ses_20']);
    expect(book.held('ses_1')).toBeUndefined();
  });

  it('answers a session it does not hold from the log’s fold it is given, and unknown where that fails', () => {
    const log = new Map<string, SessionState>();
    let locked = false;
    const asked: string[] = [];
    const book = new SessionBook([], {
      endedKept: 4,
      fromLog: (id) => {
        asked.push(id);
        if (locked) throw new Error('AUDIT_KEY_UNAVAILABLE');
        return log.get(id);
      },
    });
    for (let n = 1; n <= 20; n++) {
      log.set(`ses_${n}`, session(n, 'ended'));
      write(book, session(n, 'ended'));
    }
    expect(book.held('ses_2')).toBeUndefined();
    expect(book.get('ses_2')).toEqual(session(2, 'ended'));
    // One never written (or never read at open) is what the log says, whatever that is; nothing there: unknown.
    log.set('ses_99', session(99, 'approved'));
    expect(book.get('ses_99')?.status).toBe('approved');
    expect(book.get('ses_98')).toBeUndefined();
    locked = true;
    expect(book.get('ses_3')).toBeUndefined();
    // Held sessions never ask the log.
    asked.length = 0;
    expect(book.get('ses_20')?.session_id).toBe('ses_20');
    expect(asked).toEqual([]);
  });

  it('lists as an unbounded book does, whatever order sessions start, are revoked and end in (property)', () => {
    type Step = { op: 'start' } | { op: 'end'; pick: number } | { op: 'revoke'; pick: number };
    const step = fc.oneof(
      fc.constant<Step>({ op: 'start' }),
      fc.nat().map<Step>((pick) => ({ op: 'end', pick })),
      fc.nat().map<Step>((pick) => ({ op: 'revoke', pick })),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 400 }), fc.integer({ min: 1, max: 12 }), (steps, endedKept) => {
        const book = new SessionBook([], { endedKept });
        const all = new Map<string, SessionState>();
        let n = 0;
        let seq = 0;
        const put = (s: SessionState) => {
          all.set(s.session_id, s);
          write(book, s);
        };
        for (const s of steps) {
          const open = [...all.values()].filter((x) => x.ended_at_ms === null);
          if (s.op === 'start') {
            n += 1;
            seq += 1;
            put(session(n, 'pending', seq));
          } else if (open.length > 0) {
            const target = open[s.pick % open.length] as SessionState;
            seq += 1;
            if (s.op === 'revoke' && target.status !== 'revoked') put({ ...target, status: 'revoked', last_seq: seq });
            else
              put({
                ...target,
                status: target.status === 'revoked' ? 'revoked' : 'ended',
                ended_at_ms: seq,
                last_seq: seq,
              });
          }
        }
        const sorted = [...all.values()].sort((a, b) => a.first_seq - b.first_seq);
        for (const limit of [1, endedKept]) expect(book.list(limit)).toEqual(sorted.slice(-limit));
        expect(book.unendedSessions()).toEqual(sorted.filter((x) => x.ended_at_ms === null));
        const ended = sorted.filter((x) => x.status === 'ended').length;
        expect(book.size()).toBeLessThanOrEqual(
          all.size - ended + Math.min(ended, endedKept + Math.ceil(endedKept / 4)),
        );
      }),
      { numRuns: 200 },
    );
  });
});
