import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JournalEvent } from '../contract/index.js';
import { AdversarialHttpServer } from '../testing/adversarial-http-server.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';

/**
 * Idempotency keys under a route's declared contract (DESIGN §3, issue 7), end to end with the real
 * harness: journal, vault (secret uses counted), channel and a local server that records what
 * arrived. Each case gets a fresh journal so key bindings never leak between cases.
 */
let h: HttpActionHarness;
let s: AdversarialHttpServer;
beforeEach(async () => {
  h = await openHttpActionHarness();
  s = await AdversarialHttpServer.start({
    journalPath: h.temp.path,
    script: () => ({ kind: 'respond', status: 201, body: '{"ok":true}', applyEffect: true }),
  });
});
afterEach(async () => {
  await s.stop();
  await h.dispose();
});

const retentionSeconds = 3600;
const contract = [
  '    idempotency:',
  '      header: Idempotency-Key',
  '      scope: docs.account',
  `      retention_seconds: ${retentionSeconds}`,
  '      fingerprint: [method, path, body]',
].join('\n');
const post = { route: 'docs', method: 'POST', path: '/documents/7', body: '{"title":"x"}' };
const kinds = (events: JournalEvent[]): string[] => events.map((e) => e.kind);
const seqOf = (events: JournalEvent[], kind: string): number => events.find((e) => e.kind === kind)?.seq ?? Number.NaN;

describe('when an agent reuses an idempotency key with a different request', () => {
  it('is refused locally: not_attempted IDEMPOTENCY_MISMATCH on idempotency_key, nothing reaches the target, the vault is never asked', async () => {
    const config = localRouteConfig(s.port, contract);
    const first = await h.run(config, { ...post, idempotency_key: 'key-1' });
    expect(first.envelope.error).toBeUndefined();
    const usesAfterFirst = h.secretUses.count;

    const second = await h.run(config, { ...post, body: '{"title":"y"}', idempotency_key: 'key-1' });
    expect(second.envelope.error).toMatchObject({
      code: 'IDEMPOTENCY_MISMATCH',
      phase: 'validation',
      outcome: 'not_attempted',
      retry: 'after_correction',
      field: 'idempotency_key',
    });
    expect(second.envelope).toMatchObject({
      effect: 'no_effect',
      outcome_basis: 'idempotency_key_reused_with_other_fingerprint',
    });
    expect(second.envelope.evidence).toMatchObject({
      dispatch_started: false,
      idempotency: { key: 'key-1', scope: 'docs.account', remote_contract: 'configured' },
    });
    expect(second.envelope.evidence.idempotency?.fingerprint).not.toBe(
      first.envelope.evidence.idempotency?.fingerprint,
    );
    // Validation refused it: no card, no credential, no dispatch.
    expect(kinds(h.events(second.envelope.invocation_id))).toEqual(['ACTION_ACCEPTED', 'PREFLIGHT_FAILED']);
    expect(h.secretUses.count).toBe(usesAfterFirst);
    expect(s.requests).toHaveLength(1);
    expect(s.requests[0]?.body).toBe('{"title":"x"}');
    // The key still means the first request.
    expect(h.temp.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toMatchObject({
      action_id: first.envelope.invocation_id,
    });
  });

  it('two concurrent calls with one key and different bodies: exactly one is sent, the other is IDEMPOTENCY_MISMATCH without touching the vault', async () => {
    const config = localRouteConfig(s.port, contract);
    const runs = await Promise.all([
      h.run(config, { ...post, body: '{"n":1}', idempotency_key: 'key-race' }),
      h.run(config, { ...post, body: '{"n":2}', idempotency_key: 'key-race' }),
    ]);
    const refused = runs.filter((r) => r.envelope.error?.code === 'IDEMPOTENCY_MISMATCH');
    const sent = runs.filter((r) => r.envelope.error === undefined);
    expect(refused).toHaveLength(1);
    expect(sent).toHaveLength(1);
    expect(h.secretUses.count).toBe(1);
    expect(s.requests).toHaveLength(1);
    expect(s.requests[0]?.headers['idempotency-key']).toBe('key-race');
    expect(h.temp.journal.getIdempotencyKey('docs', 'docs.account', 'key-race')?.action_id).toBe(
      sent[0]?.envelope.invocation_id,
    );
  });
});

describe('when an agent repeats the same request under the same key', () => {
  it('is allowed (a same-key retry): both are sent with the key; a part the contract does not compare may differ', async () => {
    const config = localRouteConfig(s.port, contract);
    const first = await h.run(config, { ...post, idempotency_key: 'key-1' });
    // headers are not in the contract's fingerprint: same idempotency fingerprint, other request fingerprint.
    const again = await h.run(config, { ...post, headers: { 'x-trace': 'second' }, idempotency_key: 'key-1' });
    expect(again.envelope.error).toBeUndefined();
    expect(again.envelope.evidence.idempotency?.fingerprint).toBe(first.envelope.evidence.idempotency?.fingerprint);
    expect(again.envelope.evidence.request_fingerprint).not.toBe(first.envelope.evidence.request_fingerprint);
    expect(s.requests.map((r) => r.headers['idempotency-key'])).toEqual(['key-1', 'key-1']);
    // The first binding and its window stay: a retry never extends what the remote promised.
    expect(h.temp.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toMatchObject({
      action_id: first.envelope.invocation_id,
    });
  });
});

describe('when a keyed action is dispatched', () => {
  it('key, fingerprint, scope and earliest safe expiry are durable in PREFLIGHT_VALIDATED, before DISPATCH_STARTED, and match the envelope and the key table', async () => {
    const startMs = h.temp.clock.nowMs();
    const { envelope } = await h.run(localRouteConfig(s.port, contract), { ...post, idempotency_key: 'key-1' });
    const events = h.events(envelope.invocation_id);
    const validated = events.find((e) => e.kind === 'PREFLIGHT_VALIDATED');
    const evidence = envelope.evidence.idempotency;
    expect(validated?.payload).toEqual({
      idempotency: {
        route: 'docs',
        scope: 'docs.account',
        key: 'key-1',
        fingerprint: evidence?.fingerprint,
        expires_at_ms: startMs + retentionSeconds * 1000,
      },
    });
    expect(evidence?.earliest_safe_expiry_ms).toBe(startMs + retentionSeconds * 1000);
    expect(seqOf(events, 'PREFLIGHT_VALIDATED')).toBeLessThan(seqOf(events, 'CREDENTIAL_AUTHORIZED'));
    expect(seqOf(events, 'CREDENTIAL_AUTHORIZED')).toBeLessThan(seqOf(events, 'DISPATCH_STARTED'));
    expect(h.temp.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toMatchObject({
      fingerprint: evidence?.fingerprint,
      action_id: envelope.invocation_id,
      expires_at_ms: startMs + retentionSeconds * 1000,
      bound_seq: validated?.seq,
    });
    expect(s.requests[0]?.headers['idempotency-key']).toBe('key-1');
  });
});

describe('when the retention window has passed', () => {
  it('the remote has forgotten the key: a new request under it is accepted and rebinds it', async () => {
    const config = localRouteConfig(s.port, contract);
    await h.run(config, { ...post, idempotency_key: 'key-1' });
    h.temp.clock.advance(retentionSeconds * 1000 - 1);
    const early = await h.run(config, { ...post, body: '{"title":"y"}', idempotency_key: 'key-1' });
    expect(early.envelope.error?.code).toBe('IDEMPOTENCY_MISMATCH');
    h.temp.clock.advance(1);
    const later = await h.run(config, { ...post, body: '{"title":"y"}', idempotency_key: 'key-1' });
    expect(later.envelope.error).toBeUndefined();
    expect(s.requests.map((r) => r.body)).toEqual(['{"title":"x"}', '{"title":"y"}']);
    expect(h.temp.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toMatchObject({
      action_id: later.envelope.invocation_id,
      fingerprint: later.envelope.evidence.idempotency?.fingerprint,
    });
  });
});

describe('when a route declares no idempotency contract', () => {
  it('a key is refused before any secret (INVALID_ARGUMENT on idempotency_key) and no key header is ever added', async () => {
    const bare = localRouteConfig(s.port);
    const keyed = await h.run(bare, { ...post, idempotency_key: 'key-1' });
    expect(keyed.envelope.error).toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'idempotency_key',
      outcome: 'not_attempted',
    });
    expect(h.secretUses.count).toBe(0);
    expect(s.requests).toHaveLength(0);
    expect(h.temp.journal.getIdempotencyKey('docs', 'docs.account', 'key-1')).toBeUndefined();

    await h.run(bare, post);
    await h.run(localRouteConfig(s.port, contract), post);
    expect(s.requests).toHaveLength(2);
    // Without a key, the contract's header is absent too: the broker never mints one.
    for (const r of s.requests) expect(r.headers['idempotency-key']).toBeUndefined();
  });
});
