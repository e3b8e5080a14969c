import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { journalFileName } from '../broker/journal/journal-file-name.js';
import { editSessionRow } from '../broker/testing/session-rows.js';
import { DrillAgent, type ToolReply } from './support/drill-agent.js';
import { closeDrill, drillPassphrase, op, openDrill, waitFor, type Drill } from './support/drill.js';
import { unlockAsPerson } from './support/person-decision.js';
import { runPostern, startDaemon } from './support/postern-process.js';

/**
 * THREAT-MODEL 3 against the sessions table at rest: the agent stops the broker (or waits for the person to), sets its
 * own pending session's row to approved in the journal file, and lets the broker start again. The sessions in memory
 * are read from that table once, at start; until this fix a row edited while no broker ran was believed, so once the
 * person unlocked the vault every call the agent made on a session-approval route went out approved by "its session",
 * an approval no person gave. Now an earlier run's session is confirmed from its own sealed events before its approval
 * is acted on (Journal.getSession, ApprovalQueue): the forged one is pending again and its call waits for a card,
 * while the session a person did approve goes on without one.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'psrows-'));
let drill: Drill | undefined;
let agent: DrillAgent | undefined;
afterAll(async () => {
  await agent?.stop();
  await closeDrill(drill);
  rmSync(scratch, { recursive: true, force: true });
});

const sessionRoute = [
  '  - name: sess',
  '    base_url: http://127.0.0.1:{port}',
  '    credential: drill-token',
  '    injection: bearer',
  '    approval: session',
  '    methods: [POST]',
  '    lanes:',
  "      - { methods: ['*'], path: '/docs/{doc}', lane: 'sess-{doc}' }",
];

const postSess = (who: DrillAgent, marker: string): Promise<{ reply?: ToolReply; error?: string }> =>
  who
    .call('http_request', {
      route: 'sess',
      method: 'POST',
      path: `/docs/${marker}`,
      body: JSON.stringify({ marker }),
      timeout_ms: 60_000,
    })
    .reply.then(
      (reply) => ({ reply }),
      (error: unknown) => ({ error: String(error) }),
    );

describe('when the agent sets its pending session to approved in the journal file while no broker runs', () => {
  it('the restarted broker approves nothing by it: its call waits for a card; a session a person approved goes on', async () => {
    drill = await openDrill(scratch, 'offline-rows', 120, sessionRoute);
    const { dataDir } = drill;
    agent = await DrillAgent.start(dataDir, 'offline-rows-agent');
    const listed = await waitFor(
      () => op(dataDir, 'sessions.list', {}),
      (r) => r.sessions.some((s) => s.status === 'pending' && s.connected),
      "the agent's pending session",
    );
    const forged = listed.sessions.find((s) => s.status === 'pending')?.session_id ?? '';
    await drill.daemon.process.stop('SIGTERM');

    // The agent's own connection to the journal file, while no broker holds it.
    editSessionRow(path.join(dataDir, journalFileName), forged, (state) => ({
      ...state,
      status: 'approved',
      approved_by: 'person:ann (cli, passphrase on tty)',
    }));

    // The broker starts again, locked (as after a reboot, before the person unlocks); the agents reconnect through
    // their shims. The forged session's events cannot be opened yet: its row is all there is, and its approval is not
    // acted on. The call gets a person's card, and nothing is sent.
    drill.daemon = await startDaemon(dataDir);
    const waiting = postSess(agent, 'FORGED');
    const { cards } = await waitFor(
      () => op(dataDir, 'approvals.list', {}),
      (r) => r.cards.some((c) => c.session?.session_id === forged),
      "the forged session's call, waiting for a person",
    );
    const card = cards.find((c) => c.session?.session_id === forged);
    // The card names the status the file says, marked as not the journal's own record.
    expect(card).toMatchObject({
      state: 'pending',
      session: { session_id: forged, status: 'approved', record: 'unconfirmed' },
    });
    expect(drill.log.markers()).not.toContain('FORGED');
    // So do the Sessions page and `postern sessions`: the forged approval is the file's word, never "approved by" a
    // person the journal vouches for.
    const lockedList = await op(dataDir, 'sessions.list', {});
    expect(lockedList.sessions.find((s) => s.session_id === forged)).toMatchObject({
      status: 'approved',
      record: 'unconfirmed',
    });
    const printed = await runPostern(['sessions', '--data-dir', dataDir]);
    expect(printed.stdout).toMatch(
      new RegExp(
        `^${forged}  approved \\(unconfirmed: the journal file's word, not yet checked against its sealed events\\)`,
        'm',
      ),
    );

    // The person unlocks: the session is what its events say, pending.
    await unlockAsPerson(dataDir, drillPassphrase);
    const sessionsNow = await op(dataDir, 'sessions.list', {});
    expect(sessionsNow.sessions.find((s) => s.session_id === forged)).toMatchObject({
      status: 'pending',
      approved_by: null,
      record: 'confirmed',
    });
    expect(sessionsNow.sessions.map((s) => s.record)).not.toContain('unconfirmed');
    // The person's own approval of p1's session, from the earlier run, still holds.
    const approvedCall = await postSess(drill.p1, 'APPROVED');
    expect(approvedCall.reply?.structuredContent).toMatchObject({ effect: 'succeeded' });
    expect(drill.log.markers()).toEqual(['APPROVED']);
    // The daemon said why.
    expect(drill.daemon.process.stderr).toContain("differs from the session's own events");

    await op(dataDir, 'approvals.reject', { ticket: card?.ticket ?? 0, reason: 'not approved' });
    const refused = await waiting;
    expect(refused.reply?.structuredContent).toMatchObject({
      effect: 'no_effect',
      error: { code: 'APPROVAL_DENIED', outcome: 'not_attempted' },
    });
    expect(drill.log.markers()).toEqual(['APPROVED']);
  }, 120_000);
});
