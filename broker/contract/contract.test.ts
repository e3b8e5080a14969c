import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as contract from './index.js';
import {
  envelopeSchema,
  eventKindMeanings,
  eventPayloadSchemas,
  kindsRequiringClassification,
  type Envelope,
} from './index.js';

const docPath = fileURLToPath(new URL('../../docs/contract.md', import.meta.url));

/** Rows of the markdown table under a `## heading`, as [first cell without backticks, second cell]. */
function tableRows(markdown: string, heading: string): [string, string][] {
  const section = markdown.split(/^## /m).find((s) => s.startsWith(heading));
  if (section === undefined) throw new Error(`docs/contract.md has no "## ${heading}" section`);
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `') || /^\| [A-Z][A-Za-z]+ \|/.test(line))
    .map((line) => {
      const cells = line.split(' | ').map((c) => c.replace(/^\| ?|\|$/g, '').trim());
      return [cells[0]?.replaceAll('`', '') ?? '', cells[1] ?? ''];
    });
}

describe('the contract and its documentation', () => {
  const doc = readFileSync(docPath, 'utf8');

  it('lists every event kind with its meaning', () => {
    expect(Object.fromEntries(tableRows(doc, 'Event kinds'))).toEqual(eventKindMeanings);
  });

  it('lists every member of every closed set', () => {
    const documented = Object.fromEntries(
      tableRows(doc, 'Closed sets').map(([name, members]) => [name, members.replaceAll('`', '').split(', ')]),
    );
    const sets = [
      'Phase',
      'Outcome',
      'RetryDisposition',
      'CallerDisposition',
      'DispatchEvidence',
      'Effect',
      'EvidenceSource',
      'Channel',
    ] as const;
    expect(documented).toEqual(Object.fromEntries(sets.map((name) => [name, Object.keys(contract[name])])));
  });
});

describe('closed sets', () => {
  it.each([
    'Phase',
    'Outcome',
    'RetryDisposition',
    'CallerDisposition',
    'DispatchEvidence',
    'Effect',
    'EvidenceSource',
    'Channel',
    'EventKind',
    'ErrorCode',
    'ActionStage',
    'Decision',
  ] as const)('%s maps every member to itself and rejects strangers', (name) => {
    const set = contract[name] as Record<string, string>;
    for (const [key, value] of Object.entries(set)) expect(value).toBe(key);
    expect(contract.isMember(set as never, Object.keys(set)[0])).toBe(true);
    expect(contract.isMember(set as never, 'toString')).toBe(false);
    expect(contract.isMember(set as never, 42)).toBe(false);
  });

  it('names the same event kinds in the enum, the meanings and the payload schemas', () => {
    expect(Object.keys(eventKindMeanings)).toEqual(Object.keys(contract.EventKind));
    expect(Object.keys(eventPayloadSchemas)).toEqual(Object.keys(contract.EventKind));
    for (const kind of kindsRequiringClassification) expect(Object.keys(contract.EventKind)).toContain(kind);
  });
});

const fingerprint = `sha256:${'8b1'.padEnd(64, '0')}`;
const examples: [string, Envelope][] = [
  [
    'the DESIGN.md example: connection closed before a complete response',
    {
      invocation_id: 'act_01J000000000000000000000',
      caller_disposition: 'completed',
      effect: 'unknown_effect',
      outcome_basis: 'response_not_observed_after_dispatch',
      error: {
        code: 'REMOTE_OUTCOME_UNKNOWN',
        phase: 'remote_execution',
        outcome: 'unknown',
        retry: 'same_idempotency_key',
        message: 'Connection closed before a complete response was recorded.',
      },
      evidence: {
        dispatch_started: true,
        dispatch_evidence: 'handed_to_transport',
        request_complete: true,
        response_headers_received: false,
        response_complete: false,
        attempts: [{ n: 1, stage: 'request_sent', outcome: 'unknown', connection_id: 'conn-7' }],
        journal_seq: 1042,
        request_fingerprint: fingerprint,
        idempotency: { key: 'req_01J0000', scope: 'payments.create', fingerprint, remote_contract: 'configured' },
      },
    },
  ],
  [
    'a validation failure with the field to fix',
    {
      invocation_id: 'act_01J000000000000000000001',
      caller_disposition: 'completed',
      effect: 'no_effect',
      outcome_basis: 'rejected_by_preflight_validation',
      error: {
        code: 'FORBIDDEN_HEADER',
        phase: 'validation',
        outcome: 'not_attempted',
        retry: 'after_correction',
        message: 'Authorization is set by the broker.',
        field: 'headers.authorization',
      },
      evidence: {
        dispatch_started: false,
        dispatch_evidence: 'never_started',
        request_complete: false,
        response_headers_received: false,
        response_complete: false,
        attempts: [],
        journal_seq: 7,
        request_fingerprint: fingerprint,
      },
    },
  ],
  [
    'an SSH command that exited 23 (committed, not "failed to execute")',
    {
      invocation_id: 'act_01J000000000000000000002',
      caller_disposition: 'completed',
      effect: 'failed',
      outcome_basis: 'exit_status_and_channel_close',
      error: {
        code: 'COMMAND_FAILED',
        phase: 'remote_execution',
        outcome: 'committed',
        retry: 'never',
        message: 'The command exited with status 23.',
      },
      evidence: {
        dispatch_started: true,
        dispatch_evidence: 'remote_receipt',
        request_complete: true,
        response_headers_received: true,
        response_complete: true,
        attempts: [{ n: 1, stage: 'channel_close', outcome: 'committed' }],
        journal_seq: 88,
        request_fingerprint: fingerprint,
        exit_status: 23,
        peer_identity: 'SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s',
        result_id: 'res_1',
      },
    },
  ],
];

describe('the public envelope', () => {
  it.each(examples)('round-trips %s through JSON unchanged', (_name, example) => {
    const parsed = envelopeSchema.parse(JSON.parse(JSON.stringify(example)));
    expect(parsed).toEqual(example);
  });

  it.each([
    ['an unknown code', (e: Envelope) => ({ ...e, error: { ...e.error, code: 'MAX_RETRIES_EXCEEDED' } })],
    ['an outcome outside the closed set', (e: Envelope) => ({ ...e, error: { ...e.error, outcome: 'failed' } })],
    [
      'a retry disposition outside the closed set',
      (e: Envelope) => ({ ...e, error: { ...e.error, retry: 'transient' } }),
    ],
    [
      'a fingerprint that is not a sha256 digest',
      (e: Envelope) => ({
        ...e,
        evidence: {
          ...e.evidence,
          idempotency: { key: 'k', scope: 's', fingerprint: 'abc', remote_contract: 'configured' },
        },
      }),
    ],
  ])('rejects %s', (_name, mutate) => {
    const first = examples[0]?.[1];
    if (first === undefined) throw new Error('fixture');
    expect(envelopeSchema.safeParse(mutate(first)).success).toBe(false);
  });
});

describe('event payloads', () => {
  it('when a payload carries a field its schema does not name (say, a rendered header), it is refused', () => {
    const payload = {
      channel: 'http',
      target: 'payments POST /v1/charges',
      request_fingerprint: fingerprint,
      approval: 'per_call',
      idempotent: false,
    };
    expect(eventPayloadSchemas.ACTION_ACCEPTED.safeParse(payload).success).toBe(true);
    expect(
      eventPayloadSchemas.ACTION_ACCEPTED.safeParse({ ...payload, authorization: 'Bearer CANARY-not-a-secret' })
        .success,
    ).toBe(false);
  });

  it("when request_view's pairs say how much a cut hid: read strictly, and an older event's pairs stay readable", () => {
    const payload = (query: unknown[]) => ({
      channel: 'http',
      target: 'docs GET /q',
      request_fingerprint: fingerprint,
      approval: 'per_call',
      idempotent: true,
      request_view: { query, headers: [], body_bytes: 0 },
    });
    const parse = (query: unknown[]) => eventPayloadSchemas.ACTION_ACCEPTED.safeParse(payload(query)).success;
    // Before the cut was a fact of its own, a cut side ended in "…" (512 characters and one more).
    expect(parse([['big', `${'Q'.repeat(512)}…`]])).toBe(true);
    expect(parse([['big', 'Q'.repeat(512), { name_hidden: 0, value_hidden: 1988 }]])).toBe(true);
    expect(parse([['big', 'Q', { name_hidden: 0, value_hidden: 1, note: 'x' }]])).toBe(false);
    expect(parse([['big', 'Q', { name_hidden: 0, value_hidden: -1 }]])).toBe(false);
    expect(parse([['big', 'Q', { name_hidden: 0, value_hidden: 1 }, 'x']])).toBe(false);
    // The broker's summary of pairs not shown: a count of its own, strictly; an older event's bare summary stays readable.
    expect(parse([['…', '6 more not shown', { pairs_hidden: 6 }]])).toBe(true);
    expect(parse([['…', '6 more not shown']])).toBe(true);
    expect(parse([['…', '6 more not shown', { pairs_hidden: 0 }]])).toBe(false);
    expect(parse([['…', '6 more not shown', { pairs_hidden: 6, name_hidden: 0 }]])).toBe(false);
  });
});
