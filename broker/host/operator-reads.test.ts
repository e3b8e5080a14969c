import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { brokerApiSchemas } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { createOperatorReads } from './operator-reads.js';

/** actions.show against a real journal file: which mechanism released a blocked lane, from the recorded events. */
describe('actions.show: released_by', () => {
  let temp: TempJournal;
  let reads: ReturnType<typeof createOperatorReads>;
  beforeEach(async () => {
    temp = await openTempJournal();
    reads = createOperatorReads(temp.journal, { position: () => null, isConnected: () => false });
  });
  afterEach(() => temp.dispose());

  const show = (actionId: string) => brokerApiSchemas['actions.show'].output.parse(reads['actions.show']({ action_id: actionId }));

  it('names the reconciliation (source remote_query) and the seq of its RECONCILIATION_RESULT', async () => {
    const appended = await temp.journal.appendBatch(actionPaths.lostThenReconciled('act_reco_000001'));
    const shown = show('act_reco_000001');
    expect(shown.released_by).toEqual({ kind: 'reconciliation', seq: appended.at(-1)?.event.seq, outcome: 'committed', source: 'remote_query' });
  });

  it('names the person who attested, with the basis they wrote', async () => {
    await temp.journal.appendBatch(actionPaths.sshClosedNoExitAttested('act_attest_0001'));
    expect(show('act_attest_0001').released_by).toMatchObject({ kind: 'operator_attested', actor: { kind: 'person', id: 'operator-1' }, reason: 'checked the host: the job ran', outcome: 'committed' });
  });

  it('is null while the head is blocked, and names the abandonment (outcome still unknown) once a person releases it', async () => {
    await temp.journal.appendBatch(actionPaths.callerCancelledAfterDispatch('act_blocked_001'));
    expect(show('act_blocked_001').released_by).toBeNull();
    const { event } = await temp.journal.append({ kind: 'ABANDONED', action_id: 'act_blocked_001', payload: { actor: { kind: 'person', id: 'alice' }, reason: 'the remote is gone' } });
    const shown = show('act_blocked_001');
    expect(shown.state).toMatchObject({ outcome: 'unknown', abandoned: true });
    expect(shown.released_by).toEqual({ kind: 'abandoned', seq: event.seq, actor: { kind: 'person', id: 'alice' }, outcome: 'unknown', reason: 'the remote is gone' });
  });

  it('is null for an action whose first attempt settled (it never blocked its lane)', async () => {
    await temp.journal.appendBatch(actionPaths.httpNoApproval('act_plain_00001'));
    expect(show('act_plain_00001').released_by).toBeNull();
  });
});
