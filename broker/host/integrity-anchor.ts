import { createHash, createPublicKey, randomBytes, verify } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, realpathSync } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { AgentRefusal, AgentToolName } from '../contract/agent-api.js';
import type { AnchorFailureCode } from '../contract/anchor-failure-codes.js';
import { CodedError } from '../contract/coded-error.js';
import { integritySubjectId } from '../contract/config-constants.js';
import type { IntegrityAnchorReport } from '../contract/operator-integrity-api.js';
import type { RecoveredJournal } from '../core/index.js';
import type { AnchorFacts, AnchorRecord, Journal, SignedHead } from '../journal/index.js';
import type { Clock, OperatorActor, ToolAnswer } from '../ports/index.js';

/** An anchor file is a few hundred bytes; anything far larger is not ours and is not parsed. */
const anchorBytesMax = 16 * 1024;
const anchorDomain = 'postern-integrity-anchor:v1\n';
/** Ed25519 SubjectPublicKeyInfo prefix: node:crypto verifies the raw 32-byte audit key with it. */
const ed25519SpkiPrefix = Buffer.from('302a300506032b6570032100', 'hex');

/** The anchor file: every field but `signature` is signed, in this order (anchorMessage). */
export interface AnchorBody {
  readonly version: 1;
  /** sha256 (hex) of the data directory's real path: an anchor copied to another data directory is refused. */
  readonly data_dir: string;
  readonly counter: number;
  readonly head_seq: number;
  /** The Merkle tree head (hex) over the journal's first head_seq events, as the checkpoint signed it. */
  readonly head_hash: string;
  /** sha256 (hex) over the audit key ring's public halves: a swapped key ring no longer matches. */
  readonly state_digest: string;
  /** The first 16 bytes (hex) of sha256 over the audit signing public key. */
  readonly key_id: string;
  readonly written_at_ms: number;
}

interface AnchorFile extends AnchorBody {
  /** Ed25519 over anchorMessage(body) with the journal's audit signing key (base64). */
  readonly signature: string;
}

type ReadAnchor =
  | { readonly kind: 'absent' }
  | { readonly kind: 'unreadable'; readonly why: string }
  | { readonly kind: 'read'; readonly anchor: AnchorFile };

/** What the start decided: the report without the time and file (those are added by the caller). */
export type AnchorVerdict =
  | { readonly state: 'ok' | 'first_use'; readonly detail: string }
  | { readonly state: 'quarantined'; readonly code: AnchorFailureCode; readonly detail: string };

/**
 * Where anchors live: outside every data directory, so restoring a data directory from an earlier copy cannot restore
 * its anchor too. `POSTERN_ANCHOR_DIR` (absolute) for tests, else $XDG_STATE_HOME/postern/anchors, else
 * ~/.local/state/postern/anchors (a relative XDG_STATE_HOME is invalid and ignored, as the spec says).
 */
export function anchorDirOf(env: NodeJS.ProcessEnv = process.env, home: string = os.homedir()): string {
  const override = env['POSTERN_ANCHOR_DIR'];
  if (override !== undefined && path.isAbsolute(override)) return override;
  const xdg = env['XDG_STATE_HOME'];
  const stateHome = xdg !== undefined && path.isAbsolute(xdg) ? xdg : path.join(home, '.local', 'state');
  return path.join(stateHome, 'postern', 'anchors');
}

/** sha256 (hex) of the data directory's real path: its anchor's name and `data_dir` field. */
export function dataDirIdOf(dataDir: string): string {
  return createHash('sha256').update(realpathSync(dataDir), 'utf8').digest('hex');
}

export function anchorFileOf(dataDir: string, env: NodeJS.ProcessEnv = process.env): string {
  return path.join(anchorDirOf(env), `${dataDirIdOf(dataDir)}.json`);
}

export function keyIdOf(signPublic: Uint8Array): string {
  return createHash('sha256').update(signPublic).digest('hex').slice(0, 32);
}

export function stateDigestOf(signPublic: Uint8Array, boxPublic: Uint8Array): string {
  return createHash('sha256').update('postern-anchor-state:v1\n').update(boxPublic).update(signPublic).digest('hex');
}

export function anchorMessage(body: AnchorBody): Buffer {
  const fields = [
    body.version,
    body.data_dir,
    body.counter,
    body.head_seq,
    body.head_hash,
    body.state_digest,
    body.key_id,
    body.written_at_ms,
  ];
  return Buffer.from(`${anchorDomain}${JSON.stringify(fields)}`, 'utf8');
}

export function signatureValid(anchor: AnchorFile, signPublic: Uint8Array): boolean {
  try {
    const key = createPublicKey({ key: Buffer.concat([ed25519SpkiPrefix, signPublic]), format: 'der', type: 'spki' });
    return verify(null, anchorMessage(anchor), key, Buffer.from(anchor.signature, 'base64'));
  } catch {
    return false;
  }
}

/**
 * Never blocks and never reads more than the bound: the anchor's path is writable by the agent's user, who can make it
 * a FIFO (a blocking open would stop the event loop inside a checkpoint's transaction), a symlink to /dev/zero, or a
 * huge file. O_NONBLOCK makes opening a FIFO return at once, O_NOFOLLOW refuses a symlink, and fstat must say a
 * regular file before one bounded read. Anything else is `unreadable`, which the start judges ANCHOR_FORGED.
 */
export function readAnchorFile(file: string): ReadAnchor {
  let text: string;
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOENT') return { kind: 'absent' };
    if (code === 'ELOOP') return { kind: 'unreadable', why: 'it is a symbolic link' };
    return { kind: 'unreadable', why: `it could not be read (${String(code)})` };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { kind: 'unreadable', why: 'it is not a regular file' };
    if (stat.size > anchorBytesMax) return { kind: 'unreadable', why: `it is larger than ${anchorBytesMax} bytes` };
    // One byte past the bound tells a file that grew since the fstat from one that fits.
    const buffer = Buffer.alloc(anchorBytesMax + 1);
    const length = readSync(fd, buffer, 0, buffer.length, 0);
    if (length > anchorBytesMax) return { kind: 'unreadable', why: `it is larger than ${anchorBytesMax} bytes` };
    text = buffer.subarray(0, length).toString('utf8');
  } catch (error) {
    return { kind: 'unreadable', why: `it could not be read (${String((error as { code?: unknown }).code)})` };
  } finally {
    closeSync(fd);
  }
  try {
    const parsed = JSON.parse(text) as Partial<AnchorFile>;
    if (!isAnchorFile(parsed)) return { kind: 'unreadable', why: 'it is not an anchor of this version' };
    return { kind: 'read', anchor: parsed };
  } catch {
    return { kind: 'unreadable', why: 'it is not JSON' };
  }
}

function isAnchorFile(value: Partial<AnchorFile>): value is AnchorFile {
  const int = (n: unknown): boolean => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  const hex = (s: unknown): boolean => typeof s === 'string' && /^[0-9a-f]{1,128}$/.test(s);
  return (
    typeof value === 'object' &&
    value !== null &&
    value.version === 1 &&
    hex(value.data_dir) &&
    int(value.counter) &&
    int(value.head_seq) &&
    hex(value.head_hash) &&
    hex(value.state_digest) &&
    hex(value.key_id) &&
    int(value.written_at_ms) &&
    typeof value.signature === 'string' &&
    value.signature.length <= 200
  );
}

export type JournalAnchorView = AnchorFacts;

/**
 * The start's decision, a table of contents of named checks (no I/O): the anchor as read, against the journal as
 * found before recovery. A missing anchor is first use only while the journal never recorded writing one (a journal
 * from before anchors, or never unlocked): once it has, a missing anchor is a deletion or a moved data directory, and
 * quarantines.
 */
export function judgeAnchor(read: ReadAnchor, dataDirId: string, journal: JournalAnchorView): AnchorVerdict {
  const recorded = journal.recorded;
  if (read.kind === 'absent') {
    if (recorded === undefined) return { state: 'first_use', detail: 'no anchor yet: the next checkpoint writes one' };
    return quarantine('ANCHOR_MISSING', `the journal recorded anchor ${recorded.counter}, but no anchor file exists`);
  }
  if (read.kind === 'unreadable') return quarantine('ANCHOR_FORGED', `the anchor file is damaged: ${read.why}`);
  const anchor = read.anchor;
  if (anchor.data_dir !== dataDirId) return quarantine('ANCHOR_FORGED', 'the anchor names another data directory');
  if (journal.sign_public === undefined || journal.box_public === undefined)
    return quarantine('ANCHOR_ROLLBACK', 'the journal has no audit key yet, but an anchor signed with one exists');
  if (anchor.key_id !== keyIdOf(journal.sign_public))
    return quarantine('ANCHOR_FORGED', "the anchor is signed by a key this journal's audit key ring does not hold");
  if (!signatureValid(anchor, journal.sign_public))
    return quarantine('ANCHOR_FORGED', "the anchor's signature does not verify under the journal's audit key");
  if (anchor.state_digest !== stateDigestOf(journal.sign_public, journal.box_public))
    return quarantine(
      'ANCHOR_STATE_MISMATCH',
      "the journal's audit key ring is not the one the anchor was signed over",
    );
  const behind = `the anchor (counter ${anchor.counter}, head ${anchor.head_seq})`;
  if (recorded === undefined)
    return quarantine('ANCHOR_ROLLBACK', `${behind} is newer than this journal, which never recorded an anchor`);
  if (anchor.counter < recorded.counter)
    return quarantine(
      'ANCHOR_ROLLBACK',
      `the anchor (counter ${anchor.counter}) is older than the journal recorded (${recorded.counter})`,
    );
  if (journal.events < anchor.head_seq) {
    // The journal's own record tells an earlier copy of it (behind the anchor too) from one that lost its tail.
    return anchor.counter > recorded.counter
      ? quarantine('ANCHOR_ROLLBACK', `${behind} is ahead of the journal (${journal.events} events): an earlier copy`)
      : quarantine('ANCHOR_TAIL_MISSING', `${behind} names events the journal no longer has (${journal.events})`);
  }
  // The anchor file lands before the journal records it, so the journal may be one behind after a crash, never more.
  if (anchor.counter > recorded.counter + 1)
    return quarantine('ANCHOR_ROLLBACK', `${behind} is ahead of the journal's record (${recorded.counter})`);
  const root = journal.root_at_head;
  if (root === undefined || Buffer.from(root).toString('hex') !== anchor.head_hash)
    return quarantine(
      'ANCHOR_TAIL_MISSING',
      `the journal's tree head at seq ${anchor.head_seq} is not the anchored one`,
    );
  return { state: 'ok', detail: `anchor ${anchor.counter} matches the journal at seq ${anchor.head_seq}` };
}

function quarantine(code: AnchorFailureCode, detail: string): AnchorVerdict {
  return { state: 'quarantined', code, detail };
}

export interface IntegrityAnchorGateOptions {
  readonly dataDir: string;
  readonly clock: Clock;
  readonly logger?: Logger;
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * The anchor's two steps at start. `judgeBeforeRecovery` is Journal.open's hook (JournalOpenOptions): it reads the
 * anchor file and judges the journal as found, after migrations and before recovery, reading only (no vault, no
 * write), so that a journal the anchor disputes is recovered without claiming not_attempted (classify-restart.ts).
 * `open` then serves that verdict for the journal it judged; it throws when the hook never judged this journal, so the
 * check cannot be left out, nor made after recovery has written.
 */
export interface IntegrityAnchorGate {
  judgeBeforeRecovery(journal: Journal): RecoveredJournal;
  open(journal: Journal): IntegrityAnchor;
}

/** What the hook found: the anchor file as read, and the verdict over the journal before recovery. */
interface AnchorCheck {
  readonly journal: Journal;
  readonly found: AnchorFile | undefined;
  readonly verdict: AnchorVerdict;
  readonly checkedAtMs: number;
}

export function integrityAnchorGate(options: IntegrityAnchorGateOptions): IntegrityAnchorGate {
  let check: AnchorCheck | undefined;
  return {
    judgeBeforeRecovery: (journal) => {
      const read = readAnchorFile(anchorFileOf(options.dataDir, options.env));
      const found = read.kind === 'read' ? read.anchor : undefined;
      const verdict = judgeAnchor(read, dataDirIdOf(options.dataDir), journal.anchorFacts(found?.head_seq ?? 0));
      check = { journal, found, verdict, checkedAtMs: options.clock.nowMs() };
      return verdict.state === 'quarantined' ? 'quarantined' : 'trusted';
    },
    open: (journal) => {
      if (check?.journal !== journal)
        throw new CodedError('INTERNAL', 'the integrity anchor was not checked before this journal recovered');
      return openIntegrityAnchor(options, check);
    },
  };
}

/** The broker's integrity anchor after the start's check: its state, the agents' refusal, and a person's re-adoption. */
export interface IntegrityAnchor {
  report(): IntegrityAnchorReport;
  quarantined(): boolean;
  /** Throws JOURNAL_QUARANTINED while quarantined: for operator actions that send (retry, reconcile). */
  refuseWhileQuarantined(): void;
  /** The agent's answer while quarantined (undefined: go on). */
  agentRefusal(tool: AgentToolName | 'mcp_tool'): ToolAnswer | undefined;
  /** A person's decision: journal it, sign a new anchor over the journal as it is, serve again. Needs the unlocked vault. */
  readopt(code: AnchorFailureCode, actor: OperatorActor): Promise<IntegrityAnchorReport>;
  /** Resolves once every anchor signed so far was written and recorded, or failed and was logged; never rejects. */
  settled(): Promise<void>;
  /** Stops writing anchors (before the journal closes): a write in flight finishes, one not yet begun is dropped. */
  detach(): void;
}

/** Tools that act (or append on an agent's word); reads of what exists stay answered so agents can explain. */
const refusedTools: ReadonlySet<string> = new Set(['http_request', 'ssh_exec', 'mcp_tool', 'request_credential']);

/** What the anchor's closures share: the start's findings and this run's decisions. */
interface AnchorRun {
  readonly file: string;
  readonly journal: Journal;
  readonly clock: Clock;
  /** The anchor file as the start read it. */
  readonly found: AnchorFile | undefined;
  readonly checkedAtMs: number;
  verdict: AnchorVerdict;
  readopted: IntegrityAnchorReport['readopted'];
  readopting: boolean;
  readonly writer: AnchorWriter;
}

/**
 * Serves the start's verdict (made before recovery, integrityAnchorGate; the caller opens it before anything serves
 * agents or unlocks the vault), then writes a new anchor at every checkpoint — unless quarantined: an anchor written
 * then would silently adopt the history it disagreed with.
 */
function openIntegrityAnchor(options: IntegrityAnchorGateOptions, check: AnchorCheck): IntegrityAnchor {
  const { clock, logger } = options;
  const { journal, found } = check;
  const file = anchorFileOf(options.dataDir, options.env);
  const dataDirId = dataDirIdOf(options.dataDir);
  const run: AnchorRun = {
    file,
    journal,
    clock,
    found,
    checkedAtMs: check.checkedAtMs,
    verdict: check.verdict,
    readopted: null,
    readopting: false,
    writer: new AnchorWriter(file, journal, logger),
  };
  // The file's counter as the start read it (ours only): signAnchor never reads the file again.
  const startCounter = found !== undefined && found.data_dir === dataDirId ? found.counter : 0;
  if (run.verdict.state === 'quarantined')
    logger?.error({ code: run.verdict.code, anchor: file }, `journal quarantined: ${run.verdict.detail}`);
  else if (found !== undefined) adoptLandedAnchor(journal, found);

  journal.onCheckpoint({
    signed: (head) => {
      if (run.verdict.state === 'quarantined') return;
      try {
        run.writer.enqueue(signAnchor(dataDirId, head, journal, Math.max(startCounter, run.writer.counterInFlight())));
      } catch (error) {
        logger?.error(
          { code: (error as { code?: unknown }).code, anchor: file },
          'the integrity anchor was not signed',
        );
      }
    },
    settled: () => run.writer.settled(),
  });

  return {
    report: () => anchorReport(run),
    quarantined: () => run.verdict.state === 'quarantined',
    refuseWhileQuarantined: () => {
      if (run.verdict.state !== 'quarantined') return;
      throw new CodedError(
        'JOURNAL_QUARANTINED',
        `the journal is quarantined (${run.verdict.code}): nothing is sent until a person re-adopts it`,
        { field: 'action_id' },
      );
    },
    agentRefusal: (tool) =>
      run.verdict.state === 'quarantined' && refusedTools.has(tool) ? quarantinedAnswer() : undefined,
    readopt: async (code, actor) => {
      if (run.readopting)
        throw new CodedError('INVALID_ARGUMENT', 'a re-adoption is already being recorded', { field: 'code' });
      run.readopting = true;
      try {
        await readoptJournal(run, code, actor);
      } finally {
        run.readopting = false;
      }
      return anchorReport(run);
    },
    settled: () => run.writer.settled(),
    detach: () => {
      journal.onCheckpoint(undefined);
      run.writer.stop();
    },
  };
}

/**
 * Crash window (b) at the last run's end: the file landed, the journal's record of it did not. judgeAnchor accepted
 * the file (signed, its head in this journal, one counter past the record), so it is recorded now: otherwise the next
 * anchor (one past the file) could land two past the record, which a second crash in the same window would leave to
 * the next start as ANCHOR_ROLLBACK. The record is synced before that next anchor is written (AnchorWriter).
 */
function adoptLandedAnchor(journal: Journal, found: AnchorFile): void {
  const recorded = journal.anchorState().recorded;
  if (recorded !== undefined && found.counter <= recorded.counter) return;
  const { counter, head_seq, key_id, written_at_ms } = found;
  journal.recordAnchor({ counter, head_seq, key_id, written_at_ms });
}

/** integrity.anchor: the verdict of the start (or of a re-adoption), the anchor file as it is now, the journal now. */
function anchorReport(run: AnchorRun): IntegrityAnchorReport {
  const now = { ...run.journal.anchorState(), ...run.journal.stats() };
  const reread = readAnchorFile(run.file);
  const anchor = reread.kind === 'read' ? reread.anchor : run.found;
  return {
    state: run.verdict.state,
    code: run.verdict.state === 'quarantined' ? run.verdict.code : null,
    detail: run.verdict.detail,
    anchor_file: run.file,
    found:
      anchor === undefined
        ? null
        : {
            counter: anchor.counter,
            head_seq: anchor.head_seq,
            head_hash: anchor.head_hash,
            key_id: anchor.key_id,
            written_at_ms: anchor.written_at_ms,
          },
    journal: {
      events: now.events,
      last_seq: now.last_seq,
      recorded_counter: now.recorded?.counter ?? null,
      key_id: now.sign_public === undefined ? null : keyIdOf(now.sign_public),
    },
    checked_at_ms: run.checkedAtMs,
    readopted: run.readopted,
  };
}

/**
 * A person adopts the journal as it is: refused unless a person, quarantined with the code they saw, and able to sign
 * (else nothing is journaled: a re-adoption whose anchor cannot be signed would not survive a restart). The decision
 * is journaled first, then a checkpoint over the head with it writes the next anchor.
 */
async function readoptJournal(run: AnchorRun, code: AnchorFailureCode, actor: OperatorActor): Promise<void> {
  const { journal, verdict } = run;
  if (actor.kind !== 'person')
    throw new CodedError('OPERATOR_PROOF_REQUIRED', "re-adopting the journal is a person's decision", {
      field: 'code',
    });
  if (verdict.state !== 'quarantined' || verdict.code !== code)
    throw new CodedError('INVALID_ARGUMENT', `the broker is not quarantined with ${code} (it is ${verdict.state})`, {
      field: 'code',
    });
  const unsigned = (): CodedError =>
    new CodedError('VAULT_LOCKED', 'a new anchor needs the audit signing key: unlock the vault, then re-adopt');
  if (!journal.canSignCheckpoint()) throw unsigned();
  await journal.appendConfig({
    kind: 'INTEGRITY_READOPTED',
    action_id: integritySubjectId,
    payload: {
      code,
      anchor_counter: run.found?.counter ?? null,
      anchor_head_seq: run.found?.head_seq ?? null,
      journal_last_seq: journal.stats().last_seq,
      actor,
    },
  });
  // Out of quarantine first: the checkpoint's anchor writer skips while quarantined.
  run.verdict = { state: 'ok', detail: `re-adopted by a person after ${code}` };
  if (!journal.checkpointNow('readopt')) {
    run.verdict = verdict;
    throw unsigned();
  }
  // The report reads the file back: the new anchor is on disk (or its failure logged) before the person is answered.
  await run.writer.settled();
  run.readopted = { by: actor.id, at_ms: run.clock.nowMs(), code };
}

/** An anchor signed inside a checkpoint's transaction, to be written after it. */
interface SignedAnchor {
  readonly text: string;
  readonly record: AnchorRecord;
}

/**
 * Inside the checkpoint's transaction, where the signing key is in memory: signs the next anchor and writes nothing.
 * Its counter is one past the file's counter as the start read it, the journal's record, and the write in flight
 * (`floor`), so counters only grow and a re-adoption after a rollback still moves forward. One past, never two: the
 * journal's record trails the file by at most one (judgeAnchor allows exactly that, crash window (b)).
 */
function signAnchor(dataDirId: string, head: SignedHead, journal: Journal, floor: number): SignedAnchor {
  const facts = journal.anchorState();
  if (facts.box_public === undefined) throw new Error('a checkpoint was signed without an audit key ring');
  const body: AnchorBody = {
    version: 1,
    data_dir: dataDirId,
    counter: Math.max(floor, facts.recorded?.counter ?? 0) + 1,
    head_seq: head.size,
    head_hash: Buffer.from(head.root).toString('hex'),
    state_digest: stateDigestOf(head.signPublic, facts.box_public),
    key_id: keyIdOf(head.signPublic),
    written_at_ms: head.at_ms,
  };
  const signature = Buffer.from(head.sign(anchorMessage(body))).toString('base64');
  return {
    text: `${JSON.stringify({ ...body, signature }, null, 2)}\n`,
    record: { counter: body.counter, head_seq: body.head_seq, key_id: body.key_id, written_at_ms: body.written_at_ms },
  };
}

/**
 * Writes signed anchors one at a time, off the event loop, each only after the journal's WAL sync that began after its
 * checkpoint committed; then the journal records it. The order is what makes every crash window safe (docs/audit.md):
 * (a) checkpoint durable, file not written: the anchor is behind the journal, which judgeAnchor accepts;
 * (b) file written, record not: the file is one counter past the record and its head is durable in the journal, which
 *     judgeAnchor accepts and the next start records (adoptLandedAnchor);
 * never the reverse (an anchor naming a head the journal lost, or a record ahead of the file): each would quarantine.
 * The sync also covers the previous anchor's record, so the record on disk trails the file by one at most.
 * Only the newest waiting anchor is written after the one in flight: an older one never replaces a newer one.
 */
class AnchorWriter {
  private newest: SignedAnchor | undefined;
  private inFlight: SignedAnchor | undefined;
  private drain: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly file: string,
    private readonly journal: Journal,
    private readonly logger: Logger | undefined,
  ) {}

  /** The counter of the anchor being written (0: none): the next one is signed past it. */
  counterInFlight(): number {
    return this.inFlight?.record.counter ?? 0;
  }

  enqueue(anchor: SignedAnchor): void {
    if (this.stopped) return;
    this.newest = anchor;
    if (this.inFlight === undefined) this.drain = this.run();
  }

  settled(): Promise<void> {
    return this.drain;
  }

  stop(): void {
    this.stopped = true;
    this.newest = undefined;
  }

  private async run(): Promise<void> {
    for (let anchor = this.newest; anchor !== undefined && !this.stopped; anchor = this.newest) {
      this.newest = undefined;
      this.inFlight = anchor;
      try {
        await this.journal.synced();
        // A journal closed or failed meanwhile gets no file it could not record; a closing one records its shutdown's.
        const state = this.journal.stats().state;
        if (state !== 'open' && state !== 'closing') return;
        await writeAnchorFile(this.file, anchor.text);
        this.journal.recordAnchor(anchor.record);
      } catch (error) {
        // The file is the old one or this one; the record is the old one. The anchor waiting was signed one past this
        // one and could land two past the record: dropped. The next checkpoint signs again, one past the record.
        this.newest = undefined;
        this.logger?.error(
          { code: (error as { code?: unknown }).code, anchor: this.file },
          'the integrity anchor could not be written',
        );
      } finally {
        this.inFlight = undefined;
      }
    }
  }
}

/**
 * Either the old file or the new one, whole, with no synchronous call on the loop: a 0600 temp file beside it, its
 * fsync, the rename, then the directory's fsync so the rename itself survives a crash (each on libuv's thread pool).
 * The old file is not read or opened: whatever sits at its path (a FIFO, a link) is renamed over.
 */
export async function writeAnchorFile(file: string, text: string): Promise<void> {
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const temp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(text, 'utf8');
    await handle.sync();
    await handle.close();
    await rename(temp, file);
  } catch (error) {
    await handle.close().catch(() => undefined);
    await rm(temp, { force: true });
    throw error;
  }
  const dirHandle = await open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
}

function quarantinedAnswer(): ToolAnswer {
  const message =
    'the journal disagrees with its signed integrity anchor (rolled back, forged or missing history); nothing is sent until a person re-adopts it';
  const structured: AgentRefusal = {
    invocation_id: null,
    error: { code: 'JOURNAL_QUARANTINED', phase: 'validation', outcome: 'not_attempted', retry: 'never', message },
  };
  return { isError: true, structured, text: `JOURNAL_QUARANTINED: ${message}` };
}
