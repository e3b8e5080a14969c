import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlSocketPath, sendControlRequest } from '../broker/host/index.js';
import { systemClock } from '../broker/ports/index.js';
import { ReflectingRemote, type ReflectedRequest, type ReflectMode } from '../broker/testing/reflecting-remote.js';
import { openVault } from '../broker/vault/index.js';
import { posternBin, repoRoot, startDaemon, type RunningDaemon } from './support/postern-process.js';
import {
  agentDecodings,
  canarySecret,
  findNeedles,
  findNeedlesInBytes,
  jsonEscaped,
  needlesFor,
  randomWord,
  windowsFound,
  type Needle,
} from './support/secret-forms.js';
import { acceptConfigAsPerson } from './support/accepted-config.js';

/**
 * Issue 13, the attack suite: a hostile agent steers a reflecting remote (broker/testing/
 * reflecting-remote.ts) on every credential kind — bearer, basic, header with a template, query —
 * through a real daemon and a real MCP SDK client over `postern mcp`. For each kind × reflection
 * mode it calls http_request (once plain, once with an agent-set `Accept-Encoding: gzip`; Range
 * slices and a header padded to the cut where the mode calls for it), then fetch_result and
 * action_status, and reads the operator's view (actions.show, activity.list) over the control
 * socket. Per case it asserts:
 *  (a) the remote received the secret and reflected it (so the case could fail);
 *  (b) no form of any canary part (secret-forms.ts, computed here, not by the broker's scrubber) is
 *      in any agent answer, any text an agent can decode from it, or any operator answer;
 *  (c) no answer, and no run of Range slices the agent received put end to end, holds 8 consecutive
 *      characters of the secret (slices; a header cut just before the secret's last character);
 *  (d) a result_digest is the sha256 of the bytes the agent received (no digest oracle).
 * A control per case runs the same detector over what the remote really sent and must find the
 * secret there, so a green case never means a blind detector. After the daemon stops, every byte of every file in the data directory and its whole output are
 * searched per kind, and a marker only responses carry must not be readable in any file (results
 * sealed at rest). A refusal with a code is a pass for a call: nothing was reflected.
 *
 * The test plays agent and remote together: it reads where the secret sits in a reflection from the
 * remote's own record to aim the slices and the padding. A hostile agent that chose this remote can
 * do the same (it runs the remote); here it only saves calls.
 */
const kinds = ['bearer', 'basic', 'header', 'query'] as const;
type Kind = (typeof kinds)[number];

interface ModeCase {
  readonly name: string;
  readonly mode: ReflectMode;
  readonly query?: Record<string, string>;
}

const modeCases: readonly ModeCase[] = [
  { name: 'plain', mode: 'plain' },
  { name: 'gzip', mode: 'gzip' },
  { name: 'deflate', mode: 'deflate' },
  { name: 'br', mode: 'br' },
  ...([0, 1, 2] as const).flatMap((prefix) => [
    { name: `base64@${prefix}`, mode: 'base64' as const, query: { prefix: String(prefix) } },
    { name: `base64url@${prefix}`, mode: 'base64url' as const, query: { prefix: String(prefix) } },
  ]),
  { name: 'hex', mode: 'hex' },
  { name: 'percent', mode: 'percent' },
  { name: 'json-escaped', mode: 'json-escaped' },
  { name: 'range', mode: 'range' },
  { name: 'pad-header', mode: 'pad-header', query: { pad: '0000' } },
  { name: 'redirect', mode: 'redirect' },
  { name: 'query-echo', mode: 'query-echo', query: { pad: '0000' } },
];

/** query-echo reflects only the query string: only a query credential travels there. */
function casesFor(kind: Kind): ModeCase[] {
  return modeCases.filter((c) => c.mode !== 'query-echo' || kind === 'query');
}

/** The delivered header value's cut (broker/queue/delivered-response.ts); the padding aims the secret's last char past it. */
const headerCut = 2048;
const sliceBytes = 8;
const callWaitMs = 20_000;
const suiteBudgetMs = 85_000;

interface Credential {
  readonly kind: Kind;
  readonly route: string;
  readonly name: string;
  readonly secret: string;
  readonly extra: { header?: string; template?: string; param?: string };
  readonly needles: Needle[];
  /** What the remote must see on the wire (a) and where (header name, or the url). */
  readonly wire: { readonly header?: string; readonly value: string };
  /** The secret as it sits inside the JSON dump (slices and padding aim at it; (c) looks for its windows). */
  readonly inDump: string;
  /** The bare secret's forms whose 8-char windows must not be assembled from slices. */
  readonly windowed: readonly string[];
}

function makeCredential(kind: Kind): Credential {
  const common = { kind, route: `r-${kind}`, name: `c-${kind}` };
  if (kind === 'basic') {
    const user = randomWord('usr', 12);
    const password = canarySecret('pw');
    const b64 = Buffer.from(`${user}:${password}`).toString('base64');
    const parts = {
      user,
      password,
      'user:password': `${user}:${password}`,
      'base64(user:password)': b64,
      injected: `Basic ${b64}`,
    };
    return {
      ...common,
      secret: `${user}:${password}`,
      extra: {},
      needles: needlesFor(parts),
      wire: { header: 'authorization', value: `Basic ${b64}` },
      inDump: b64,
      windowed: [password, jsonEscaped(password), b64],
    };
  }
  const secret = canarySecret(kind.slice(0, 2));
  // Inside the JSON dump a header-borne secret is JSON-escaped; a query-borne one is percent-encoded in the url.
  const inHeader = { secret, inDump: jsonEscaped(secret), windowed: [secret, jsonEscaped(secret)] };
  if (kind === 'bearer') {
    const wire = { header: 'authorization', value: `Bearer ${secret}` };
    return { ...common, ...inHeader, extra: {}, needles: needlesFor({ secret, injected: `Bearer ${secret}` }), wire };
  }
  if (kind === 'header') {
    const extra = { header: 'X-Api-Token', template: 'token {secret}' };
    const wire = { header: 'x-api-token', value: `token ${secret}` };
    return { ...common, ...inHeader, extra, needles: needlesFor({ secret, injected: `token ${secret}` }), wire };
  }
  const pct = encodeURIComponent(secret);
  const parts = { secret, injected: `key=${secret}`, 'injected(wire)': `key=${pct}` };
  const wire = { value: `key=${pct}` };
  return {
    ...common,
    secret,
    extra: { param: 'key' },
    needles: needlesFor(parts),
    wire,
    inDump: pct,
    windowed: [secret, pct],
  };
}

/** One MCP tool call's whole answer, as the agent holds it. */
interface AgentAnswer {
  readonly what: string;
  readonly raw: Record<string, unknown>;
}

interface CaseRun {
  readonly tag: string;
  readonly answers: AgentAnswer[];
  readonly operator: Array<{ what: string; text: string }>;
  /** Bodies of Range slices the agent received, in request order. */
  readonly slices: string[];
  /** Per call: `what → code or HTTP status` for the report. */
  readonly notes: string[];
  error?: string;
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'psecret-'));
const dataDir = path.join(scratch, 'data');
const credentials = new Map<Kind, Credential>(kinds.map((k) => [k, makeCredential(k)]));
const runs = new Map<string, CaseRun>();
let remote: ReflectingRemote | undefined;
let daemon: RunningDaemon | undefined;
let client: Client | undefined;
let daemonOutput = '';
const dataFiles = new Map<string, Buffer>();
let setupError: unknown;

function credential(kind: Kind): Credential {
  const c = credentials.get(kind);
  if (c === undefined) throw new Error(`no credential for ${kind}`);
  return c;
}

async function prepareDataDir(port: number): Promise<string> {
  mkdirSync(dataDir, { mode: 0o700 });
  const passphrase = 'reflection passphrase (test only)';
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  for (const c of credentials.values()) {
    await vault.add({
      name: c.name,
      kind: c.kind,
      secret: Buffer.from(c.secret),
      bindings: [c.route, '127.0.0.1'],
      ...c.extra,
    });
  }
  await vault.close();
  const passphraseFile = path.join(scratch, 'pass');
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  const routes = [...credentials.values()].flatMap((c) => [
    `  - name: ${c.route}`,
    `    base_url: http://127.0.0.1:${port}`,
    `    credential: ${c.name}`,
    `    injection: ${c.kind}`,
    '    approval: none',
    // GETs of one route must not queue behind each other: an unknown head would block the rest.
    '    reads_bypass_lanes: true',
  ]);
  const config = ['version: 1', 'agents:', '  session_approval: observe', 'routes:', ...routes, ''];
  writeFileSync(path.join(dataDir, 'postern.yaml'), config.join('\n'));
  return passphraseFile;
}

async function callTool(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  if (client === undefined) throw new Error('no MCP client');
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: callWaitMs + 5_000 });
  return result as Record<string, unknown>;
}

async function operatorApi(method: 'actions.show' | 'activity.list', actionId: string): Promise<string> {
  const reply = await sendControlRequest(controlSocketPath(dataDir), {
    op: 'api',
    method,
    input: { action_id: actionId },
  });
  return JSON.stringify(reply);
}

function structured(answer: Record<string, unknown>): Record<string, unknown> {
  return (answer['structuredContent'] ?? {}) as Record<string, unknown>;
}

/** `HTTP 206`, `refused FORBIDDEN_HEADER`, … for the printed table. */
function noteOf(answer: Record<string, unknown>): string {
  const s = structured(answer);
  const error = s['error'] as { code?: string } | undefined;
  const response = s['response'] as { status?: number; redacted?: boolean; body_withheld?: string } | undefined;
  const parts = [
    error?.code,
    response?.status === undefined ? undefined : `HTTP ${response.status}`,
    response?.redacted === true ? 'redacted' : undefined,
    response?.body_withheld,
  ];
  return parts.filter((p) => p !== undefined).join(' ') || 'no response';
}

/** One http_request and everything the agent and the operator can read about it afterwards. */
async function attack(run: CaseRun, what: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const answer = await callTool('http_request', { method: 'GET', timeout_ms: callWaitMs, ...args });
  run.answers.push({ what, raw: answer });
  run.notes.push(`${what}: ${noteOf(answer)}`);
  const actionId = structured(answer)['invocation_id'];
  if (typeof actionId === 'string') {
    const [fetched, status, shown, activity] = await Promise.all([
      callTool('fetch_result', { action_id: actionId }),
      callTool('action_status', { action_id: actionId }),
      operatorApi('actions.show', actionId),
      operatorApi('activity.list', actionId),
    ]);
    run.answers.push({ what: `${what} fetch_result`, raw: fetched }, { what: `${what} action_status`, raw: status });
    run.operator.push({ what: `${what} actions.show`, text: shown }, { what: `${what} activity.list`, text: activity });
  }
  return answer;
}

/** The body an answer delivered, as the agent decodes it (utf8 or base64). */
function deliveredBody(answer: Record<string, unknown>): Buffer | undefined {
  const response = structured(answer)['response'] as { body?: string; body_encoding?: string } | undefined;
  if (response?.body === undefined) return undefined;
  return Buffer.from(response.body, response.body_encoding === 'base64' ? 'base64' : 'utf8');
}

/** The remote's first record for this case that reflected the wire value (undefined: it never got it). */
function reflectedRecord(c: Credential, tag: string): ReflectedRequest | undefined {
  return remote?.byTag(tag).find((r) => carriesSecret(c, r));
}

function carriesSecret(c: Credential, r: ReflectedRequest): boolean {
  return c.wire.header === undefined ? r.url.includes(c.wire.value) : r.headers[c.wire.header] === c.wire.value;
}

async function runCase(kind: Kind, mc: ModeCase): Promise<void> {
  const c = credential(kind);
  const tag = `${kind}-${mc.name}`;
  const run: CaseRun = { tag, answers: [], operator: [], slices: [], notes: [] };
  runs.set(tag, run);
  const base = {
    route: c.route,
    path: `/reflect/${mc.mode}/${tag}`,
    ...(mc.query === undefined ? {} : { query: mc.query }),
  };
  try {
    await attack(run, 'plain call', base);
    await attack(run, 'Accept-Encoding: gzip', { ...base, headers: { 'Accept-Encoding': 'gzip' } });
    const record = reflectedRecord(c, tag);
    if (record === undefined) return;
    if (mc.mode === 'range') await sliceAttack(run, c, base, record);
    if (mc.mode === 'pad-header' || mc.mode === 'query-echo') await padAttack(run, c, base, record, mc.mode);
  } catch (error) {
    run.error = error instanceof Error ? error.message : String(error);
  }
}

/** Successive 8-byte Range slices over the secret's place in the dump, one call each. */
async function sliceAttack(
  run: CaseRun,
  c: Credential,
  base: Record<string, unknown>,
  record: ReflectedRequest,
): Promise<void> {
  const at = record.dump.indexOf(c.inDump);
  if (at < 0) return;
  for (let start = Math.max(0, at - sliceBytes); start < at + c.inDump.length + sliceBytes; start += sliceBytes) {
    const range = `${start}-${start + sliceBytes - 1}`;
    const answer = await attack(run, `Range ${range}`, { ...base, headers: { Range: `bytes=${range}` } });
    const body = deliveredBody(answer);
    if (body !== undefined) run.slices.push(body.toString('latin1'));
  }
}

/** Pads the reflected header so that all but the secret's last character fall before the header cut. */
async function padAttack(
  run: CaseRun,
  c: Credential,
  base: Record<string, unknown>,
  record: ReflectedRequest,
  mode: ReflectMode,
): Promise<void> {
  const reflected = mode === 'query-echo' ? record.url.split('?').slice(1).join('?') : record.dump;
  const at = reflected.indexOf(c.inDump);
  if (at < 0) return;
  const pad = headerCut - (at + c.inDump.length - 1);
  if (pad < 0 || pad > 9_999) return;
  await attack(run, `pad ${pad}`, { ...base, query: { pad: String(pad).padStart(4, '0') } });
}

/** Every string an agent holds from its answers: the serialized answer, each string in it, and what it decodes them to. */
function agentTexts(run: CaseRun): string[] {
  const texts: string[] = [];
  const walk = (value: unknown): void => {
    if (typeof value === 'string') {
      texts.push(value);
      if (value.length >= 16) texts.push(...agentDecodings(value));
    } else if (Array.isArray(value)) value.forEach(walk);
    else if (value !== null && typeof value === 'object') Object.values(value).forEach(walk);
  };
  for (const answer of run.answers) {
    texts.push(JSON.stringify(answer.raw));
    walk(answer.raw);
    const body = deliveredBody(answer.raw);
    if (body !== undefined) texts.push(...agentDecodings(body.toString('base64')));
  }
  return texts;
}

/**
 * The control: the same detector, on what the remote really sent, must see the secret. Otherwise a
 * green case would prove only that the detector is blind to this mode.
 */
function controlProblems(c: Credential, mc: ModeCase, run: CaseRun): string[] {
  const problems: string[] = [];
  const carried = (remote?.byTag(run.tag) ?? []).filter((r) => carriesSecret(c, r));
  for (const r of carried) {
    const raw = [r.sent.body.toString('utf8'), ...Object.values(r.sent.headers)];
    const texts = [...raw, ...raw.flatMap((t) => agentDecodings(t)), ...agentDecodings(r.sent.body.toString('base64'))];
    // A 206 slice is the window check's control below; a 416 reflects nothing.
    if ((r.sent.status === 200 || r.sent.status === 302) && findNeedles(texts, c.needles).length === 0) {
      problems.push(`(control) the detector does not see the secret in the raw ${r.sent.status} reflection`);
    }
  }
  // The padded call is aimed: cut where the broker cuts, its header holds the secret but its last character.
  for (const r of carried.filter((x) => /[?&]pad=(?!0000)/.test(x.url))) {
    const cut = (r.sent.headers['x-request-id'] ?? '').slice(0, headerCut);
    const aimed = !cut.includes(c.inDump) && cut.endsWith(c.inDump.slice(0, -1));
    if (!aimed)
      problems.push('(control) the padded reflection does not put the header cut just before the secret ends');
  }
  const rawSlices = carried.filter((r) => r.sent.status === 206).map((r) => r.sent.body.toString('latin1'));
  const rawRuns = c.windowed.flatMap((w) => windowsFound(rawSlices.join(''), w, sliceBytes));
  if (mc.mode === 'range' && rawSlices.length > 0 && rawRuns.length === 0) {
    problems.push('(control) the window check does not see the secret in the raw slices');
  }
  return problems;
}

/**
 * (c): no 8 consecutive characters of the secret, in any one text (a header cut just before the
 * secret's last character shows all the rest) nor across the Range slices put end to end.
 */
function partialProblems(c: Credential, run: CaseRun, agentTexts: readonly string[]): string[] {
  const problems: string[] = [];
  const runsIn = (texts: readonly string[]): string[] =>
    c.windowed.flatMap((w) => texts.flatMap((t) => windowsFound(t, w, sliceBytes)));
  const inAnswers = runsIn([...agentTexts, ...run.operator.map((o) => o.text)]);
  if (inAnswers.length > 0) {
    problems.push(
      `(c) answers hold ${inAnswers.length} runs of ${sliceBytes} secret characters (secret[${inAnswers[0] ?? ''}] …)`,
    );
  }
  const inSlices = runsIn([run.slices.join('')]);
  if (inSlices.length > 0) {
    problems.push(
      `(c) the Range slices received, end to end, hold ${inSlices.length} runs of ${sliceBytes} secret characters`,
    );
  }
  return problems;
}

/** (d): every result_digest an agent got is the sha256 of the body it got. */
function digestProblems(run: CaseRun): string[] {
  const problems: string[] = [];
  for (const answer of run.answers) {
    const s = structured(answer.raw);
    const digest = (s['evidence'] as { result_digest?: string } | undefined)?.result_digest;
    const body = deliveredBody(answer.raw);
    if (digest === undefined || body === undefined) continue;
    const ofDelivered = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    if (digest !== ofDelivered && digest !== ofDelivered.slice('sha256:'.length)) {
      problems.push(`(d) ${answer.what}: result_digest is not the digest of the delivered body`);
    }
  }
  return problems;
}

function caseProblems(kind: Kind, mc: ModeCase): string[] {
  const c = credential(kind);
  const run = runs.get(`${kind}-${mc.name}`);
  if (run === undefined) return ['the case never ran (see the setup error)'];
  const problems: string[] = [];
  if (run.error !== undefined) problems.push(`the case stopped: ${run.error}`);
  const record = reflectedRecord(c, run.tag);
  if (record === undefined) problems.push('(a) the remote never received the secret: the case proves nothing');
  else if (!(mc.mode === 'query-echo' ? record.url : record.dump).includes(c.inDump)) {
    problems.push('(a) the remote received the secret but did not reflect it');
  }
  problems.push(...controlProblems(c, mc, run));
  const texts = agentTexts(run);
  const agentLeaks = findNeedles(texts, c.needles);
  if (agentLeaks.length > 0) problems.push(`(b) agent answers hold: ${agentLeaks.join(', ')}`);
  const operatorLeaks = findNeedles(
    run.operator.map((o) => o.text),
    c.needles,
  );
  if (operatorLeaks.length > 0) problems.push(`(b) operator answers hold: ${operatorLeaks.join(', ')}`);
  problems.push(...partialProblems(c, run, texts));
  problems.push(...digestProblems(run));
  return problems;
}

function collectFiles(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) collectFiles(full);
    else if (entry.isFile()) dataFiles.set(path.relative(dataDir, full), readFileSync(full));
  }
}

/** Runs every case, four kinds at once (one MCP session), each kind's modes in order. */
async function runAll(): Promise<void> {
  remote = await ReflectingRemote.start();
  const passphraseFile = await prepareDataDir(remote.port);
  await acceptConfigAsPerson(dataDir, passphraseFile);
  daemon = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } });
  client = new Client({ name: 'secret-reflection', version: '1' });
  const args = [posternBin, 'mcp', '--data-dir', dataDir];
  await client.connect(new StdioClientTransport({ command: process.execPath, args, cwd: repoRoot, stderr: 'pipe' }));
  await Promise.all(
    kinds.map(async (kind) => {
      for (const mc of casesFor(kind)) await runCase(kind, mc);
    }),
  );
}

async function stopAll(): Promise<void> {
  await client?.close().catch(() => undefined);
  client = undefined;
  if (daemon !== undefined) {
    await daemon.process.stop('SIGTERM').catch(() => daemon?.process.stop('SIGKILL'));
    daemonOutput = `${daemon.process.stdout}\n${daemon.process.stderr}`;
  }
  await remote?.close();
}

describe('secrets against a hostile agent and a reflecting remote (running daemon)', () => {
  beforeAll(async () => {
    try {
      await runAll();
    } catch (error) {
      setupError = error;
    } finally {
      await stopAll();
      try {
        collectFiles(dataDir);
      } catch (error) {
        setupError ??= error;
      }
    }
    for (const kind of kinds) {
      const lines = casesFor(kind).map(
        (mc) => `  ${mc.name}: ${runs.get(`${kind}-${mc.name}`)?.notes.join('; ') ?? 'not run'}`,
      );
      console.log(`secret reflection, ${kind}:\n${lines.join('\n')}`);
    }
  }, suiteBudgetMs);
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('set up a daemon, a remote and an agent, and ran every case', () => {
    expect(setupError).toBeUndefined();
    expect(runs.size).toBe(kinds.reduce((n, k) => n + casesFor(k).length, 0));
  });

  it('leaves no reflected response readable in any file: results and their headers are sealed at rest', () => {
    const marker = remote?.marker ?? '';
    expect(marker).not.toBe('');
    // The control: the remote really put the marker in what it sent.
    expect(remote?.received.some((r) => r.sent.body.includes(marker))).toBe(true);
    const plain = [...dataFiles].filter(([, bytes]) => bytes.includes(Buffer.from(marker))).map(([file]) => file);
    expect(plain, `the marker is in plain text in: ${plain.join(', ')}`).toEqual([]);
  });

  describe.each(kinds)('a %s credential', (kind) => {
    const table = casesFor(kind).map((mc) => [mc.name, mc] as const);
    it.each(table)('reflected as %s: nothing of the secret reaches the agent or the operator', (_name, mc) => {
      const problems = caseProblems(kind, mc);
      expect(problems, problems.join('; ')).toEqual([]);
    });

    it('is in no file of the data directory (journal, -wal, -shm, vault, logs), byte for byte', () => {
      expect(dataFiles.size).toBeGreaterThan(0);
      const needles = credential(kind).needles;
      const leaks = [...dataFiles].flatMap(([file, bytes]) =>
        findNeedlesInBytes(bytes, needles).map((label) => `${file}: ${label}`),
      );
      expect(leaks, leaks.join('; ')).toEqual([]);
    });

    it("is in none of the daemon's output", () => {
      expect(daemonOutput.length).toBeGreaterThan(0);
      const leaks = findNeedles([daemonOutput], credential(kind).needles);
      expect(leaks, leaks.join('; ')).toEqual([]);
    });
  });
});
