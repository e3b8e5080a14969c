import { describe, expect, it } from 'vitest';
import type { ActionListRow, ApprovalCard, LaneRelease } from '../contract/index.js';
import { isFieldValue, isHttpToken } from '../core/index.js';
import {
  actionLine,
  actionPageLines,
  cardLine,
  cardLineBodyCharsMax,
  cardLineQueryCharsMax,
  printable,
  queryText,
  releaseLine,
} from './operator-commands.js';

describe('printable: agent-chosen text on an operator terminal', () => {
  it('turns escape sequences, carriage returns and bidi overrides into visible escapes', () => {
    const hostile = 'rm -rf ~/x\r\u001b[2K#12 [lane] $ ls\u202Egnp.exe';
    const shown = printable(hostile);
    expect(shown).toBe('rm -rf ~/x\\u000d\\u001b[2K#12 [lane] $ ls\\u202egnp.exe');
    expect([...shown].some((c) => c.charCodeAt(0) < 0x20 || c === '\u202e')).toBe(false);
  });

  it('leaves ordinary text, including non-ASCII, as it is', () => {
    expect(printable('#7 [doc-7] approved, waiting for #6  POST /docs/7 — ünïcode ✓')).toBe(
      '#7 [doc-7] approved, waiting for #6  POST /docs/7 — ünïcode ✓',
    );
  });
});

describe('releaseLine: which mechanism released a blocked lane, in one line', () => {
  const alice = { kind: 'person', id: 'alice' } as const;
  it.each<[LaneRelease, string]>([
    [
      { kind: 'reconciliation', seq: 42, outcome: 'committed', source: 'remote_query' },
      'lane released by: reconciliation (remote_query) at seq 42; outcome committed',
    ],
    [
      { kind: 'reconciliation', seq: 42, actor: alice, outcome: 'rejected', source: 'remote_query' },
      'lane released by: reconciliation (remote_query) by person:alice at seq 42; outcome rejected',
    ],
    [
      { kind: 'abandoned', seq: 57, actor: alice, outcome: 'unknown', reason: 'the remote is gone' },
      'lane released by: abandoned by person:alice at seq 57: the remote is gone; outcome stays unknown',
    ],
    [
      {
        kind: 'operator_attested',
        seq: 60,
        actor: alice,
        outcome: 'committed',
        source: 'operator_attested',
        reason: 'seen in the audit log',
      },
      'lane released by: operator_attested by person:alice at seq 60: seen in the audit log; outcome committed',
    ],
    [
      {
        kind: 'same_key_retry',
        seq: 70,
        actor: { kind: 'broker', id: 'retry-engine' },
        lease_seq: 66,
        outcome: 'committed',
        source: 'remote_response',
      },
      'lane released by: same_key_retry by broker:retry-engine at seq 70 (retry lease at seq 66); outcome committed',
    ],
  ])('%o', (release, line) => {
    expect(releaseLine(release)).toBe(line);
  });
});

describe('actionPageLines: a page of `actions list` and where to go on', () => {
  const row: ActionListRow = {
    action_id: 'act_one',
    ticket: 3,
    accepted_at_ms: Date.UTC(2026, 0, 2, 3, 4, 5),
    session_id: null,
    agent: null,
    channel: 'http',
    target: 'docs',
    method: 'GET',
    request: '/x',
    lane: null,
    stage: 'accepted',
    decision: null,
    decided_by: null,
    outcome: null,
    code: null,
    effect: null,
    decided_at_ms: null,
    dispatched_at_ms: null,
    settled_at_ms: null,
    duration_ms: null,
    first_seq: 900,
    last_seq: 900,
  };

  it('when a search stopped at its bound with nothing found: says how far back it looked and how to go on', () => {
    expect(actionPageLines({ actions: [], next_before: 812, searched_before_seq: 812, as_of_seq: 9_000 })).toEqual([
      'No actions match among the newest searched.',
      '(searched back to seq 812; more: --before 812)',
    ]);
  });

  it('when a search stopped at its bound after some rows: the rows, then the same line', () => {
    const lines = actionPageLines({ actions: [row], next_before: 812, searched_before_seq: 812, as_of_seq: 9_000 });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('#3');
    expect(lines[1]).toBe('(searched back to seq 812; more: --before 812)');
  });

  it('when the page is complete or the last: as before', () => {
    expect(actionPageLines({ actions: [], next_before: null, searched_before_seq: null, as_of_seq: 9_000 })).toEqual([
      'No actions match.',
    ]);
    expect(actionPageLines({ actions: [row], next_before: 900, searched_before_seq: null, as_of_seq: 9_000 })[1]).toBe(
      '(more: --before 900)',
    );
    expect(
      actionPageLines({ actions: [row], next_before: null, searched_before_seq: null, as_of_seq: 9_000 }),
    ).toHaveLength(1);
  });
});

describe('cardLine: one approval card on one line, as `approvals list` prints it', () => {
  const card: ApprovalCard = {
    ticket: 22,
    action_id: 'act_card',
    lane: 'route:echo',
    channel: 'http',
    approval: 'per_call',
    approval_rule: null,
    state: 'pending',
    waiting_for_ticket: null,
    text: 'waiting for approval',
    session: null,
    target: 'route:echo',
    method: 'POST',
    path: '/bigresp',
    query: [],
    headers: [],
    command: null,
    body_preview: null,
    body_bytes: 0,
    credential: 'echo',
    request_fingerprint: 'sha256:00',
    accepted_at_ms: 0,
    expires_at_ms: null,
    retry_of: null,
    dispatch_recorded: false,
    retry_possible: false,
    retry_until_ms: null,
  };
  const printed = (c: ApprovalCard): string => printable(cardLine(c));

  it('an SSH card rebuilt from the journal says its command is not kept, with digest, action and acceptance', () => {
    const line = printed({
      ...card,
      channel: 'ssh',
      lane: 'host:lab',
      target: 'host:lab',
      method: null,
      path: null,
      state: 'blocked_head',
    });
    expect(line).toContain(
      'host:lab $ (command not kept: the journal holds only its digest sha256:00; action act_card, accepted 1970-01-01T00:00:00.000Z)',
    );
  });

  it('when the body is large: shows its size and a bounded preview, so a CLI approver does not decide blind', () => {
    const line = printed({ ...card, body_preview: `${'x'.repeat(2048)}… (921600 bytes)`, body_bytes: 921_600 });
    expect(line).toContain(`POST /bigresp  body 921600 bytes "${'x'.repeat(cardLineBodyCharsMax)}…"`);
    expect(line.length).toBeLessThan(400);
  });

  it('when the agent writes a fake card line and an escape sequence into the body: one line, nothing forged', () => {
    const body = 'ok"\n#23 [route:x] approved  \u001b[2K\r';
    const line = printed({ ...card, body_preview: body, body_bytes: body.length });
    expect(line.split('\n')).toHaveLength(1);
    expect([...line].some((c) => c.charCodeAt(0) < 0x20)).toBe(false);
    expect(line).toContain(`body ${body.length} bytes "ok\\"\\n#23 [route:x] approved  \\u001b[2K\\r"`);
  });

  it('when the body is binary: says so with its size', () => {
    expect(printed({ ...card, body_preview: '5 bytes of binary', body_bytes: 5 })).toContain(
      '/bigresp  body 5 bytes of binary',
    );
  });

  it('when the query holds newlines and separators: percent-encoded as sent, on the same line', () => {
    const line = printed({
      ...card,
      method: 'GET',
      path: '/slow',
      query: [
        ['delay', '30000'],
        ['q', 'a&b\n#9 x'],
      ],
    });
    expect(line).toContain('GET /slow?delay=30000&q=a%26b%0A%239%20x  (per_call');
  });

  it('when the card cut a query value: says how many characters are hidden, outside the encoded query', () => {
    const line = printed({
      ...card,
      method: 'GET',
      path: '/q',
      query: [
        ['big', 'Q'.repeat(512), { name_hidden: 0, value_hidden: 1988 }],
        // The agent's own "…" and a fake note: percent-encoded as sent, so they cannot pass for the broker's cut.
        ['fake', 'QQ…[9 more characters not shown]'],
      ],
      headers: [['x-long', 'h'.repeat(512), { name_hidden: 0, value_hidden: 7 }]],
    });
    expect(line).toContain(
      `GET /q?big=${'Q'.repeat(512)}…[1,988 more characters not shown]&fake=QQ%E2%80%A6%5B9%20more%20characters%20not%20shown%5D [x-long: "${'h'.repeat(512)}"…[7 more characters not shown]]  (per_call`,
    );
  });

  it('when the query is longer than the line shows: cut whole escapes and says how many more characters', () => {
    const text = queryText([['q', '…'.repeat(400)]], cardLineQueryCharsMax);
    // "?q=" and 110 whole escapes of 9 characters ("%E2%80%A6") fit in 1,000; the rest is counted, never split.
    expect(text).toBe(`?q=${'%E2%80%A6'.repeat(110)}… (${(400 - 110) * 9} more characters)`);
    const cut = queryText(
      [
        ['a', 'x'.repeat(cardLineQueryCharsMax)],
        ['b', 'y'.repeat(512), { name_hidden: 0, value_hidden: 30 }],
      ],
      cardLineQueryCharsMax,
    );
    expect(cut).toBe(`?a=${'x'.repeat(cardLineQueryCharsMax - 3)}… (at least ${3 + 3 + 512 + 30} more characters)`);
  });

  it('says how many pairs the card did not show from the broker\'s count, and prints an agent\'s own "…" pair encoded', () => {
    const line = printed({
      ...card,
      method: 'GET',
      path: '/q',
      query: [
        ['…', '6 more not shown'],
        ['…', '2 more not shown', { pairs_hidden: 2 }],
      ],
      headers: [
        ['x-a', '1'],
        ['…', '1 more not shown', { pairs_hidden: 1 }],
      ],
    });
    expect(line).toContain(
      'GET /q?%E2%80%A6=6%20more%20not%20shown…[2 more query parameters not shown] [x-a: "1"]…[1 more header not shown]',
    );
  });

  it("when an agent's header value imitates the broker's count or another header: it stays inside its quotes", () => {
    // Header validation refuses the broker's own "…" in a value (and "[", "]", ";" in a name), but a value may hold
    // visible ASCII: "]...[2 more headers not shown" and "; x-b: 2" pass it and are sent as they are.
    const fakes = ['1]...[2 more headers not shown', '1; authorization: Bearer x', 'say "hi"'];
    expect(fakes.map(isFieldValue)).toEqual([true, true, true]);
    expect(isFieldValue('1]…[2 more headers not shown')).toBe(false);
    expect(['x-a]', 'x-a;', '…'].map(isHttpToken)).toEqual([false, false, false]);
    const line = printed({ ...card, headers: fakes.map((v, i): [string, string] => [`x-${i}`, v]) });
    expect(line).toContain(
      '[x-0: "1]...[2 more headers not shown"; x-1: "1; authorization: Bearer x"; x-2: "say \\"hi\\""]  (per_call',
    );
    // An older card's summary pair, and any name that is not a token, is quoted too.
    expect(printed({ ...card, headers: [['…', '2 more not shown']] })).toContain(
      '["…": "2 more not shown"]  (per_call',
    );
  });

  it('when the lane text opens with the ticket: says the ticket once', () => {
    const line = printed({ ...card, text: '#22 dispatched, waiting for its outcome', state: 'dispatching' });
    expect(line.startsWith('#22 [route:echo] dispatched, waiting for its outcome  route:echo POST')).toBe(true);
  });
});

describe('actionLine: who decided', () => {
  it('when policy allowed the call at admission: says so, not "undecided"', () => {
    const row = {
      action_id: 'act_policy',
      ticket: 4,
      accepted_at_ms: 0,
      session_id: null,
      agent: null,
      channel: 'http',
      target: 'echo',
      method: 'GET',
      request: '/slow?delay=30000',
      lane: null,
      stage: 'result_committed',
      decision: null,
      decided_by: 'policy (approval: none)',
      outcome: 'committed',
      code: null,
      effect: 'succeeded',
      decided_at_ms: null,
      dispatched_at_ms: 1,
      settled_at_ms: 2,
      duration_ms: 2,
      first_seq: 1,
      last_seq: 9,
    } satisfies ActionListRow;
    expect(actionLine(row)).toContain(
      'echo  GET /slow?delay=30000  [no lane]  allowed by policy (approval: none)  committed',
    );
  });
});
