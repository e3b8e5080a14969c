import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../config/load-config.js';
import {
  credentialRequestInputSchema,
  type Actor,
  type CredentialRequestInput,
  type NewEvent,
} from '../contract/index.js';
import { Journal } from '../journal/index.js';
import type { CredentialInfo, IdSource } from '../ports/index.js';
import { ManualTimers } from '../testing/manual-timers.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { sessionStartedEvent } from '../testing/session-events.js';
import { CredentialRequests } from './credential-requests.js';

/**
 * The credential request registry on a real SQLite journal with a manual clock: asked → answered once (provisioned,
 * declined, expired), waiters woken, a second answer refused, and a restart that finds its pending requests (and
 * their expiry) from the plaintext event headers even before the vault is unlocked.
 */
const config = parseConfig(
  [
    'version: 1',
    'routes:',
    '  - name: docs',
    '    base_url: https://api.example.com/v1',
    '    credential: docs-token',
    '    injection: bearer',
    '',
  ].join('\n'),
);
const ttlMs = 15 * 60_000;
const person: Actor = { kind: 'person', id: 'alice', surface: 'web', auth: 'operator_session' };
const sessionId = 'ses_requests0001';
const otherSession = 'ses_requests0002';
const never = new AbortController().signal;

function ids(): IdSource {
  let n = 0;
  return { newActionId: () => `act_TEST${String((n += 1)).padStart(8, '0')}` };
}

function ask(overrides: Partial<CredentialRequestInput> = {}): CredentialRequestInput {
  return credentialRequestInputSchema.parse({
    purpose: 'Read the docs API for the weekly report',
    for: { route: 'docs' },
    kind: 'bearer',
    docs_url: 'https://example.com/tokens',
    ...overrides,
  });
}

const fakeInfo = (name: string): CredentialInfo => ({
  id: 'cred_0001',
  name,
  kind: 'bearer',
  version_tag: 'v1',
  bindings: ['docs'],
});

let temp: TempJournal | undefined;
let registry: CredentialRequests | undefined;
afterEach(async () => {
  registry?.close();
  registry = undefined;
  await temp?.dispose();
  temp = undefined;
});

/** The registry over a journal, with manual timers on the journal's clock (the test config and TTL). */
async function openRegistry(
  journal: Journal,
  clock: TempJournal['clock'],
  options: { pendingPerSessionMax?: number } = {},
): Promise<{ requests: CredentialRequests; timers: ManualTimers }> {
  const timers = new ManualTimers(clock);
  const requests = await CredentialRequests.open({ journal, clock, ids: ids(), config, ttlMs, timers, ...options });
  return { requests, timers };
}

async function start(): Promise<{ t: TempJournal; requests: CredentialRequests; timers: ManualTimers }> {
  const t = (temp = await openTempJournal());
  const { requests, timers } = await openRegistry(t.journal, t.clock);
  registry = requests;
  return { t, requests, timers };
}

describe('when an agent asks and a person answers', () => {
  it('wakes the waiting call with the credential name, and journals the answer once', async () => {
    const { t, requests } = await start();
    const { request_id: id } = await requests.request(sessionId, ask());
    expect(id).toMatch(/^crq_/);
    const waiting = requests.wait(sessionId, id, 60_000, never);
    const card = requests.list()[0];
    expect(card).toMatchObject({
      request_id: id,
      status: 'pending',
      sealed: false,
      purpose: 'Read the docs API for the weekly report',
      docs_url: 'https://example.com/tokens',
      suggested: { name: 'docs-token', kind: 'bearer', bindings: ['docs', 'api.example.com'] },
    });
    await requests.provision(id, person, () => Promise.resolve({ info: fakeInfo('docs-token'), how: 'added' }));
    await expect(waiting).resolves.toEqual({ status: 'provisioned', request_id: id, credential: 'docs-token' });
    expect(t.journal.subjectEvents(id).map((e) => e.kind)).toEqual(['CREDENTIAL_REQUESTED', 'CREDENTIAL_PROVISIONED']);
    expect(requests.list()[0]).toMatchObject({ status: 'provisioned', credential: 'docs-token', how: 'added' });
    expect(requests.list()[0]?.decided_by).toContain('person:alice');
  });

  it('refuses a second answer (DECISION_CONFLICT) without running the provisioning', async () => {
    const { requests } = await start();
    const { request_id: id } = await requests.request(sessionId, ask());
    await requests.decline(id, person, 'use the read-only token instead');
    let ran = false;
    const late = requests.provision(id, person, () => {
      ran = true;
      return Promise.resolve({ info: fakeInfo('x'), how: 'added' });
    });
    await expect(late).rejects.toMatchObject({ code: 'DECISION_CONFLICT', field: 'request_id' });
    expect(ran).toBe(false);
    await expect(requests.wait(sessionId, id, 0, never)).resolves.toEqual({
      status: 'declined',
      request_id: id,
      reason: 'use the read-only token instead',
    });
  });

  it('refuses a concurrent second answer while the first one is adding the credential', async () => {
    const { requests } = await start();
    const { request_id: id } = await requests.request(sessionId, ask());
    let release!: () => void;
    const first = requests.provision(
      id,
      person,
      () => new Promise((resolve) => (release = () => resolve({ info: fakeInfo('docs-token'), how: 'added' }))),
    );
    await expect(requests.decline(id, person, undefined)).rejects.toMatchObject({ code: 'DECISION_CONFLICT' });
    release();
    await expect(first).resolves.toMatchObject({ provisioned: { how: 'added' } });
  });

  it('leaves the request pending when the provisioning fails (a locked vault), so it can be answered again', async () => {
    const { requests } = await start();
    const { request_id: id } = await requests.request(sessionId, ask());
    const locked = Object.assign(new Error('locked'), { code: 'VAULT_LOCKED' });
    await expect(requests.provision(id, person, () => Promise.reject(locked))).rejects.toBe(locked);
    expect(requests.list()[0]?.status).toBe('pending');
    await requests.decline(id, person, undefined);
    expect(requests.list()[0]?.status).toBe('declined');
  });

  it("answers pending when the caller's wait ends first, and another session cannot see the request", async () => {
    const { requests } = await start();
    const { request_id: id, expires_at_ms: expiresAt } = await requests.request(sessionId, ask());
    await expect(requests.wait(sessionId, id, 1, never)).resolves.toEqual({
      status: 'pending',
      request_id: id,
      expires_at_ms: expiresAt,
    });
    await expect(requests.wait(otherSession, id, 1, never)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('bounds pending requests per session (RATE_LIMITED), before anything is journaled', async () => {
    const t = (temp = await openTempJournal());
    registry = (await openRegistry(t.journal, t.clock, { pendingPerSessionMax: 2 })).requests;
    await registry.request(sessionId, ask());
    await registry.request(sessionId, ask());
    const before = t.journal.stats().events;
    await expect(registry.request(sessionId, ask())).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    expect(t.journal.stats().events).toBe(before);
    await expect(registry.request(otherSession, ask())).resolves.toMatchObject({ request_id: expect.any(String) });
  });
});

describe('when nobody answers', () => {
  it('expires the request at its TTL (fake clock), wakes the waiter, and a late answer is refused', async () => {
    const { t, requests, timers } = await start();
    const { request_id: id } = await requests.request(sessionId, ask());
    const waiting = requests.wait(sessionId, id, 60 * 60_000, never);
    expect(timers.advance(ttlMs - 1)).toBe(0);
    expect(timers.advance(1)).toBe(1);
    await expect(waiting).resolves.toEqual({ status: 'expired', request_id: id });
    expect(t.journal.subjectEvents(id).map((e) => e.kind)).toEqual([
      'CREDENTIAL_REQUESTED',
      'CREDENTIAL_REQUEST_EXPIRED',
    ]);
    await expect(requests.decline(id, person, undefined)).rejects.toMatchObject({ code: 'DECISION_CONFLICT' });
  });
});

describe('when the broker restarts', () => {
  it('finds a pending request from the reopened journal (vault still locked), expires it on time, and answers it', async () => {
    const first = (temp = await openTempJournal());
    const { requests } = await openRegistry(first.journal, first.clock);
    await first.journal.appendSession(sessionStartedEvent(sessionId, 4100));
    const { request_id: kept } = await requests.request(sessionId, ask());
    const { request_id: late } = await requests.request(otherSession, ask({ purpose: 'second' }));
    requests.close();
    await first.journal.close();

    // A new run: the audit vault locked, so this run cannot open the earlier run's event bodies.
    const lockedVault = first.vault;
    lockedVault.lock();
    first.clock.advance(ttlMs - 10);
    const journal = await Journal.open({ path: first.path, clock: first.clock, vault: lockedVault });
    let timers: ManualTimers;
    ({ requests: registry, timers } = await openRegistry(journal, first.clock));
    const cards = registry.list();
    expect(cards.map((c) => [c.request_id, c.status, c.sealed])).toEqual([
      [kept, 'pending', true],
      [late, 'pending', true],
    ]);
    expect(cards[0]?.purpose).toBeNull();
    // The asking session is the earlier run's row, which its events cannot confirm while locked: the card says so.
    expect(cards[0]?.session).toMatchObject({ status: 'pending', pid: 4100, record: 'unconfirmed' });
    expect(cards[1]?.session).toBeNull();
    await registry.decline(kept, person, undefined);
    const waiting = registry.wait(otherSession, late, 60_000, never);
    expect(timers.advance(10)).toBe(1);
    await expect(waiting).resolves.toEqual({ status: 'expired', request_id: late });
    expect(journal.getCredentialRequest(kept)?.status).toBe('declined');
    registry.close();
    registry = undefined;
    await journal.close();
  });

  it('expires at open a request whose time passed while the broker was down', async () => {
    const first = (temp = await openTempJournal());
    const { requests } = await openRegistry(first.journal, first.clock);
    const { request_id: id } = await requests.request(sessionId, ask());
    requests.close();
    await first.journal.close();
    first.clock.advance(ttlMs + 1);
    const journal = await Journal.open({ path: first.path, clock: first.clock, vault: first.vault });
    registry = (await openRegistry(journal, first.clock)).requests;
    expect(journal.getCredentialRequest(id)?.status).toBe('expired');
    registry.close();
    registry = undefined;
    await journal.close();
  });
});

describe('the journal record of a request', () => {
  it('holds the agent words and the answer metadata, never a provisioned value (canary over the file bytes)', async () => {
    const { t, requests } = await start();
    const canary = 'CANARY-crq-registry-7d1e';
    const { request_id: id } = await requests.request(sessionId, ask());
    // The value would only ever live in the vault: provisioning is handed metadata, and the journal sees only that.
    await requests.provision(id, person, () => Promise.resolve({ info: fakeInfo('docs-token'), how: 'added' }));
    await t.journal.close();
    for (const suffix of ['', '-wal']) {
      let bytes: Buffer;
      try {
        bytes = readFileSync(`${t.path}${suffix}`);
      } catch {
        continue;
      }
      expect(bytes.includes(Buffer.from(canary))).toBe(false);
    }
  });

  it('refuses a credential request event through the action path, and an answer with no request', async () => {
    const { t } = await start();
    const event: NewEvent = { kind: 'CREDENTIAL_REQUEST_EXPIRED', action_id: 'crq_NOSUCHREQUEST1', payload: {} };
    await expect(t.journal.append(event)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(t.journal.tryAppendCredentialRequest(event)).rejects.toMatchObject({
      code: 'IMPOSSIBLE_TRANSITION',
    });
    await expect(
      t.journal.tryAppendCredentialRequest({
        kind: 'CREDENTIAL_REQUEST_EXPIRED',
        action_id: 'act_NOTAREQUEST1',
        payload: {},
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: 'action_id' });
  });
});
