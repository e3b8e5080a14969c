import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { ApprovalCard, BrokerApi, BrokerApiMethod } from '../../broker/contract/index.js';
import { callOperator } from '../../broker/cli/operator-commands.js';
import { anchorFileOf } from '../../broker/host/integrity-anchor.js';
import { systemClock } from '../../broker/ports/index.js';
import { ArrivalLogServer } from '../../broker/testing/arrival-log-server.js';
import { openVault } from '../../broker/vault/index.js';
import { DrillAgent, type ToolReply } from './drill-agent.js';
import { startDaemon, type RunningDaemon } from './postern-process.js';
import { acceptConfigAsPerson } from './accepted-config.js';

const conditionWaitMs = 15_000;

/** A running daemon with one per-call route, its arrival-log endpoint, and two approved agent processes. */
export interface Drill {
  dataDir: string;
  daemon: RunningDaemon;
  log: ArrivalLogServer;
  /** Markers whose request applies its effect and then loses its response (the unknown case). */
  drops: Set<string>;
  /** Markers whose request arrives and is answered only at `log.releaseHeld()` (an action in flight meanwhile). */
  holds: Set<string>;
  p1: DrillAgent;
  p2: DrillAgent;
}

/** openDrill's vault passphrase: a person's proof for the decisions that need one (unlockAsPerson, decideAsPerson). */
export const drillPassphrase = 'drill passphrase (test only)';

/**
 * Sets up article 001's drill in `<scratch>/<name>`: a vault (fast KDF, test only) holding the
 * route's bearer credential, postern.yaml with route `docs` (per-call approval, one lane per
 * /docs/{doc}), `postern daemon` started unlocked, two agent processes connected through `postern
 * mcp`, and both sessions approved by a person (the operator API). `extraRouteYaml`: further routes' lines (on the
 * same arrival log: `{port}` stands for its port), for a case that needs a route shaped otherwise.
 */
export async function openDrill(
  scratch: string,
  name: string,
  ttlSeconds: number,
  extraRouteYaml: readonly string[] = [],
): Promise<Drill> {
  const dataDir = path.join(scratch, name);
  mkdirSync(dataDir, { mode: 0o700 });
  const passphrase = drillPassphrase;
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({
    name: 'drill-token',
    kind: 'bearer',
    secret: Buffer.from('CANARY-drill-token-never-shown'),
    bindings: ['docs', '127.0.0.1'],
  });
  await vault.close();
  const passphraseFile = path.join(scratch, `${name}.pass`);
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  const drops = new Set<string>();
  const holds = new Set<string>();
  const log = await ArrivalLogServer.start({
    behave: ({ marker }) => (drops.has(marker) ? 'apply_then_drop' : holds.has(marker) ? 'hold' : 'respond'),
  });
  writeFileSync(
    path.join(dataDir, 'postern.yaml'),
    [
      'version: 1',
      // The drill's person is this test process without a terminal: the CI opt-out, journaled as the process.
      'operator:',
      '  unattended_decisions: true',
      'agents:',
      '  session_approval: required',
      `  approval_ttl_seconds: ${ttlSeconds}`,
      'routes:',
      '  - name: docs',
      `    base_url: http://127.0.0.1:${log.port}`,
      '    credential: drill-token',
      '    injection: bearer',
      '    approval: per_call',
      '    methods: [POST]',
      '    lanes:',
      "      - { methods: ['*'], path: '/docs/{doc}', lane: 'doc-{doc}' }",
      ...extraRouteYaml.map((line) => line.replaceAll('{port}', String(log.port))),
      '',
    ].join('\n'),
  );
  await acceptConfigAsPerson(dataDir, passphraseFile);
  // Unlocked as a person does it (over control.sock, not from the file): the operator UI's sessions then decide once
  // they present the passphrase, as a person's page does (a passphrase file proves no person, web or CLI).
  const daemon = await startDaemon(dataDir, { person: { passphraseFile } });
  const [p1, p2] = await Promise.all([DrillAgent.start(dataDir, 'drill-p1'), DrillAgent.start(dataDir, 'drill-p2')]);
  // Session approval: each new agent process is approved once, by a person, before its calls.
  const sessions = await waitFor(
    () => op(dataDir, 'sessions.list', {}),
    (r) => r.sessions.filter((s) => s.status === 'pending' && s.connected).length >= 2,
    'two pending agent sessions',
  );
  for (const s of sessions.sessions.filter((x) => x.status === 'pending'))
    await op(dataDir, 'sessions.approve', { session_id: s.session_id });
  return { dataDir, daemon, log, drops, holds, p1, p2 };
}

/**
 * An agent's POST of `{ marker }` to /docs/`doc` on the drill's route, waiting up to a minute (longer than any card
 * in these drills); settles with the reply or the error's text, never rejects.
 */
export function postMarker(
  agent: DrillAgent,
  doc: string,
  marker: string,
): Promise<{ reply?: ToolReply; error?: string }> {
  return agent
    .call('http_request', {
      route: 'docs',
      method: 'POST',
      path: `/docs/${doc}`,
      body: JSON.stringify({ marker }),
      timeout_ms: 60_000,
    })
    .reply.then(
      (reply) => ({ reply }),
      (error: unknown) => ({ error: String(error) }),
    );
}

/**
 * The quarantine drill's start: the agent posts `marker` to /docs/`doc`, which waits on its card in `lane`; the daemon
 * stops with it open; the integrity anchor is moved ahead of the journal (as if the journal were an older copy); the
 * daemon starts again, quarantined, and its recovery records that action unknown before dispatch; it starts locked and
 * is unlocked as a person does it (over control.sock), so `passphrase` proves a person for the decisions that follow.
 * Returns its card from before the stop. The agents are stopped (a quarantined broker refuses their calls).
 */
export async function quarantineWithPendingCard(
  drill: Drill,
  lane: string,
  doc: string,
  passphrase: string,
): Promise<ApprovalCard> {
  void postMarker(drill.p1, doc, 'A');
  const [pending] = await waitFor(
    () => laneCards(drill.dataDir, lane),
    (c) => c.length === 1 && c[0]?.state === 'pending',
    'A pending',
  );
  await drill.daemon.process.stop('SIGTERM');
  await Promise.allSettled([drill.p1.stop(), drill.p2.stop()]);
  const anchorFile = anchorFileOf(drill.dataDir);
  const anchor = JSON.parse(readFileSync(anchorFile, 'utf8')) as { counter: number };
  writeFileSync(anchorFile, JSON.stringify({ ...anchor, counter: anchor.counter + 5 }));
  drill.daemon = await startDaemon(drill.dataDir, { person: { passphrase } });
  return pending as ApprovalCard;
}

export async function closeDrill(drill: Drill | undefined): Promise<void> {
  if (drill === undefined) return;
  await Promise.allSettled([drill.p1.stop(), drill.p2.stop()]);
  await drill.daemon.process.stop('SIGTERM');
  await drill.log.stop();
}

/**
 * One drill for the whole test file: opened (openDrill, in a fresh `<tmp>/<scratchPrefix>…` folder) before its tests,
 * closed and its folder removed after them. Returns the running drill, which throws if it did not start. Call it at
 * the top level of the file; an `afterAll` the file adds after this call runs before the drill closes.
 */
export function drillForFile(
  scratchPrefix: string,
  name: string,
  ttlSeconds: number,
  extraRouteYaml: readonly string[] = [],
): () => Drill {
  const scratch = mkdtempSync(path.join(os.tmpdir(), scratchPrefix));
  let drill: Drill | undefined;
  beforeAll(async () => {
    drill = await openDrill(scratch, name, ttlSeconds, extraRouteYaml);
  }, 90_000);
  afterAll(async () => {
    await closeDrill(drill);
    rmSync(scratch, { recursive: true, force: true });
  }, 30_000);
  return () => {
    if (drill === undefined) throw new Error('the drill did not start');
    return drill;
  };
}

/** One operator API call over the daemon's control socket, as the CLI makes it. */
export function op<M extends BrokerApiMethod>(
  dataDir: string,
  method: M,
  input: BrokerApi[M]['input'],
): Promise<BrokerApi[M]['output']> {
  return callOperator(dataDir, method, input);
}

/** Re-reads until the condition holds (bounded); the broker's state is the event we wait on. */
export async function waitFor<T>(read: () => Promise<T>, holds: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + conditionWaitMs;
  for (;;) {
    const value = await read();
    if (holds(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value).slice(0, 2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 15));
  }
}

/** The first pending card of the approvals list, waited for (bounded); `what` names it in the timeout's error. */
export async function pendingCard(dataDir: string, what: string): Promise<ApprovalCard> {
  const { cards } = await waitFor(
    () => op(dataDir, 'approvals.list', {}),
    (r) => r.cards.some((c) => c.state === 'pending'),
    what,
  );
  return cards.find((c) => c.state === 'pending') as ApprovalCard;
}

/** The open cards of one lane, in ticket order. */
export async function laneCards(dataDir: string, lane: string): Promise<ApprovalCard[]> {
  return (await op(dataDir, 'approvals.list', {})).cards
    .filter((c) => c.lane === lane)
    .sort((a, b) => a.ticket - b.ticket);
}
