import { afterEach, describe, expect, it } from 'vitest';
import { transitionRefusalOf, type Classification, type NewEvent } from '../contract/index.js';
import { sha256Of } from '../testing/action-paths.js';
import { tempJournals } from '../testing/temp-journal.js';

/**
 * A refusal the journal answers with names an instant as a person or an agent reads it, ISO UTC, never the raw epoch
 * milliseconds (`until 1767225630000`); the number stays data in the journal (the lease's and the key's
 * `expires_at_ms`). Each refusal is performed on a real journal: the projection or the key table refuses the append.
 */
const { open: tempJournal, disposeOpened } = tempJournals();
afterEach(disposeOpened);

/** An epoch-milliseconds instant as it would be printed raw: 13 digits in this century. */
const rawEpochMs = /\d{13}/;
const id = 'act_refusal_time_01';
const fp = sha256Of(0xf1);
const leaseMs = 30_000;

const unknown: Classification = {
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'reconcile',
  code: 'REMOTE_OUTCOME_UNKNOWN',
  effect: 'unknown_effect',
  outcome_basis: 'connection_lost_after_send',
  source: 'transport_observed',
};

/** Sent once, its outcome recorded unknown: a record a retry lease may leave. */
const unknownHead: NewEvent[] = [
  {
    kind: 'ACTION_ACCEPTED',
    action_id: id,
    lane: 'route:docs',
    payload: {
      channel: 'http',
      target: 'route:docs POST /documents/7',
      request_fingerprint: fp,
      approval: 'none',
      idempotent: false,
      retry_budget: 3,
    },
  },
  { kind: 'PREFLIGHT_VALIDATED', action_id: id, payload: {} },
  {
    kind: 'CREDENTIAL_AUTHORIZED',
    action_id: id,
    payload: { credential_id: 'cred_docs', version_tag: 'v1', injection_mode: 'bearer', request_fingerprint: fp },
  },
  { kind: 'DISPATCH_STARTED', action_id: id, payload: { attempt: 1, connection: 'fresh' } },
  { kind: 'OUTCOME_RECORDED', action_id: id, payload: { attempt: 1 }, classification: unknown },
];

function lease(generation: number, expiresAtMs: number): NewEvent {
  return {
    kind: 'RETRY_LEASED',
    action_id: id,
    payload: {
      generation,
      holder: `worker-${generation}`,
      expires_at_ms: expiresAtMs,
      decision: 'RETRY_NEW_ATTEMPT',
      requested_by: { kind: 'broker', id: 'retry-engine' },
    },
  };
}

describe("when a retry lease is asked for while another worker's lease is live", () => {
  it('the LEASE_LOST refusal says until when ISO UTC, and the lease keeps its expiry as a number', async () => {
    const t = await tempJournal();
    await t.journal.appendBatch(unknownHead);
    const expiresAtMs = t.clock.nowMs() + leaseMs;
    await t.journal.append(lease(1, expiresAtMs));

    const refused = await t.journal.tryAppend(lease(2, t.clock.nowMs() + leaseMs));
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.refusal).toMatchObject({ kind: 'lease_held', code: 'LEASE_LOST' });
    expect(refused.refusal.message).toContain(`is held by worker-1 until ${new Date(expiresAtMs).toISOString()}`);
    expect(refused.refusal.message).not.toMatch(rawEpochMs);

    // The same refusal thrown to a caller that expects no race carries the same words.
    const thrown: unknown = await t.journal.append(lease(2, t.clock.nowMs() + leaseMs)).catch((e: unknown) => e);
    expect(transitionRefusalOf(thrown)).toEqual(refused.refusal);
    expect((thrown as Error).message).toBe(refused.refusal.message);
    expect(t.journal.getAction(id)?.lease).toMatchObject({ generation: 1, expires_at_ms: expiresAtMs, open: true });
  });
});

describe('when the live lease holds an expiry no Date can represent (the event schema admits any whole number)', () => {
  it('the refusal still comes back as a refusal naming the number, and the journal stays open', async () => {
    const t = await tempJournal();
    await t.journal.appendBatch(unknownHead);
    await t.journal.append(lease(1, 9_000_000_000_000_000));

    const refused = await t.journal.tryAppend(lease(2, t.clock.nowMs() + leaseMs));
    expect(refused).toMatchObject({ ok: false, refusal: { kind: 'lease_held', code: 'LEASE_LOST' } });
    if (!refused.ok) expect(refused.refusal.message).toContain('until epoch ms 9000000000000000');
    expect(t.journal.stats().state).toBe('open');
  });
});

describe('when a retry dispatches after its lease lapsed', () => {
  it('the LEASE_LOST refusal names the lapsed expiry ISO UTC', async () => {
    const t = await tempJournal();
    await t.journal.appendBatch(unknownHead);
    const expiresAtMs = t.clock.nowMs() + leaseMs;
    await t.journal.append(lease(1, expiresAtMs));
    t.clock.advance(leaseMs + 1);

    const refused = await t.journal.tryAppend({
      kind: 'DISPATCH_STARTED',
      action_id: id,
      payload: { attempt: 2, connection: 'fresh', generation: 1 },
    });
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.refusal).toMatchObject({ kind: 'lease_lost', code: 'LEASE_LOST' });
    expect(refused.refusal.message).toContain(`(generation 1, expires ${new Date(expiresAtMs).toISOString()})`);
    expect(refused.refusal.message).not.toMatch(rawEpochMs);
  });
});

describe('when an idempotency key is bound again to another request inside its window', () => {
  it('IDEMPOTENCY_MISMATCH says until when ISO UTC, and the key table keeps the expiry as a number', async () => {
    const t = await tempJournal();
    const expiresAtMs = t.clock.nowMs() + 60_000;
    const admission = (action: string, fingerprint: string): NewEvent[] => [
      {
        kind: 'ACTION_ACCEPTED',
        action_id: action,
        lane: 'route:docs',
        payload: {
          channel: 'http',
          target: 'route:docs POST /documents/7',
          request_fingerprint: fingerprint,
          approval: 'none',
          idempotent: false,
        },
      },
      {
        kind: 'PREFLIGHT_VALIDATED',
        action_id: action,
        payload: {
          idempotency: { route: 'docs', scope: 'docs.account', key: 'key-1', fingerprint, expires_at_ms: expiresAtMs },
        },
      },
    ];
    await t.journal.appendBatch(admission('act_key_first_001', sha256Of(0xa)));
    t.clock.advance(1_000);

    const thrown: unknown = await t.journal
      .appendBatch(admission('act_key_other_002', sha256Of(0xb)))
      .catch((e: unknown) => e);
    expect(thrown).toMatchObject({ code: 'IDEMPOTENCY_MISMATCH', field: 'idempotency_key' });
    const message = (thrown as Error).message;
    expect(message).toContain(`on this route and scope until ${new Date(expiresAtMs).toISOString()}`);
    expect(message).not.toMatch(rawEpochMs);
    expect(t.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')?.expires_at_ms).toBe(expiresAtMs);
  });
});
