import { describe, expect, it } from 'vitest';
import type { LaneRelease } from '../contract/index.js';
import { printable, releaseLine } from './operator-commands.js';

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
