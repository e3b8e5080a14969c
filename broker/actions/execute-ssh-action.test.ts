import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JournalEvent } from '../contract/index.js';
import type { DispatchGate } from '../ports/index.js';
import {
  openSshActionHarness,
  secretLeaks,
  sshHostsConfig,
  type SshActionHarness,
  type SshHostYaml,
} from '../testing/ssh-action-harness.js';
import { sshExitObservations } from '../testing/action-paths.js';
import { DiskSyncGate } from '../testing/disk-sync-gate.js';
import { waitForCardCount } from '../testing/queue-waits.js';
import { freePort, TestSshd } from '../testing/test-sshd.js';
import { answerText } from '../agent/answer-text.js';
import { actionAnswer } from './agent-answers.js';
import { storedAnswerParts } from './stored-result.js';

/** In the user key's comment (which is inside the private key file): must never come out. */
const canaryComment = 'CANARY-ssh-9d1e4b7a-key-comment';
const unavailable = TestSshd.unavailableReason();
let sshd: TestSshd | undefined;
let h: SshActionHarness;

beforeAll(async () => {
  if (unavailable !== undefined) {
    console.warn(`real-sshd SSH tests skipped: ${unavailable}`);
    return;
  }
  sshd = await TestSshd.start({ userKeyComment: canaryComment });
  h = await openSshActionHarness({
    'lab-key': { privateKey: sshd.userKey.privateKey, bindings: ['127.0.0.1', 'lab'] },
    'stranger-key': { privateKey: sshd.strangerKey.privateKey, bindings: ['lab'] },
    'unbound-key': { privateKey: sshd.userKey.privateKey, bindings: ['elsewhere.example'] },
  });
}, 30_000);
afterAll(async () => {
  await sshd?.dispose();
  await h?.dispose();
});

const need = (ctx: { skip: (note?: string) => never }): TestSshd => TestSshd.required(sshd, ctx);

function host(s: TestSshd, over: Partial<SshHostYaml> = {}): SshHostYaml {
  return { port: s.port, user: s.user, credential: 'lab-key', hostKey: [s.hostKey.fingerprint], ...over };
}

const kinds = (events: JournalEvent[]) => events.map((e) => e.kind);
const setupFailed = [
  'ACTION_ACCEPTED',
  'PREFLIGHT_VALIDATED',
  'CREDENTIAL_AUTHORIZED',
  'SETUP_ATTEMPT_FAILED',
  'OUTCOME_RECORDED',
];

describe('when the command runs to completion on a real OpenSSH sshd', () => {
  it('exit 0 with stdout: committed / succeeded, every stage recorded, the output stored under the invocation id', async (ctx) => {
    const s = need(ctx);
    const { envelope, output } = await h.run(sshHostsConfig([host(s)]), { host: 'lab', command: 'echo hello' });
    expect(envelope.error).toBeUndefined();
    expect(envelope).toMatchObject({
      effect: 'succeeded',
      outcome_basis: 'exit_status_and_channel_close',
      caller_disposition: 'completed',
    });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: true,
      request_complete: true,
      response_headers_received: true,
      response_complete: true,
      exit_status: 0,
      peer_identity: s.hostKey.fingerprint,
      dispatch_evidence: 'remote_receipt',
    });
    const events = h.events(envelope.invocation_id);
    expect(kinds(events)).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CREDENTIAL_AUTHORIZED',
      'DISPATCH_STARTED',
      ...sshExitObservations,
      'RESULT_COMMITTED',
    ]);
    expect(events.filter((e) => e.kind === 'OUTPUT_RECEIVED').map((e) => e.payload)).toEqual([
      { attempt: 1, stream: 'stdout', bytes: 6 },
      { attempt: 1, stream: 'stderr', bytes: 0 },
    ]);
    expect(output).toMatchObject({
      exit_status: 0,
      stdout_bytes: 6,
      stderr_bytes: 0,
      truncated: false,
      output_complete: true,
    });
    expect(output?.stdout.toString()).toBe('hello\n');
    const stored = h.results.read(envelope.evidence.result_id ?? '');
    expect(stored?.body.toString()).toBe('hello\n');
    expect(stored?.summary).toMatchObject({
      exit_status: 0,
      host_key: { fingerprint: s.hostKey.fingerprint, trust: 'pinned' },
      stages: [
        'dns',
        'tcp_connect',
        'ssh_transport',
        'host_key_verified',
        'user_auth',
        'session_channel',
        'exec_requested',
        'exec_accepted',
        'exit_status',
        'eof',
        'channel_close',
      ],
    });
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      lane: 'host:lab',
      result_id: envelope.evidence.result_id,
    });
  });

  it('exit 23 with stderr: committed / failed with COMMAND_FAILED, stderr kept apart from stdout', async (ctx) => {
    const s = need(ctx);
    const { envelope, output } = await h.run(sshHostsConfig([host(s)]), {
      host: 'lab',
      command: 'echo out; echo oops >&2; exit 23',
    });
    expect(envelope.error).toMatchObject({
      code: 'COMMAND_FAILED',
      phase: 'remote_execution',
      outcome: 'committed',
      retry: 'never',
    });
    expect(envelope).toMatchObject({ effect: 'failed', outcome_basis: 'exit_status_and_channel_close' });
    expect(envelope.evidence.exit_status).toBe(23);
    expect(output?.stdout.toString()).toBe('out\n');
    expect(output?.stderr.toString()).toBe('oops\n');
  });

  it('a command killed by a signal: committed / failed with the signal name', async (ctx) => {
    const s = need(ctx);
    const { envelope } = await h.run(sshHostsConfig([host(s)]), { host: 'lab', command: 'kill -TERM $$' });
    expect(envelope.error).toMatchObject({ code: 'COMMAND_FAILED', outcome: 'committed' });
    expect(envelope).toMatchObject({ effect: 'failed', outcome_basis: 'exit_signal_and_channel_close' });
    expect(envelope.evidence.exit_signal).toBe('SIGTERM');
    expect(h.events(envelope.invocation_id).find((e) => e.kind === 'EXIT_SIGNAL')?.payload).toEqual({
      attempt: 1,
      signal: 'SIGTERM',
    });
  });

  it('output beyond the cap: truncated flag and total counts, never silently cut', async (ctx) => {
    const s = need(ctx);
    const config = sshHostsConfig([host(s, { extra: '    approval: none\n    output_bytes_max: 1000' })]);
    const { output, envelope } = await h.run(config, { host: 'lab', command: "head -c 5000 /dev/zero | tr '\\0' a" });
    expect(output).toMatchObject({ stdout_bytes: 5000, truncated: true, exit_status: 0 });
    expect(output?.stdout.length).toBe(1000);
    expect(h.results.read(envelope.evidence.result_id ?? '')).toMatchObject({
      total_bytes: 5000,
      truncated: true,
      stored_bytes: 1000,
    });
  });
});

/**
 * A harness of its own with the journal's later-flush timer far away: only a commit the action makes can take its held
 * observations, so which commit carries them does not depend on how long the command took.
 */
function heldObservationsHarness(s: TestSshd): Promise<SshActionHarness> {
  return openSshActionHarness(
    { 'lab-key': { privateKey: s.userKey.privateKey, bindings: ['127.0.0.1', 'lab'] } },
    { laterFlushMs: 60_000 },
  );
}

describe('when the command ran, its observations and the settlement', () => {
  it('share one commit: from REQUEST_SENT to RESULT_COMMITTED, after DISPATCH_STARTED', async (ctx) => {
    const s = need(ctx);
    const held = await heldObservationsHarness(s);
    const commits: string[][] = [];
    const stop = held.temp.journal.onCommit((commit) => commits.push([...commit.kinds]));
    try {
      const { envelope } = await held.run(sshHostsConfig([host(s)]), { host: 'lab', command: 'echo hello' });
      expect(envelope).toMatchObject({ effect: 'succeeded' });
    } finally {
      stop();
      await held.dispose();
    }
    expect(commits.slice(-2)).toEqual([
      ['CREDENTIAL_AUTHORIZED', 'DISPATCH_STARTED'],
      [...sshExitObservations, 'RESULT_COMMITTED'],
    ]);
  });
});

describe('when the journal refuses one of the observations of a command', () => {
  it('the settlement it rides with is refused too: no result is recorded over it, the action stays unknown', async (ctx) => {
    const s = need(ctx);
    const held = await heldObservationsHarness(s);
    const journal = held.temp.journal;
    // A misbehaving gate: its EXIT_STATUS names attempt 9, which never crossed the boundary, so the journal refuses it.
    const gate: DispatchGate = {
      append: (event) => journal.append(event),
      appendLater: (event) =>
        journal.appendLater(
          event.kind === 'EXIT_STATUS'
            ? ({ ...event, payload: { ...event.payload, attempt: 9 } } as typeof event)
            : event,
        ),
      commitHeld: () => journal.commitHeld(),
      beginDispatch: (actionId, attempt, connection) => journal.beginDispatch(actionId, attempt, connection),
    };
    held.channel = held.newChannel({}, gate);
    const ids: string[] = [];
    const stop = journal.onCommit((commit) => {
      if (commit.kinds.includes('ACTION_ACCEPTED')) ids.push(...journal.listActions().map((a) => a.action_id));
    });
    try {
      const run = held.run(sshHostsConfig([host(s)]), { host: 'lab', command: 'echo hello' });
      await expect(run).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
      const actionId = ids[0] ?? '';
      expect(journal.getAction(actionId)).toMatchObject({ outcome: 'unknown' });
      const recorded = kinds(held.events(actionId));
      expect(recorded).toContain('DISPATCH_STARTED');
      expect(recorded).not.toContain('EXIT_STATUS');
      expect(recorded).not.toContain('RESULT_COMMITTED');
    } finally {
      stop();
      await held.dispose();
    }
  });
});

describe('when setup fails, each stage is told apart and nothing was attempted', () => {
  it('a wrong pinned host key: SSH_HOST_KEY_REJECTED at host_key_verified, the user key never offered', async (ctx) => {
    const s = need(ctx);
    const { envelope } = await h.run(sshHostsConfig([host(s, { hostKey: [s.userKey.fingerprint] })]), {
      host: 'lab',
      command: 'echo never',
    });
    expect(envelope.error).toMatchObject({
      code: 'SSH_HOST_KEY_REJECTED',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
    expect(envelope.evidence).toMatchObject({ dispatch_started: false, peer_identity: s.hostKey.fingerprint });
    expect(envelope.evidence.attempts).toEqual([
      { n: 1, stage: 'host_key_verified', outcome: 'not_attempted', code: 'SSH_HOST_KEY_REJECTED' },
    ]);
    expect(kinds(h.events(envelope.invocation_id))).toEqual(setupFailed);
  });

  it('a user key the server rejects: SSH_AUTH_FAILED at user_auth, retry after_correction (waiting fixes no key)', async (ctx) => {
    const s = need(ctx);
    const { envelope } = await h.run(sshHostsConfig([host(s, { credential: 'stranger-key' })]), {
      host: 'lab',
      command: 'echo never',
    });
    expect(envelope.error).toMatchObject({
      code: 'SSH_AUTH_FAILED',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
    expect(envelope.evidence.attempts).toEqual([
      { n: 1, stage: 'user_auth', outcome: 'not_attempted', code: 'SSH_AUTH_FAILED' },
    ]);
    expect(kinds(h.events(envelope.invocation_id))).toEqual(setupFailed);
  });

  it('a host that refuses TCP: CONNECT_REFUSED at tcp_connect, retry backoff (the port may open again)', async (ctx) => {
    need(ctx);
    const { envelope } = await h.run(
      sshHostsConfig([{ port: await freePort(), user: 'x', credential: 'lab-key', hostKey: 'accept_new' }]),
      { host: 'lab', command: 'echo never' },
    );
    expect(envelope.error).toMatchObject({
      code: 'CONNECT_REFUSED',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'backoff',
    });
    expect(envelope.evidence.attempts).toEqual([
      { n: 1, stage: 'tcp_connect', outcome: 'not_attempted', code: 'CONNECT_REFUSED' },
    ]);
  });

  it('a host name that does not resolve: DNS_FAILED at dns', async (ctx) => {
    const s = need(ctx);
    const { envelope } = await h.run(sshHostsConfig([host(s, { host: 'no-such-host.invalid' })]), {
      host: 'lab',
      command: 'echo never',
    });
    // The advice depends on the machine's resolver (ENOTFOUND where one answers .invalid, a temporary EAI_AGAIN where
    // none is reachable), so it is asserted per kind in broker/core/report-evidence.test.ts, not here.
    expect(envelope.error).toMatchObject({ code: 'DNS_FAILED', phase: 'connection_setup', outcome: 'not_attempted' });
    expect(envelope.evidence.attempts).toEqual([{ n: 1, stage: 'dns', outcome: 'not_attempted', code: 'DNS_FAILED' }]);
  });
});

describe('when the request is refused before any secret is touched', () => {
  it.for([
    ['an unknown host entry', { host: 'nope', command: 'ls' }, 'INVALID_TARGET', 'host'],
    ['a 40 000-byte command', { host: 'lab', command: 'x'.repeat(40_000) }, 'PAYLOAD_LIMIT', 'command'],
    [
      'an agent-chosen user (a field the ssh_exec schema does not have)',
      { host: 'lab', command: 'ls', user: 'root' },
      'INVALID_ARGUMENT',
      'user',
    ],
    [
      'a wait above the maximum',
      { host: 'lab', command: 'ls', timeout_ms: 10_000_000 },
      'INVALID_ARGUMENT',
      'timeout_ms',
    ],
  ] as const)('%s → %s (field %s), validation / not_attempted', async ([, request, code, field], ctx) => {
    if (h === undefined) ctx.skip(`real sshd unavailable: ${unavailable ?? 'not started'}`);
    const { envelope } = await h.run(
      sshHostsConfig([{ port: 22, user: 'u', credential: 'lab-key', hostKey: 'accept_new' }]),
      request,
    );
    expect(envelope.error).toMatchObject({
      code,
      phase: 'validation',
      outcome: 'not_attempted',
      retry: 'after_correction',
      field,
    });
    expect(kinds(h.events(envelope.invocation_id))).toEqual(['ACTION_ACCEPTED', 'PREFLIGHT_FAILED']);
  });

  it('a host that needs approval waits for a decision (cancelled: nothing runs); an unbound key: CREDENTIAL_MISSING', async (ctx) => {
    need(ctx);
    const perCall = sshHostsConfig([
      { port: 22, user: 'u', credential: 'lab-key', hostKey: 'accept_new', extra: '    approval: per_call' },
    ]);
    const run = h.run(perCall, { host: 'lab', command: 'ls' });
    const [card] = await waitForCardCount(h.queue, 1);
    expect(card).toMatchObject({ state: 'pending', command: 'ls', target: 'host:lab', credential: 'lab-key' });
    await h.queue.cancel(card?.ticket ?? 0, { kind: 'person', id: 'tester' }, 'not this one');
    const cancelled = await run;
    expect(cancelled.envelope.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
    expect(kinds(h.events(cancelled.envelope.invocation_id))).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CARD_SHOWN',
      'CANCELLED',
    ]);
    const unbound = sshHostsConfig([
      { host: '127.0.0.2', port: 22, user: 'u', credential: 'unbound-key', hostKey: 'accept_new' },
    ]);
    const { envelope } = await h.run(unbound, { host: 'lab', command: 'ls' });
    expect(envelope.error).toMatchObject({
      code: 'CREDENTIAL_MISSING',
      phase: 'credential_injection',
      outcome: 'not_attempted',
    });
    expect(kinds(h.events(envelope.invocation_id))).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'OUTCOME_RECORDED',
    ]);
  });
});

describe('when a commands[] rule runs reads unattended and the agent fills its * with an option or a .. segment', () => {
  /** A per_call host whose rules let two reads run with no person: `cat <dir>/*` and `wc -c *`. */
  function rulesConfig(s: TestSshd, dir: string) {
    return sshHostsConfig([
      {
        ...host(s),
        extra: [
          '    approval: per_call',
          '    rules_may_loosen: true',
          '    commands:',
          `      - { command: 'cat ${dir}/*', lane: reads, approval: none }`,
          "      - { command: 'wc -c *', lane: reads, approval: none }",
        ].join('\n'),
      },
    ]);
  }

  it('an ordinary argument runs at once in the rule’s lane; the attacks wait for a person and never run', async (ctx) => {
    const s = need(ctx);
    const dir = join(h.temp.dir.path, 'logs');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'app.log'), 'log line\n');
    writeFileSync(join(h.temp.dir.path, 'secret.txt'), 'not for the rule\n');
    const config = rulesConfig(s, dir);
    const honest = await h.run(config, { host: 'lab', command: `cat ${dir}/app.log` });
    expect(honest.envelope.error).toBeUndefined();
    expect(honest.output?.stdout.toString()).toBe('log line\n');
    expect(h.temp.journal.getAction(honest.envelope.invocation_id)).toMatchObject({ lane: 'reads' });

    for (const command of [`cat ${dir}/../secret.txt`, `wc -c --files0-from=${dir}/app.log`]) {
      const run = h.run(config, { host: 'lab', command });
      const [card] = await waitForCardCount(h.queue, 1);
      expect(card).toMatchObject({ state: 'pending', command, approval: 'per_call', lane: 'host:lab' });
      await h.queue.cancel(card?.ticket ?? 0, { kind: 'person', id: 'tester' }, 'not what the rule allows');
      const { envelope } = await run;
      expect(envelope.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
      expect(kinds(h.events(envelope.invocation_id))).not.toContain('DISPATCH_STARTED');
    }
  });
});

describe('when a person cancels right after approving, before CREDENTIAL_AUTHORIZED is written', () => {
  it('the executor answers the recorded cancellation and the command never runs', async (ctx) => {
    const s = need(ctx);
    const perCall = sshHostsConfig([{ ...host(s), extra: '    approval: per_call' }]);
    const run = h.run(perCall, { host: 'lab', command: 'echo ran' });
    const [card] = await waitForCardCount(h.queue, 1);
    const actionId = card?.action_id ?? '';
    let cancelled: Promise<unknown> | undefined;
    const stop = h.queue.onChange(() => {
      if (cancelled !== undefined || h.temp.journal.getAction(actionId)?.decision !== 'approved') return;
      cancelled = h.queue.cancel(card?.ticket ?? 0, { kind: 'person', id: 'tester' }, 'changed my mind');
    });
    await h.queue.approve(card?.ticket ?? 0, { kind: 'person', id: 'tester' });
    const { envelope } = await run;
    stop();
    await cancelled;
    expect(envelope.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
    expect(kinds(h.events(actionId))).not.toContain('DISPATCH_STARTED');
  });
});

describe('when the host’s key is rotated while the card waits (DESIGN §3: the invocation binds the credential version)', () => {
  it('the approved command is FINGERPRINT_MISMATCH, not_attempted, and never runs', async (ctx) => {
    const s = need(ctx);
    const perCall = sshHostsConfig([{ ...host(s), extra: '    approval: per_call' }]);
    const before = h.vault.describe('lab-key');
    const run = h.run(perCall, { host: 'lab', command: 'echo rotated' });
    const [card] = await waitForCardCount(h.queue, 1);
    const actionId = card?.action_id ?? '';
    expect(h.events(actionId)[0]).toMatchObject({
      kind: 'ACTION_ACCEPTED',
      payload: { credential: { id: before?.id, version_tag: before?.version_tag } },
    });
    // The same key material under a new version: what was approved named the old version.
    await h.vault.rotate('lab-key', Buffer.from(s.userKey.privateKey));
    await h.queue.approve(card?.ticket ?? 0, { kind: 'person', id: 'tester' });
    const { envelope } = await run;
    expect(envelope.error).toMatchObject({
      code: 'FINGERPRINT_MISMATCH',
      outcome: 'not_attempted',
      message: expect.stringContaining('rotated since this action was admitted') as unknown,
    });
    expect(kinds(h.events(actionId))).not.toContain('DISPATCH_STARTED');
    // The next command binds the new version and runs.
    const next = await h.run(sshHostsConfig([host(s)]), { host: 'lab', command: 'echo again' });
    expect(next.envelope.error).toBeUndefined();
  });
});

describe('when the host key policy is accept_new', () => {
  it('stores the first key after auth, trusts it next time, and refuses a changed key ever after', async (ctx) => {
    const s = need(ctx);
    const config = sshHostsConfig([host(s, { hostKey: 'accept_new' })]);
    const knownHosts = join(h.temp.dir.path, 'known_hosts.json');
    // A rejected user key must not teach the store anything.
    const strangerConfig = sshHostsConfig([host(s, { hostKey: 'accept_new', credential: 'stranger-key' })]);
    expect((await h.run(strangerConfig, { host: 'lab', command: 'true' })).envelope.error?.code).toBe(
      'SSH_AUTH_FAILED',
    );
    expect(existsSync(knownHosts)).toBe(false);

    const first = await h.run(config, { host: 'lab', command: 'echo first' });
    expect(first.envelope.error).toBeUndefined();
    expect(h.results.read(first.envelope.evidence.result_id ?? '')?.summary).toMatchObject({
      host_key: { fingerprint: s.hostKey.fingerprint, trust: 'accepted_new' },
    });
    expect(readFileSync(knownHosts, 'utf8')).toContain(s.hostKey.fingerprint);

    const second = await h.run(config, { host: 'lab', command: 'echo second' });
    expect(h.results.read(second.envelope.evidence.result_id ?? '')?.summary).toMatchObject({
      host_key: { trust: 'known' },
    });
    // The verified host key is durable with the boundary itself, not only in the result.
    const boundary = (id: string): unknown => h.events(id).find((e) => e.kind === 'DISPATCH_STARTED')?.payload;
    expect(boundary(first.envelope.invocation_id)).toMatchObject({
      peer_identity: s.hostKey.fingerprint,
      peer_trust: 'accepted_new',
    });
    expect(boundary(second.envelope.invocation_id)).toMatchObject({
      peer_identity: s.hostKey.fingerprint,
      peer_trust: 'known_host',
    });

    const oldFingerprint = s.hostKey.fingerprint;
    await s.restartWithNewHostKey();
    const changed = await h.run(config, { host: 'lab', command: 'echo never' });
    expect(changed.envelope.error).toMatchObject({
      code: 'SSH_HOST_KEY_REJECTED',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
    expect(changed.envelope.evidence.peer_identity).toBe(s.hostKey.fingerprint);
    expect(
      h.events(changed.envelope.invocation_id).find((e) => e.kind === 'SETUP_ATTEMPT_FAILED')?.payload,
    ).toMatchObject({ stage: 'host_key_verified' });
    expect(readFileSync(knownHosts, 'utf8')).toContain(oldFingerprint);
    expect(readFileSync(knownHosts, 'utf8')).not.toContain(s.hostKey.fingerprint);
  });
});

describe('when the agent changes known_hosts.json and holds the host’s port with its own server (accept_new)', () => {
  type Tamper = (text: string, entry: string, legit: string, impostor: string) => string;
  const tampers: Array<[string, Tamper]> = [
    ['replaces the stored key with its own', (text, _entry, legit, impostor) => text.replace(legit, impostor)],
    [
      'deletes the entry (first use again, for its server)',
      (text, entry) => {
        const file = JSON.parse(text) as { hosts: Record<string, unknown> };
        delete file.hosts[entry];
        return JSON.stringify(file);
      },
    ],
    [
      'writes a forged file naming its key',
      (_text, entry, _legit, impostor) => JSON.stringify({ [entry]: { fingerprint: impostor, stored_at_ms: 1 } }),
    ],
  ];

  it.for(tampers.map(([name, tamper], i) => [name, tamper, i] as const))(
    '%s: SSH_KNOWN_HOSTS_UNTRUSTED before dispatch, and the command never runs on the impostor',
    async ([, tamper, i], ctx) => {
      const s = need(ctx);
      const knownHosts = join(h.temp.dir.path, 'known_hosts.json');
      rmSync(knownHosts, { force: true });
      const name = `tampered-${i}`;
      const config = sshHostsConfig([host(s, { name, hostKey: 'accept_new' })]);
      const legit = s.hostKey.fingerprint;
      // The marker the command leaves where it runs (so its absence below means something).
      const ranOnHost = join(s.dir.path, `host-ran-${i}`);
      expect((await h.run(config, { host: name, command: `touch ${ranOnHost}` })).envelope.error).toBeUndefined();
      expect(existsSync(ranOnHost)).toBe(true);
      // The agent's own sshd on the same port, and the file edited to let it in.
      await s.restartWithNewHostKey();
      const entry = `${name} ${s.user}@127.0.0.1:${s.port}`;
      writeFileSync(knownHosts, tamper(readFileSync(knownHosts, 'utf8'), entry, legit, s.hostKey.fingerprint));
      const tampered = readFileSync(knownHosts);
      const ran = join(s.dir.path, `impostor-ran-${i}`);
      const { envelope } = await h.run(config, { host: name, command: `touch ${ran}` });
      expect(envelope.error).toMatchObject({
        code: 'SSH_KNOWN_HOSTS_UNTRUSTED',
        phase: 'connection_setup',
        outcome: 'not_attempted',
        retry: 'after_correction',
      });
      expect(kinds(h.events(envelope.invocation_id))).toEqual(setupFailed);
      expect(h.events(envelope.invocation_id).find((e) => e.kind === 'SETUP_ATTEMPT_FAILED')?.payload).toMatchObject({
        stage: 'host_key_verified',
      });
      expect(existsSync(ran)).toBe(false);
      expect(readFileSync(knownHosts)).toEqual(tampered);
      rmSync(knownHosts, { force: true });
    },
  );
});

describe('when the agent receives the output (the answer, and fetch_result from the stored result)', () => {
  /** The output as the agent gets it now, and as fetch_result reads it back from the result store. */
  function delivered(run: Awaited<ReturnType<SshActionHarness['run']>>) {
    const state = h.temp.journal.getAction(run.envelope.invocation_id);
    const now = actionAnswer({
      envelope: run.envelope,
      state,
      ...(run.output === undefined ? {} : { output: run.output }),
    });
    const stored = h.results.read(run.envelope.evidence.result_id ?? '');
    if (stored === undefined) throw new Error('no stored result');
    const fetched = actionAnswer({ envelope: run.envelope, state, ...storedAnswerParts('ssh', stored) });
    return [now, fetched].map((answer) => {
      const structured = answer.structured as { output?: Record<string, unknown> };
      return { output: structured.output, text: answerText(answer.text, answer.structured) };
    });
  }

  it('bytes that are not UTF-8 come back exactly, as base64 that says so, never as U+FFFD', async (ctx) => {
    const s = need(ctx);
    const run = await h.run(sshHostsConfig([host(s)]), {
      host: 'lab',
      command: "printf '\\377\\000\\001'; printf '\\376' >&2",
    });
    expect(run.envelope.error).toBeUndefined();
    for (const { output, text } of delivered(run)) {
      expect(output).toMatchObject({
        stdout_encoding: 'base64',
        stderr_encoding: 'base64',
        stdout_bytes: 3,
        stderr_bytes: 1,
        truncated: false,
        output_complete: true,
        redacted: false,
      });
      expect([...Buffer.from(String(output?.['stdout']), 'base64')]).toEqual([0xff, 0x00, 0x01]);
      expect([...Buffer.from(String(output?.['stderr']), 'base64')]).toEqual([0xfe]);
      expect(text).toContain('stdout 3 bytes (base64) · stderr 1 bytes (base64) · output complete');
    }
  });

  it('valid UTF-8 stays text, as before', async (ctx) => {
    const s = need(ctx);
    const run = await h.run(sshHostsConfig([host(s)]), { host: 'lab', command: "printf 'h\\303\\251llo\\n'" });
    for (const { output, text } of delivered(run)) {
      expect(output).toMatchObject({
        stdout: 'héllo\n',
        stdout_encoding: 'utf8',
        stderr: '',
        stderr_encoding: 'utf8',
        redacted: false,
      });
      expect(text).toContain('stdout 7 bytes (utf8) · stderr 0 bytes (utf8) · output complete');
      expect(text).not.toContain('secrets redacted');
    }
  });

  it('output the scrubber changed says redacted, and the key line is not in it', async (ctx) => {
    const s = need(ctx);
    // The host holds a copy of the user key and prints one of its body lines (with a byte that is not UTF-8).
    const line = s.userKey.privateKey
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('-----'))[2];
    expect(line?.length).toBeGreaterThan(16);
    const held = join(s.dir.path, 'held-key-line');
    writeFileSync(held, `${line ?? ''}\n`);
    const run = await h.run(sshHostsConfig([host(s)]), { host: 'lab', command: `cat ${held}; printf '\\377'` });
    for (const { output, text } of delivered(run)) {
      expect(output).toMatchObject({ redacted: true, stdout_encoding: 'base64' });
      expect(Buffer.from(String(output?.['stdout']), 'base64').toString('latin1')).toContain('[REDACTED]');
      expect(JSON.stringify(output)).not.toContain(line);
      expect(Buffer.from(String(output?.['stdout']), 'base64').toString('latin1')).not.toContain(line);
      expect(text).toContain('secrets redacted');
    }
  });
});

describe('when the deadline, a cancel or a vault lock fires while DISPATCH_STARTED is being made durable', () => {
  const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  it.for([
    [
      'the host entry’s timeout_ms passes',
      'deadline',
      'OPERATION_TIMEOUT',
      'operation_deadline_after_dispatch_started',
    ],
    ['the caller cancels', 'cancel', 'CALLER_CANCELLED', 'cancellation_after_dispatch_started'],
    // A person locking the vault starts no credential-backed action after it (as on the HTTP path).
    ['a person locks the vault', 'lock', 'REMOTE_OUTCOME_UNKNOWN', 'vault_locked_after_dispatch_started'],
  ] as const)(
    '%s: the exec request is never sent, and the record says unknown with nothing handed to the transport',
    async ([, stop, code, basis], ctx) => {
      const s = need(ctx);
      const disk = new DiskSyncGate();
      const held = await openSshActionHarness(
        { 'lab-key': { privateKey: s.userKey.privateKey, bindings: ['127.0.0.1', 'lab'] } },
        { beforeSync: disk.beforeSync },
      );
      const journal = held.temp.journal;
      // The real journal, its disk held from the moment DISPATCH_STARTED is asked for: beginDispatch stays pending.
      const gate: DispatchGate = {
        append: (event) => journal.append(event),
        appendLater: (event) => journal.appendLater(event),
        commitHeld: () => journal.commitHeld(),
        beginDispatch: (actionId, attempt, connection) => {
          disk.hold();
          return journal.beginDispatch(actionId, attempt, connection);
        },
      };
      held.channel = held.newChannel({}, gate);
      const ran = join(s.dir.path, `ran-during-boundary-${stop}`);
      const cancel = new AbortController();
      try {
        const config = sshHostsConfig([host(s, { extra: '    approval: none\n    timeout_ms: 2000' })]);
        const run = held.run(config, { host: 'lab', command: `touch ${ran}` }, cancel.signal);
        while (disk.waiting() === 0) await disk.nextRequest();
        // The deadline started with the channel, before DISPATCH_STARTED was asked for: 2.1 s later it has fired.
        if (stop === 'cancel') cancel.abort();
        else if (stop === 'lock') held.vault.lock('operator');
        else await pause(2_100);
        disk.release();
        const { envelope } = await run;
        expect(envelope.error).toMatchObject({
          code,
          phase: 'remote_execution',
          outcome: 'unknown',
          retry: 'reconcile',
        });
        expect(envelope).toMatchObject({ effect: 'unknown_effect', outcome_basis: basis });
        expect(envelope.evidence).toMatchObject({
          dispatch_started: true,
          request_complete: false,
          dispatch_evidence: 'started_locally',
        });
        const recorded = kinds(held.events(envelope.invocation_id));
        expect(recorded).toContain('DISPATCH_STARTED');
        expect(recorded).not.toContain('REQUEST_SENT');
        expect(journal.getAction(envelope.invocation_id)).toMatchObject({ outcome: 'unknown' });
        // Time for sshd to run a command it had been sent.
        await pause(300);
        expect(existsSync(ran)).toBe(false);
      } finally {
        disk.release();
        await held.dispose();
      }
    },
  );
});

describe('when searching for the private key everywhere the broker writes', () => {
  it('neither its base64 body nor its comment appears in journal files (with -wal), vault files, known_hosts, logs, envelopes or results', async (ctx) => {
    const s = need(ctx);
    await h.run(sshHostsConfig([host(s)]), { host: 'lab', command: 'echo leak-check' });
    const pem = s.userKey.privateKey.toString('utf8');
    // The first lines of an unencrypted OpenSSH key are a shared header; the rest is this key.
    const body = pem
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('-----'))
      .slice(2);
    expect(body.length).toBeGreaterThan(1);
    const searched: string[] = [];
    await h.temp.journal.close();
    const leaks = secretLeaks(h, [...body, canaryComment], searched);
    expect(searched.some((p) => p.endsWith('journal.sqlite-wal') || p.endsWith('journal.sqlite'))).toBe(true);
    expect(searched.some((p) => p.includes('vault'))).toBe(true);
    expect(leaks).toEqual([]);
  });
});
