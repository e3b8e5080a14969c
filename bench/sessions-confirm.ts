/**
 * What a sessions.list costs the loop the first time after a restart, when it confirms an earlier run's ended sessions
 * from their sealed events (Journal.listCountedSessions: every session not ended, and at most 100 ended ones a call),
 * against a list once every one is confirmed. Each session has the events a real agent process leaves: started, a
 * few reconnections, ended.
 *
 *   node --import tsx bench/sessions-confirm.ts      (npm run bench:sessions-confirm)
 *
 * Not part of the test run. Bounded: 1,000 sessions, 5 rounds.
 */
import { tmpdir } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Journal } from '../broker/journal/journal.js';
import { openTempJournal } from '../broker/testing/temp-journal.js';
import { sessionReconnectedEvent, sessionStartedEvent } from '../broker/testing/session-events.js';
import { machineLine, ms, percentile } from './durable-measure.js';

const sessions = 1_000;
const reconnectsEach = 3;
const rounds = 5;

async function round(): Promise<{ lists: number[]; listed: number }> {
  const t = await openTempJournal();
  try {
    for (let i = 0; i < sessions; i++) {
      const id = `ses_bench_${i}`;
      await t.journal.appendSession(sessionStartedEvent(id, 10_000 + i));
      for (let r = 0; r < reconnectsEach; r++) await t.journal.appendSession(sessionReconnectedEvent(id));
      await t.journal.appendSession({ kind: 'SESSION_ENDED', action_id: id, payload: { reason: 'process_exited' } });
    }
    await t.journal.close();
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      const lists: number[] = [];
      let listed = 0;
      // Eleven lists: ten confirm 100 each, the last finds every one confirmed.
      for (let i = 0; i < 11; i++) {
        const began = performance.now();
        listed = reopened.listCountedSessions().length;
        lists.push(performance.now() - began);
      }
      return { lists, listed };
    } finally {
      await reopened.close();
    }
  } finally {
    await t.dispose();
  }
}

async function main(): Promise<void> {
  console.log(machineLine(tmpdir()));
  const confirming: number[] = [];
  const confirmed: number[] = [];
  let listed = 0;
  for (let r = 0; r < rounds; r++) {
    const result = await round();
    confirming.push(...result.lists.slice(0, 10));
    confirmed.push(result.lists[10] ?? Number.NaN);
    listed = result.listed;
  }
  console.log(`| sessions listed | events each | list confirming 100, p50 / max | list, all confirmed, p50 / max |`);
  console.log('| ---: | ---: | ---: | ---: |');
  console.log(
    `| ${listed} | ${reconnectsEach + 2} | ${ms(percentile(confirming, 50))} / ${ms(Math.max(...confirming))} ms | ${ms(percentile(confirmed, 50))} / ${ms(Math.max(...confirmed))} ms |`,
  );
}

await main();
