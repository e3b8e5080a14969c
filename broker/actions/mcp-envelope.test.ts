import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { envelopeSchema, type ActionState, type Classification, type NewEvent } from '../contract/index.js';
import { classifyOutcome, mcpReportEvidence, type McpReportFacts } from '../core/index.js';
import { sha256Of } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { buildMcpEnvelope, type McpEnvelopeReport } from './mcp-envelope.js';
import { stateClassification } from './state-envelope.js';

const fingerprint = sha256Of(0xf1);
const resultDigest = sha256Of(0xd1);
const person = { kind: 'person', id: 'operator-1' } as const;

type Report = McpReportFacts & McpEnvelopeReport;

let t: TempJournal;
beforeEach(async () => {
  t = await openTempJournal();
});
afterEach(async () => {
  await t.dispose();
});

/** The events the executor and the channel append for one call, up to (not including) the closing event. */
function admitted(id: string, approval: 'none' | 'per_call' = 'none'): NewEvent[] {
  return [
    {
      kind: 'ACTION_ACCEPTED',
      action_id: id,
      session_id: 'ses_test',
      lane: 'files-write',
      payload: {
        channel: 'mcp',
        target: 'mcp:files call write_file',
        request_fingerprint: fingerprint,
        approval,
        idempotent: false,
      },
    },
    { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} },
  ];
}
const authorized = (id: string): NewEvent => ({
  kind: 'CREDENTIAL_AUTHORIZED',
  action_id: id,
  payload: {
    credential_id: 'cred_files',
    version_tag: 'v1',
    injection_mode: 'mcp_env',
    request_fingerprint: fingerprint,
  },
});
const dispatched = (id: string): NewEvent[] => [
  ...admitted(id),
  authorized(id),
  {
    kind: 'DISPATCH_STARTED',
    action_id: id,
    payload: { attempt: 1, connection: 'fresh', connection_id: 'child-4242' },
  },
  { kind: 'REQUEST_SENT', action_id: id, payload: { attempt: 1, request_complete: true } },
];
const replied = (id: string): NewEvent[] => [
  ...dispatched(id),
  { kind: 'REMOTE_RESPONSE_STARTED', action_id: id, payload: { attempt: 1 } },
  { kind: 'REMOTE_RESPONSE_COMPLETE', action_id: id, payload: { attempt: 1, digest: sha256Of(0xabc) } },
];

/** Appends the script and the closing event carrying the core's classification of the report. */
async function recorded(
  events: NewEvent[],
  closing: (c: Classification) => NewEvent,
  report: Report,
): Promise<{ state: ActionState; c: Classification }> {
  const c = classifyOutcome(mcpReportEvidence(report));
  await t.journal.appendBatch(events);
  const { state } = await t.journal.append({ ...closing(c), classification: c });
  return { state, c };
}

const sent: Report = {
  dispatchStarted: true,
  handedToTransport: true,
  requestComplete: true,
  transportBroken: false,
  connection: 'fresh',
  connectionId: 'child-4242',
};
const committedAs = (id: string) => (): NewEvent => ({
  kind: 'RESULT_COMMITTED',
  action_id: id,
  payload: { attempt: 1, result_id: `res_${id}_1`, result_digest: resultDigest },
});
const outcomeRecorded =
  (id: string, payload: { attempt?: number } = { attempt: 1 }) =>
  (): NewEvent => ({ kind: 'OUTCOME_RECORDED', action_id: id, payload });

describe('buildMcpEnvelope', () => {
  it('when the tool answers, cites the committed result with no error and every marker of the reply', async () => {
    const report: Report = { ...sent, reply: { kind: 'result' } };
    const { state, c } = await recorded(replied('act_result'), committedAs('act_result'), report);
    const envelope = buildMcpEnvelope({
      state,
      classification: c,
      message: '',
      report,
      resultId: 'res_act_result_1',
      resultDigest,
      fingerprint,
    });
    expect(envelope).toStrictEqual({
      invocation_id: 'act_result',
      caller_disposition: 'completed',
      effect: 'succeeded',
      outcome_basis: 'complete_tool_result',
      evidence: {
        dispatch_started: true,
        dispatch_evidence: state.dispatch_evidence,
        request_complete: true,
        response_headers_received: true,
        response_complete: true,
        attempts: [{ n: 1, stage: 'dispatch_started', outcome: 'committed', connection_id: 'child-4242' }],
        journal_seq: state.last_seq,
        request_fingerprint: fingerprint,
        source: 'remote_response',
        result_id: 'res_act_result_1',
        result_digest: resultDigest,
      },
    });
    expect(state.dispatch_evidence).toBe('remote_receipt');
  });

  it('when the tool answers isError, carries both the error (committed, no retry) and the result', async () => {
    const report: Report = { ...sent, reply: { kind: 'tool_error' } };
    const { state, c } = await recorded(replied('act_toolerr'), committedAs('act_toolerr'), report);
    const envelope = buildMcpEnvelope({
      state,
      classification: c,
      message: 'the tool reported an error',
      report,
      resultId: 'res_act_toolerr_1',
      resultDigest,
    });
    expect(envelope.effect).toBe('failed');
    expect(envelope.error).toStrictEqual({
      code: 'MCP_TOOL_FAILED',
      phase: 'remote_execution',
      outcome: 'committed',
      retry: 'never',
      message: 'the tool reported an error',
    });
    expect(envelope.evidence).toMatchObject({ response_complete: true, result_id: 'res_act_toolerr_1' });
    // Without an explicit fingerprint the record's is cited.
    expect(envelope.evidence.request_fingerprint).toBe(fingerprint);
  });

  it('when the child dies after the request was written, says unknown: no reply, no result', async () => {
    const report: Report = { ...sent, transportBroken: true };
    const events = [
      ...dispatched('act_childdied'),
      { kind: 'CONNECTION_LOST', action_id: 'act_childdied', payload: { attempt: 1 } } as const,
    ];
    const { state, c } = await recorded(events, outcomeRecorded('act_childdied'), report);
    const envelope = buildMcpEnvelope({ state, classification: c, message: 'no reply', report });
    expect(envelope.effect).toBe('unknown_effect');
    expect(envelope.error).toMatchObject({ code: 'REMOTE_RESULT_INCOMPLETE', outcome: 'unknown', retry: 'reconcile' });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: true,
      request_complete: true,
      response_headers_received: false,
      response_complete: false,
      attempts: [{ n: 1, stage: 'dispatch_started', outcome: 'unknown', code: 'REMOTE_RESULT_INCOMPLETE' }],
    });
    expect(envelope.evidence.result_id).toBeUndefined();
  });

  it('when the child cannot be spawned, the setup attempt is not_attempted with its own code and stage', async () => {
    const report: Report = {
      dispatchStarted: false,
      handedToTransport: false,
      requestComplete: false,
      transportBroken: false,
      setup: { failure: 'mcp_spawn', stage: 'spawn', attempts: 1, attemptsMax: 1 },
    };
    const events: NewEvent[] = [
      ...admitted('act_spawnfail'),
      authorized('act_spawnfail'),
      { kind: 'SETUP_ATTEMPT_FAILED', action_id: 'act_spawnfail', payload: { attempt: 1, stage: 'spawn' } },
    ];
    const { state, c } = await recorded(events, outcomeRecorded('act_spawnfail'), report);
    const envelope = buildMcpEnvelope({ state, classification: c, message: 'backing off', report });
    expect(envelope.error).toMatchObject({
      code: 'MCP_SPAWN_FAILED',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: false,
      dispatch_evidence: 'never_started',
      request_complete: false,
      attempts: [{ n: 1, stage: 'spawn', outcome: 'not_attempted', code: 'MCP_SPAWN_FAILED' }],
    });
  });

  it('when the caller cancels while the tool runs, says canceled and leaves the effect unknown', async () => {
    const report: Report = { ...sent, caller: 'cancelled' };
    const events: NewEvent[] = [
      ...dispatched('act_cancelled'),
      { kind: 'CALLER_CANCELLED', action_id: 'act_cancelled', payload: { stage: 'remote_execution' } },
    ];
    const { state, c } = await recorded(events, outcomeRecorded('act_cancelled'), report);
    const envelope = buildMcpEnvelope({ state, classification: c, message: 'cancelled', report });
    expect(envelope.caller_disposition).toBe('canceled');
    expect(envelope.effect).toBe('unknown_effect');
    expect(envelope.error).toMatchObject({ code: 'CALLER_CANCELLED', outcome: 'unknown' });
  });

  it('when a person rejects the card, answers from the record alone: no attempts, nothing sent', async () => {
    await t.journal.appendBatch([
      ...admitted('act_rejected', 'per_call'),
      { kind: 'CARD_SHOWN', action_id: 'act_rejected', payload: { expires_at_ms: 1_900_000_000_000 } },
    ]);
    const { state } = await t.journal.append({
      kind: 'REJECTED',
      action_id: 'act_rejected',
      payload: { actor: person, reason: 'not that file' },
      classification: classifyOutcome({
        channel: 'mcp',
        gate: { kind: 'approval_denied' },
        dispatchStarted: false,
        handedToTransport: false,
        requestComplete: false,
        idempotent: false,
      }),
    });
    const c = stateClassification(state);
    if (c === undefined) throw new Error('REJECTED recorded no classification');
    const envelope = buildMcpEnvelope({ state, classification: c, message: 'rejected', fingerprint });
    expect(envelope.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted', retry: 'never' });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: false,
      request_complete: false,
      response_complete: false,
      attempts: [],
      journal_seq: state.last_seq,
    });
    expect(envelopeSchema.safeParse(envelope).success).toBe(true);
  });
});
