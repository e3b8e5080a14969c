import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AdversarialHttpServer } from '../../testing/adversarial-http-server.js';
import {
  canaryLeaks,
  localRouteConfig,
  openHttpActionHarness,
  type HttpActionHarness,
} from '../../testing/http-action-harness.js';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import {
  makeTestCertificates,
  opensslAvailable,
  type KeyPair,
  type TestCertificates,
} from '../../testing/test-certificates.js';

const post = { route: 'docs', method: 'POST', path: '/documents/7', body: 'x' };
let h: HttpActionHarness;
let certDir: TempDir;
let certs: TestCertificates;
const servers: AdversarialHttpServer[] = [];

beforeAll(async () => {
  if (!opensslAvailable()) throw new Error('the openssl CLI is needed to make test certificates');
  h = await openHttpActionHarness();
  certDir = createTempDir('postern-certs-');
  certs = makeTestCertificates(certDir.path);
});
afterEach(async () => {
  h.channel.close();
  h.channel = h.newChannel();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});
afterAll(async () => {
  // Secret hygiene over every setup path above (the canary was in memory for each of them).
  await h.temp.journal.close();
  h.results.close();
  const leaks = canaryLeaks(h);
  await h.dispose();
  certDir.remove();
  expect(leaks).toEqual([]);
});

async function tlsServer(pair: KeyPair): Promise<AdversarialHttpServer> {
  const s = await AdversarialHttpServer.start({ tls: pair, journalPath: h.temp.path });
  servers.push(s);
  return s;
}
const tlsExtra = (lines: string[]) => ['    tls:', ...lines].join('\n');

describe('when TLS setup fails, nothing was sent (connection_setup/not_attempted)', () => {
  it.each<[string, () => KeyPair, string]>([
    ['a self-signed certificate', () => certs.selfSigned, 'DEPTH_ZERO_SELF_SIGNED_CERT'],
    ['a certificate for another name', () => certs.wrongName, 'ERR_TLS_CERT_ALTNAME_INVALID'],
    ['an expired certificate', () => certs.expired, 'CERT_HAS_EXPIRED'],
  ])(
    '%s: TLS_FAILED at tls_handshake, after_correction, no request reached the server',
    async (_when, pair, detail) => {
      const s = await tlsServer(pair());
      const { envelope } = await h.run(
        localRouteConfig(s.port, tlsExtra([`      ca_file: ${certs.caFile}`]), { scheme: 'https' }),
        post,
      );
      expect(envelope.error).toMatchObject({
        code: 'TLS_FAILED',
        phase: 'connection_setup',
        outcome: 'not_attempted',
        retry: 'after_correction',
      });
      expect(envelope.evidence.attempts).toEqual([
        { n: 1, stage: 'tls_handshake', outcome: 'not_attempted', code: 'TLS_FAILED' },
      ]);
      const failed = h.events(envelope.invocation_id).find((e) => e.kind === 'SETUP_ATTEMPT_FAILED');
      expect(failed?.payload).toEqual({ attempt: 1, stage: 'tls_handshake', detail });
      expect(h.temp.journal.getAction(envelope.invocation_id)?.dispatch_seq).toBeNull();
      expect(s.requests).toHaveLength(0);
    },
  );

  it('a server that accepts TCP then closes before the TLS handshake is retried within the bound, all not_attempted', async () => {
    const s = await AdversarialHttpServer.start({ onAccept: () => 'close' });
    servers.push(s);
    const { envelope } = await h.run(
      localRouteConfig(s.port, tlsExtra([`      ca_file: ${certs.caFile}`]), { scheme: 'https' }),
      post,
    );
    expect(envelope.error).toMatchObject({ code: 'TLS_FAILED', phase: 'connection_setup', outcome: 'not_attempted' });
    expect(envelope.evidence.attempts.map((a) => a.stage)).toEqual(['tls_handshake', 'tls_handshake', 'tls_handshake']);
    expect(s.log.filter((e) => e.event === 'accepted')).toHaveLength(3);
  });

  it('a pin that does not match the peer certificate: TLS_FAILED (pin_mismatch)', async () => {
    const s = await tlsServer(certs.good);
    const pin = `sha256:${'0'.repeat(64)}`;
    const { envelope } = await h.run(
      localRouteConfig(s.port, tlsExtra([`      ca_file: ${certs.caFile}`, `      pins: ["${pin}"]`]), {
        scheme: 'https',
      }),
      post,
    );
    expect(envelope.error).toMatchObject({ code: 'TLS_FAILED', outcome: 'not_attempted' });
    expect(h.events(envelope.invocation_id).find((e) => e.kind === 'SETUP_ATTEMPT_FAILED')?.payload).toMatchObject({
      detail: 'pin_mismatch',
    });
  });
});

describe('when TLS verifies through the route’s private CA', () => {
  it('the request is committed and the peer certificate fingerprint is the evidence; pinning it also passes', async () => {
    const s = await tlsServer(certs.good);
    const first = await h.run(
      localRouteConfig(s.port, tlsExtra([`      ca_file: ${certs.caFile}`]), { scheme: 'https' }),
      post,
    );
    expect(first.envelope.error).toBeUndefined();
    const peer = first.envelope.evidence.peer_identity;
    expect(peer).toMatch(/^sha256:[0-9a-f]{64}$/);
    h.channel.close();
    const pinned = await h.run(
      localRouteConfig(s.port, tlsExtra([`      ca_file: ${certs.caFile}`, `      pins: ["${peer}"]`]), {
        scheme: 'https',
      }),
      post,
    );
    expect(pinned.envelope.error).toBeUndefined();
    expect(pinned.envelope.evidence.peer_identity).toBe(peer);
    expect(s.requests).toHaveLength(2);
    // The verified peer is durable with the boundary: trusted by the CA chain, then by the pin.
    const boundary = (id: string): unknown => h.events(id).find((e) => e.kind === 'DISPATCH_STARTED')?.payload;
    expect(boundary(first.envelope.invocation_id)).toMatchObject({ peer_identity: peer, peer_trust: 'ca_verified' });
    expect(boundary(pinned.envelope.invocation_id)).toMatchObject({ peer_identity: peer, peer_trust: 'pinned' });
  });

  it('without the CA the same server is refused (system roots do not vouch for it)', async () => {
    const s = await tlsServer(certs.good);
    const { envelope } = await h.run(localRouteConfig(s.port, '', { scheme: 'https' }), post);
    expect(envelope.error).toMatchObject({ code: 'TLS_FAILED', outcome: 'not_attempted' });
  });
});

describe('the network guard and DNS pinning', () => {
  const lookupOf = (answers: string[][]) => {
    const calls: string[] = [];
    let i = 0;
    return {
      calls,
      lookup: (hostname: string) => {
        calls.push(hostname);
        const answer = answers[Math.min(i, answers.length - 1)] ?? [];
        i += 1;
        return Promise.resolve(answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
      },
    };
  };

  it.each<[string, string, string[], string]>([
    ['a public name resolving to the metadata address', 'api.example.test', ['169.254.169.254'], 'metadata'],
    ['a public name resolving to loopback', 'api.example.test', ['127.0.0.1'], 'loopback'],
    ['a public name resolving to a private address', 'api.example.test', ['10.0.0.7'], 'private'],
    ['a mixed answer hiding a link-local address', 'localhost', ['127.0.0.1', 'fe80::1'], 'link_local'],
  ])('%s is refused before any connection (INVALID_TARGET, not_attempted)', async (_when, host, answer, detail) => {
    const s = await AdversarialHttpServer.start();
    servers.push(s);
    const dns = lookupOf([answer]);
    h.channel = h.newChannel({ lookup: dns.lookup });
    const { envelope } = await h.run(localRouteConfig(s.port, '', { host }), post);
    expect(envelope.error).toMatchObject({
      code: 'INVALID_TARGET',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
    expect(h.events(envelope.invocation_id).find((e) => e.kind === 'SETUP_ATTEMPT_FAILED')?.payload).toEqual({
      attempt: 1,
      stage: 'dns',
      detail,
    });
    expect(s.log).toHaveLength(0);
  });

  it('metadata.google.internal is refused without even resolving it', async () => {
    const dns = lookupOf([['127.0.0.1']]);
    h.channel = h.newChannel({ lookup: dns.lookup });
    const { envelope } = await h.run(localRouteConfig(80, '', { host: 'metadata.google.internal' }), post);
    expect(envelope.error).toMatchObject({ code: 'INVALID_TARGET', outcome: 'not_attempted' });
    expect(dns.calls).toHaveLength(0);
  });

  it('resolves once per attempt and connects to the checked address only (a rebinding answer later changes nothing)', async () => {
    const s = await AdversarialHttpServer.start({ journalPath: h.temp.path });
    servers.push(s);
    const dns = lookupOf([['127.0.0.1'], ['169.254.169.254']]);
    h.channel = h.newChannel({ lookup: dns.lookup });
    const { envelope } = await h.run(localRouteConfig(s.port, '', { host: 'localhost' }), post);
    expect(envelope.error).toBeUndefined();
    expect(dns.calls).toEqual(['localhost']);
    expect(s.requests).toHaveLength(1);
  });

  it('a name that does not resolve: DNS_FAILED, not_attempted, after_correction', async () => {
    h.channel = h.newChannel({ lookup: () => Promise.reject(Object.assign(new Error('nope'), { code: 'ENOTFOUND' })) });
    const { envelope } = await h.run(localRouteConfig(443, '', { host: 'localhost' }), post);
    expect(envelope.error).toMatchObject({
      code: 'DNS_FAILED',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
  });
});
