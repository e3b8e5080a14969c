/**
 * Action list benchmark: builds a journal of N events (default 1,000,000: ~100,000 actions of ~10
 * events each, varied across sessions, lanes, routes and outcomes) through the real commit path, then
 * times `actions.list` pages read the way the operator API reads them (the handler's own function):
 * the first page, a deep keyset page, filtered pages. Prints the median of a few runs in ms.
 *
 *   node --import tsx bench/actions-list.ts [--events N] [parent dir for the temp data dir]
 *
 * Not part of the test run. Bounded: at most 2,000,000 events; the temp data dir is removed at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { NewEvent, OperatorInput } from '../broker/contract/index.js';
import { listActions } from '../broker/host/action-list.js';
import { Journal } from '../broker/journal/index.js';
import { FakeClock } from '../broker/testing/fake-clock.js';
import { actionPaths } from '../broker/testing/action-paths.js';
import { createMemoryVault } from '../broker/testing/memory-vault.js';

const eventsMax = 2_000_000;
const runs = 7;
/** Actions handed to the journal at once: enough units to fill its group commits. */
const inFlightUnits = 64;
const paths = [
  'httpNoApproval',
  'httpApproved',
  'http500',
  'rejectedByPerson',
  'expired',
  'lostThenReconciled',
  'callerCancelledAfterDispatch',
] as const;
const routes = ['docs', 'api', 'billing', 'search'] as const;

function parseArgs(argv: readonly string[]): { events: number; parent: string } {
  let events = 1_000_000;
  let parent = tmpdir();
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--events') {
      events = Number(argv[i + 1]);
      i += 1;
    } else parent = argv[i] ?? parent;
  }
  if (!Number.isInteger(events) || events < 1_000 || events > eventsMax)
    throw new RangeError(`--events must be 1000..${eventsMax}`);
  return { events, parent };
}

function script(n: number): NewEvent[] {
  const name = paths[n % paths.length] ?? 'httpNoApproval';
  const id = `act_bench_${String(n).padStart(8, '0')}`;
  const [accepted, ...rest] = actionPaths[name](id);
  if (accepted?.kind !== 'ACTION_ACCEPTED') throw new Error('a script starts with ACTION_ACCEPTED');
  const target = `route:${routes[n % routes.length] ?? 'docs'} POST /documents/${n}`;
  return [
    { ...accepted, session_id: `ses_bench_${n % 8}`, lane: `lane-${n % 16}`, payload: { ...accepted.payload, target } },
    ...rest,
  ];
}

async function build(journal: Journal, clock: FakeClock, events: number): Promise<number> {
  let written = 0;
  let n = 0;
  while (written < events) {
    const batch: Array<Promise<unknown>> = [];
    for (let i = 0; i < inFlightUnits && written < events; i += 1, n += 1) {
      const s = script(n);
      written += s.length;
      batch.push(journal.appendBatch(s));
    }
    await Promise.all(batch);
    clock.advance(250);
    if (n % 10_000 < inFlightUnits) process.stderr.write(`\r${written} events`);
  }
  process.stderr.write('\n');
  return n;
}

function median(journal: Journal, input: OperatorInput<'actions.list'>): { ms: number; rows: number } {
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < runs; i += 1) {
    const t0 = performance.now();
    rows = listActions(journal, input).actions.length;
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)] ?? 0, rows };
}

async function main(): Promise<void> {
  const { events, parent } = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(join(parent, 'postern-bench-list-'));
  const clock = new FakeClock();
  const journal = await Journal.open({ dataDir: dir, clock, vault: await createMemoryVault() });
  try {
    console.log(
      `node ${process.version}, ${process.platform}/${process.arch}, ${availableParallelism()} CPUs: ${cpus()[0]?.model ?? 'unknown'}`,
    );
    const t0 = performance.now();
    const actions = await build(journal, clock, events);
    console.log(
      `built ${journal.stats().events} events, ${actions} actions in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const middle =
      listActions(journal, { limit: 1, before_seq: Math.floor(journal.stats().last_seq / 2) }).actions[0]?.first_seq ??
      1;
    const cases: Array<[string, OperatorInput<'actions.list'>]> = [
      ['first page (100)', {}],
      ['deep keyset page (100, middle of the log)', { before_seq: middle }],
      ['last page (100, oldest actions)', { before_seq: 1_000 }],
      ['filter lane (1 of 16)', { lane: 'lane-7' }],
      ['filter session + outcome', { session_id: 'ses_bench_3', outcome: 'committed' }],
      ['filter code APPROVAL_DENIED, deep', { code: 'APPROVAL_DENIED', before_seq: middle }],
      ['filter open (nothing in flight)', { open: true }],
      ['text "billing" (scans rows)', { text: 'billing' }],
      ['text with no match (one page: the scan bound)', { text: 'no-such-text' }],
      [
        'session + lane + outcome, rare (scan bound)',
        { session_id: 'ses_bench_3', lane: 'lane-4', outcome: 'unknown' },
      ],
      ['500 rows', { limit: 500 }],
    ];
    console.log(`\n${'page'.padEnd(44)} ${'rows'.padStart(5)} ${'median ms'.padStart(10)}  (of ${runs} runs)`);
    for (const [name, input] of cases) {
      const r = median(journal, input);
      console.log(`${name.padEnd(44)} ${String(r.rows).padStart(5)} ${r.ms.toFixed(2).padStart(10)}`);
    }
  } finally {
    await journal.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
