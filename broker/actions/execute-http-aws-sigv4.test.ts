import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/index.js';
import { parseConfig } from '../config/index.js';
import {
  canary,
  canaryLeaks,
  localRouteConfig,
  openHttpActionHarness,
  type HttpActionHarness,
} from '../testing/http-action-harness.js';
import { startSigV4Endpoint, type ReceivedRequest, type SigV4Endpoint } from '../testing/aws-sigv4-verifier.js';
import { abandonBlockedHeads } from '../testing/queue-waits.js';

/** The secret access key and the session token both carry the harness canary: canaryLeaks finds either. */
const keys = {
  accessKeyId: 'AKIAPOSTERNTEST0001',
  secretAccessKey: `wJalrXUtnFEMI/${canary}`,
  sessionToken: `FwoGZXIvYXdzE${canary}Token==`,
};

let h: HttpActionHarness;
const endpoints: SigV4Endpoint[] = [];

beforeAll(async () => {
  h = await openHttpActionHarness();
  const secret = Buffer.from(`${keys.accessKeyId}:${keys.secretAccessKey}:${keys.sessionToken}`);
  await h.vault.add({ name: 'aws-keys', kind: 'aws_sigv4', secret, bindings: ['127.0.0.1'] });
  const noToken = Buffer.from(`${keys.accessKeyId}:${keys.secretAccessKey}`);
  await h.vault.add({ name: 'aws-keys-long-term', kind: 'aws_sigv4', secret: noToken, bindings: ['127.0.0.1'] });
});
afterEach(async () => {
  await abandonBlockedHeads(h.queue);
  await Promise.all(endpoints.splice(0).map((e) => e.stop()));
});
afterAll(async () => {
  await h.dispose();
});

async function endpoint(
  credentialKeys: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } = keys,
  reply?: (request: ReceivedRequest) => string,
): Promise<SigV4Endpoint> {
  const e = await startSigV4Endpoint(credentialKeys, reply);
  endpoints.push(e);
  return e;
}

function awsConfig(port: number, service = 'execute-api', credential = 'aws-keys') {
  return localRouteConfig(port, `    aws: { region: eu-west-1, service: ${service} }`, {
    credential,
    injection: 'aws_sigv4',
  });
}

/** Sends a received request again, changed, straight to the endpoint: what a service says to a tampered copy. */
function replay(port: number, r: ReceivedRequest): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: r.method, path: r.url, headers: r.headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

describe('when a route signs with AWS Signature V4', () => {
  it('the endpoint verifies the final request with aws4: path, sorted query, headers, body hash, date and token', async () => {
    const e = await endpoint();
    const { envelope, response } = await h.run(awsConfig(e.port), {
      route: 'docs',
      method: 'POST',
      path: "/stages/prod/items/a%20b/it's",
      query: { 'z key': 'last', a: ['2', '1'], 'sym!*': "(x)'" },
      headers: { 'content-type': 'application/json', 'x-amz-target': 'Items.Put', 'x-note': 'inner   runs  collapse' },
      body: '{"item":"x"}',
    });
    expect(envelope.error).toBeUndefined();
    expect(envelope).toMatchObject({ effect: 'succeeded', outcome_basis: 'complete_response' });
    expect(e.received).toHaveLength(1);
    const got = e.received[0];
    expect(got?.verdict).toEqual({ ok: true });
    expect(got?.url.startsWith("/api/stages/prod/items/a%20b/it's?")).toBe(true);
    // The broker's (fake) clock is the signature's date; the scope is the route's.
    const amzDate = new Date(h.temp.clock.nowMs()).toISOString().replace(/[-:]|\.\d{3}/g, '');
    expect(got?.headers['x-amz-date']).toBe(amzDate);
    expect(got?.headers.authorization).toMatch(
      new RegExp(
        `^AWS4-HMAC-SHA256 Credential=${keys.accessKeyId}/${amzDate.slice(0, 8)}/eu-west-1/execute-api/aws4_request, `,
      ),
    );
    expect(got?.headers.authorization).toContain('SignedHeaders=accept-encoding;content-type;host;x-amz-date;');
    expect(got?.headers['x-amz-security-token']).toBe(keys.sessionToken);
    // Outside S3 the payload hash is not a header.
    expect(got?.headers['x-amz-content-sha256']).toBeUndefined();
    // The echo carried the session token back: the agent sees it redacted.
    expect(response?.body.toString()).not.toContain(keys.sessionToken);
    expect(response?.body.toString()).toContain('[REDACTED]');
  });

  it('a remote that echoes every request header hands back no signature: the signed request cannot be replayed', async () => {
    const e = await endpoint();
    const { envelope, response } = await h.run(awsConfig(e.port, 's3'), { route: 'docs', method: 'GET', path: '/b/k' });
    expect(envelope.error).toBeUndefined();
    const authorization = e.received[0]?.headers.authorization ?? '';
    const signature = /Signature=([0-9a-f]{64})$/.exec(authorization)?.[1];
    if (signature === undefined) throw new Error(`the endpoint saw no signature: ${authorization.slice(0, 40)}`);
    const answered = response?.body.toString() ?? '';
    // The echo did come back (the date is not secret): only the signing material is gone.
    expect(answered).toContain(String(e.received[0]?.headers['x-amz-date']));
    expect(answered).not.toContain(signature);
    expect(answered).not.toContain(authorization);
    expect(answered).not.toMatch(/Signature=[0-9a-f]/);
    expect(JSON.stringify(envelope)).not.toContain(signature);
  });

  it('a remote that echoes earlier requests hands back no earlier signature either (each still replays while valid)', async () => {
    // Stateful: every answer lists the Authorization of every request received so far, plain and as base64.
    const history: string[] = [];
    const e = await endpoint(keys, (r) => {
      history.push(String(r.headers.authorization));
      return JSON.stringify({ history, history_b64: Buffer.from(JSON.stringify(history)).toString('base64') });
    });
    const config = awsConfig(e.port, 's3');
    await h.run(config, { route: 'docs', method: 'GET', path: '/b/first' });
    const { envelope, response } = await h.run(config, { route: 'docs', method: 'GET', path: '/b/second' });
    expect(envelope.error).toBeUndefined();
    const signatures = e.received.map((r) => /Signature=([0-9a-f]{64})$/.exec(String(r.headers.authorization))?.[1]);
    // The attack happened: two requests, two signatures, and the second answer carried both.
    expect(signatures).toHaveLength(2);
    expect(new Set(signatures).size).toBe(2);
    expect(response?.redacted).toBe(true);
    const body = response?.body.toString() ?? '';
    const b64 = /"history_b64":"([^"]*)"/.exec(body)?.[1];
    const answered = [body, b64 === undefined ? '' : Buffer.from(b64, 'base64').toString('latin1')];
    for (const signature of signatures) {
      if (signature === undefined) throw new Error('the endpoint saw a request without a signature');
      expect(answered.filter((text) => text.includes(signature))).toEqual([]);
    }
    expect(answered.filter((text) => /Signature=[0-9a-f]/.test(text))).toEqual([]);
  });

  it('an S3 route sends x-amz-content-sha256 of the body sent, and a long-term key sends no token', async () => {
    const e = await endpoint({ accessKeyId: keys.accessKeyId, secretAccessKey: keys.secretAccessKey });
    const body = 'object bytes \u00e9';
    const { envelope } = await h.run(awsConfig(e.port, 's3', 'aws-keys-long-term'), {
      route: 'docs',
      method: 'PUT',
      path: '/bucket/key.txt',
      body,
    });
    expect(envelope.error).toBeUndefined();
    const got = e.received[0];
    expect(got?.verdict).toEqual({ ok: true });
    expect(got?.headers['x-amz-content-sha256']).toBe(createHash('sha256').update(body).digest('hex'));
    expect(got?.headers['x-amz-security-token']).toBeUndefined();
    expect(got?.headers.authorization).toContain('/eu-west-1/s3/aws4_request');
  });

  it('the endpoint refuses a copy with a tampered body, path, query or date, and accepts the copy unchanged', async () => {
    const e = await endpoint();
    const { envelope } = await h.run(awsConfig(e.port, 's3'), {
      route: 'docs',
      method: 'PUT',
      path: '/bucket/report.csv',
      query: { versionId: '3' },
      body: 'a,b\n1,2\n',
    });
    expect(envelope.error).toBeUndefined();
    const signed = e.received[0];
    if (signed === undefined) throw new Error('the endpoint received nothing');
    expect(await replay(e.port, signed)).toBe(200);
    expect(await replay(e.port, { ...signed, body: Buffer.from('a,b\n1,3\n') })).toBe(403);
    // Same length and hash header: only the recomputed hash catches it; a fresh hash header breaks the signature.
    const forgedHash = createHash('sha256').update('a,b\n9,9\n').digest('hex');
    const withHash = { ...signed.headers, 'x-amz-content-sha256': forgedHash };
    expect(await replay(e.port, { ...signed, body: Buffer.from('a,b\n9,9\n'), headers: withHash })).toBe(403);
    expect(await replay(e.port, { ...signed, url: signed.url.replace('report', 'rep0rt') })).toBe(403);
    expect(await replay(e.port, { ...signed, url: signed.url.replace('versionId=3', 'versionId=4') })).toBe(403);
    const later = String(signed.headers['x-amz-date']).replace(/.$/, (d) => String((Number(d) + 1) % 10));
    expect(await replay(e.port, { ...signed, headers: { ...signed.headers, 'x-amz-date': later } })).toBe(403);
    expect(e.received.map((r) => r.verdict.ok)).toEqual([true, true, false, false, false, false, false]);
  });

  it('each send signs at its own time; the fingerprint and the journal never hold a signature', async () => {
    const e = await endpoint();
    const request = { route: 'docs', method: 'GET', path: '/items', query: { q: 'same' } };
    const first = await h.run(awsConfig(e.port), request);
    h.temp.clock.advance(61_000);
    const second = await h.run(awsConfig(e.port), request);
    expect(e.received.map((r) => r.verdict.ok)).toEqual([true, true]);
    const signatures = e.received.map((r) => /Signature=([0-9a-f]{64})$/.exec(r.headers.authorization ?? '')?.[1]);
    expect(signatures[0]).not.toBe(signatures[1]);
    const fingerprints = [first, second].map((run) => {
      const accepted = h.events(run.envelope.invocation_id).find((ev) => ev.kind === 'ACTION_ACCEPTED');
      return accepted?.kind === 'ACTION_ACCEPTED' ? accepted.payload.request_fingerprint : undefined;
    });
    expect(fingerprints[0]).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(fingerprints[1]).toBe(fingerprints[0]);
    const journaled = JSON.stringify([
      ...h.events(first.envelope.invocation_id),
      ...h.events(second.envelope.invocation_id),
    ]);
    for (const signature of signatures) expect(journaled).not.toContain(signature);
    expect(journaled).not.toContain('AWS4-HMAC-SHA256');
    expect(journaled).toContain('"injection_mode":"aws_sigv4"');
  });
});

describe('when an agent tries to set what the signer owns', () => {
  it.each(['x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256', 'authorization'])(
    '%s is refused at validation: nothing is signed or sent',
    async (header) => {
      const e = await endpoint();
      const uses = h.secretUses.count;
      const { envelope } = await h.run(awsConfig(e.port), {
        route: 'docs',
        method: 'GET',
        path: '/items',
        headers: { [header]: 'UNSIGNED-PAYLOAD' },
      });
      expect(envelope.error).toMatchObject({ code: 'FORBIDDEN_HEADER', field: `headers.${header}` });
      expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
        outcome: 'not_attempted',
        dispatch_seq: null,
      });
      expect(h.secretUses.count).toBe(uses);
      expect(e.received).toHaveLength(0);
    },
  );
});

describe('when the configuration or the credential is wrong', () => {
  const route = (extra: string) =>
    `version: 1\nroutes:\n  - name: s3\n    base_url: https://s3.example.com\n    credential: k\n${extra}`;

  it.each([
    ['aws_sigv4 without its scope', '    injection: aws_sigv4\n', 'routes[0].aws'],
    [
      'a scope on a bearer route',
      '    injection: bearer\n    aws: { region: eu-west-1, service: s3 }\n',
      'routes[0].aws',
    ],
    [
      'an upper-case region',
      '    injection: aws_sigv4\n    aws: { region: EU-WEST-1, service: s3 }\n',
      'routes[0].aws.region',
    ],
    [
      'an unknown scope field',
      '    injection: aws_sigv4\n    aws: { region: eu-west-1, service: s3, x: 1 }\n',
      'routes[0].aws',
    ],
  ])('%s is CONFIG_INVALID naming the field', (_name, extra, field) => {
    let thrown: unknown;
    try {
      parseConfig(route(extra));
    } catch (error) {
      thrown = error;
    }
    expect(isCodedError(thrown) && thrown.code).toBe('CONFIG_INVALID');
    expect(isCodedError(thrown) && thrown.field).toBe(field);
  });

  it.each([
    ['no secret part', `${keys.accessKeyId}`],
    ['a short access key id', `AKIA:${keys.secretAccessKey}`],
    ['a short secret access key', `${keys.accessKeyId}:short-secret`],
    ['an empty session token', `${keys.accessKeyId}:${keys.secretAccessKey}:`],
    ['a fourth part', `${keys.accessKeyId}:${keys.secretAccessKey}:token:more`],
  ])('%s is refused at add, naming the secret and never quoting it', async (_name, secret) => {
    let thrown: unknown;
    try {
      await h.vault.add({ name: 'bad-aws', kind: 'aws_sigv4', secret: Buffer.from(secret), bindings: ['127.0.0.1'] });
    } catch (error) {
      thrown = error;
    }
    expect(isCodedError(thrown) && thrown.code).toBe('INVALID_ARGUMENT');
    expect(isCodedError(thrown) && thrown.field).toBe('secret');
    expect(String((thrown as Error).message)).not.toContain(canary);
    expect(h.vault.describe('bad-aws')).toBeUndefined();
  });

  it('a bearer credential on an aws_sigv4 route is refused before anything is set up', async () => {
    const e = await endpoint();
    const config = localRouteConfig(e.port, '    aws: { region: eu-west-1, service: s3 }', { injection: 'aws_sigv4' });
    const { envelope } = await h.run(config, { route: 'docs', method: 'GET', path: '/x' });
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
      outcome: 'not_attempted',
      dispatch_seq: null,
    });
    expect(e.received).toHaveLength(0);
  });
});

describe('when every action above is over', () => {
  it('the secret access key and the session token are in no journal file, log line or answer', async () => {
    // While open (the WAL holds the recent commits) and after close (checkpointed into the main file).
    const searched: string[] = [];
    expect(canaryLeaks(h, searched)).toEqual([]);
    expect(searched.some((f) => f.endsWith('journal.sqlite-wal'))).toBe(true);
    await h.temp.journal.close();
    h.results.close();
    expect(h.envelopes.length).toBeGreaterThan(10);
    expect(canaryLeaks(h)).toEqual([]);
  });
});
