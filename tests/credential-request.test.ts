import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerApi, CredentialRequestCard } from '../broker/contract/index.js';
import { controlSocketPath, sendControlRequest } from '../broker/host/index.js';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { decideAsPerson } from './support/person-decision.js';
import { DrillAgent, type ToolReply } from './support/drill-agent.js';
import { filesUnder, filesHolding } from './support/data-dir-files.js';

/**
 * request_credential end to end against a real daemon (real vault, journal and control socket) with the MCP SDK's
 * client through `postern mcp`: the agent asks, the request shows in credential_requests.list, a person provisions
 * it with their proof (the passphrase, as the CLI sends it from a terminal), and the agent's waiting call answers
 * with the credential's name. Declining, a read without proof, a decision without proof and an agent calling the
 * operator methods are checked too. The pasted value (a canary) must appear in no answer, no journal or vault byte
 * (-wal included) and no log line.
 */
const prefix = 'pcrq-';
const passphrase = `${prefix} passphrase (test only)`;
const routeCanary = 'CANARY-route-token-91c4';
const pasted = 'CANARY-pasted-by-a-person-5e8a';
let running: BearerRouteDaemon;
let agent: DrillAgent;
const answers: string[] = [];
const operatorReplies: string[] = [];

beforeAll(async () => {
  running = await startBearerRouteDaemon({ prefix, canary: routeCanary, respond: (_req, res) => res.end('ok') });
  // The agent is its own process (a real MCP SDK client through `postern mcp`): the control socket refuses operator
  // calls from an agent's process tree, and this test process plays the person.
  agent = await DrillAgent.start(running.dataDir, 'credential-asking-agent');
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  await running?.stop();
});

async function ask(args: Record<string, unknown>): Promise<ToolReply> {
  const result = await agent.call('request_credential', args).reply;
  answers.push(JSON.stringify(result));
  return result;
}

/** A read needs no proof (credential_requests.list is class read). */
async function listRequests(): Promise<CredentialRequestCard[]> {
  const reply = await sendControlRequest(controlSocketPath(running.dataDir), {
    op: 'api',
    method: 'credential_requests.list',
    input: {},
  });
  operatorReplies.push(JSON.stringify(reply));
  if (!reply.ok) throw new Error(reply.error.code);
  return (reply.value as BrokerApi['credential_requests.list']['output']).requests;
}

async function pendingCard(purpose: string): Promise<CredentialRequestCard> {
  let found: CredentialRequestCard | undefined;
  await expect
    .poll(
      async () => {
        found = (await listRequests()).find((c) => c.purpose === purpose && c.status === 'pending');
        return found !== undefined;
      },
      { timeout: 20_000, interval: 50 },
    )
    .toBe(true);
  return found as CredentialRequestCard;
}

describe('when an agent asks for a credential and a person provisions it', () => {
  it('the waiting call answers provisioned with the name, never the value', async () => {
    const purpose = 'Open issues on the tracker for the weekly triage';
    const waiting = ask({
      purpose,
      for: { route: 'docs' },
      kind: 'bearer',
      docs_url: 'https://example.com/settings/tokens',
      scopes: ['issues:write'],
      timeout_ms: 60_000,
    });
    const card = await pendingCard(purpose);
    expect(card).toMatchObject({
      sealed: false,
      for: { route: 'docs' },
      kind: 'bearer',
      docs_url: 'https://example.com/settings/tokens',
      scopes: ['issues:write'],
      suggested: { name: 'docs-token', kind: 'bearer', bindings: ['docs', '127.0.0.1'] },
      session: { pid: expect.any(Number), record: 'confirmed' },
    });
    // A decision with no person's proof is refused on the control socket, and the request stays pending.
    const unproven = await sendControlRequest(controlSocketPath(running.dataDir), {
      op: 'api',
      method: 'credential_requests.provision',
      input: {
        request_id: card.request_id,
        credential: { name: 'tracker-token', kind: 'bearer', secret: pasted, bindings: ['api.example.com'] },
      },
    });
    operatorReplies.push(JSON.stringify(unproven));
    expect(unproven).toMatchObject({ ok: false, error: { code: 'OPERATOR_PROOF_REQUIRED' } });

    const provisioned = await decideAsPerson(running.dataDir, passphrase, 'credential_requests.provision', {
      request_id: card.request_id,
      credential: { name: 'tracker-token', kind: 'bearer', secret: pasted, bindings: ['api.example.com'] },
    });
    operatorReplies.push(JSON.stringify(provisioned));
    expect(provisioned).toMatchObject({
      request_id: card.request_id,
      status: 'provisioned',
      how: 'added',
      credential: { name: 'tracker-token', kind: 'bearer', bindings: ['api.example.com'] },
    });
    const result = await waiting;
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toEqual({
      status: 'provisioned',
      request_id: card.request_id,
      credential: 'tracker-token',
    });
    expect(JSON.stringify(result.content)).toContain('credential: tracker-token');

    // A second answer changes nothing.
    await expect(
      decideAsPerson(running.dataDir, passphrase, 'credential_requests.decline', { request_id: card.request_id }),
    ).rejects.toMatchObject({ code: 'DECISION_CONFLICT' });
    const credentials = await sendControlRequest(controlSocketPath(running.dataDir), {
      op: 'api',
      method: 'credentials.list',
      input: {},
    });
    expect(JSON.stringify(credentials)).toContain('tracker-token');
  }, 60_000);
});

describe('when a person declines', () => {
  it('an agent whose wait ended first gets pending, then declined with the reason by request_id', async () => {
    const purpose = 'Deploy previews to the staging host';
    const first = await ask({ purpose, for: { host: '*.staging.example.com' }, timeout_ms: 100 });
    expect(first.structuredContent).toMatchObject({ status: 'pending', expires_at_ms: expect.any(Number) });
    const requestId = (first.structuredContent as { request_id: string }).request_id;
    const card = await pendingCard(purpose);
    expect(card.request_id).toBe(requestId);
    expect(card.suggested.bindings).toEqual(['*.staging.example.com']);
    await decideAsPerson(running.dataDir, passphrase, 'credential_requests.decline', {
      request_id: requestId,
      reason: 'use the preview bot instead',
    });
    const again = await ask({ request_id: requestId, timeout_ms: 5_000 });
    expect(again.isError).toBe(true);
    expect(again.structuredContent).toEqual({
      status: 'declined',
      request_id: requestId,
      reason: 'use the preview bot instead',
    });
  }, 60_000);
});

describe('when the agent misbehaves', () => {
  it('text that could change what a person reads is refused, naming the field', async () => {
    const result = await ask({ purpose: 'harmless \u202Eexe.txt', for: { route: 'docs' } });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ error: { code: 'INVALID_ARGUMENT', field: 'purpose' } });
  });

  it('cannot provision or decline: the operator methods are OPERATOR_ONLY on the agent socket', async () => {
    for (const name of ['credential_requests.provision', 'credential_requests.decline', 'credential_requests.list']) {
      const result = await agent.call(name, {}).reply;
      expect(result.structuredContent, name).toMatchObject({ error: { code: 'OPERATOR_ONLY' } });
    }
  });
});

describe('the value a person pasted', () => {
  it('is in no agent answer, operator reply, data-directory file or log line', async () => {
    expect(answers.join('\n')).not.toContain(pasted);
    expect(operatorReplies.join('\n')).not.toContain(pasted);
    expect(running.daemon.process.stdout).not.toContain(pasted);
    expect(running.daemon.process.stderr).not.toContain(pasted);
    // Stopped first so every byte the daemon wrote is in the files (journal, -wal, vault).
    await running.daemon.process.stop('SIGTERM');
    expect(filesUnder(running.dataDir).some((f) => f.endsWith('journal.sqlite'))).toBe(true);
    expect(filesHolding(running.dataDir, Buffer.from(pasted))).toEqual([]);
  }, 60_000);
});
