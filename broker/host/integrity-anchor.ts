import { createHash, createPublicKey, verify } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import {
  agentToolReplySchema,
  CodedError,
  integritySubjectId,
  type AgentToolName,
  type AnchorFailureCode,
  type IntegrityAnchorReport,
} from '../contract/index.js';
import type { AnchorFacts, AnchorRecord, Journal, SignedHead } from '../journal/index.js';
import type { Clock, OperatorActor, ToolAnswer } from '../ports/index.js';
import { writeAtomically } from './write-atomically.js';

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
 * opened. A missing anchor is first use only while the journal never recorded writing one (a journal from before
 * anchors, or never unlocked): once it has, a missing anchor is a deletion or a moved data directory, and quarantines.
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

export interface IntegrityAnchorOptions {
  readonly dataDir: string;
  readonly journal: Journal;
  readonly clock: Clock;
  readonly logger?: Logger;
  readonly env?: NodeJS.ProcessEnv;
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
  /** Stops writing anchors (before the journal closes). */
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
}

/**
 * Checks the anchor against the journal now (the caller runs it after the journal opened and before anything serves
 * agents or unlocks the vault), then writes a new anchor at every checkpoint — unless quarantined: an anchor written
 * then would silently adopt the history it disagreed with.
 */
export function openIntegrityAnchor(options: IntegrityAnchorOptions): IntegrityAnchor {
  const { journal, clock, logger } = options;
  const file = anchorFileOf(options.dataDir, options.env);
  const dataDirId = dataDirIdOf(options.dataDir);
  const read = readAnchorFile(file);
  const found = read.kind === 'read' ? read.anchor : undefined;
  const run: AnchorRun = {
    file,
    journal,
    clock,
    found,
    checkedAtMs: clock.nowMs(),
    verdict: judgeAnchor(read, dataDirId, journal.anchorFacts(found?.head_seq ?? 0)),
    readopted: null,
    readopting: false,
  };
  // The file's counter as the start read it (ours only): writeAnchor never reads the file again.
  const startCounter = found !== undefined && found.data_dir === dataDirId ? found.counter : 0;
  if (run.verdict.state === 'quarantined')
    logger?.error({ code: run.verdict.code, anchor: file }, `journal quarantined: ${run.verdict.detail}`);

  journal.onCheckpoint((head) => {
    if (run.verdict.state === 'quarantined') return undefined;
    try {
      return writeAnchor(file, dataDirId, head, journal, startCounter);
    } catch (error) {
      // The old anchor stays, consistent with the journal's record; the next checkpoint tries again.
      logger?.error(
        { code: (error as { code?: unknown }).code, anchor: file },
        'the integrity anchor could not be written',
      );
      return undefined;
    }
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
    detach: () => journal.onCheckpoint(undefined),
  };
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
  run.readopted = { by: actor.id, at_ms: run.clock.nowMs(), code };
}

/**
 * Inside the checkpoint's transaction: the next counter is past both the file's counter as the start read it and the
 * journal's record (so a re-adoption after a rollback still moves forward), the file is replaced atomically, and only
 * then is it recorded. The old file is not read here: whatever now sits at its path (a FIFO, a link) is renamed over.
 */
function writeAnchor(
  file: string,
  dataDirId: string,
  head: SignedHead,
  journal: Journal,
  startCounter: number,
): AnchorRecord {
  const facts = journal.anchorState();
  if (facts.box_public === undefined) throw new Error('a checkpoint was signed without an audit key ring');
  const body: AnchorBody = {
    version: 1,
    data_dir: dataDirId,
    counter: Math.max(startCounter, facts.recorded?.counter ?? 0) + 1,
    head_seq: head.size,
    head_hash: Buffer.from(head.root).toString('hex'),
    state_digest: stateDigestOf(head.signPublic, facts.box_public),
    key_id: keyIdOf(head.signPublic),
    written_at_ms: head.at_ms,
  };
  const signature = Buffer.from(head.sign(anchorMessage(body))).toString('base64');
  writeAtomically(file, `${JSON.stringify({ ...body, signature }, null, 2)}\n`);
  return { counter: body.counter, head_seq: body.head_seq, key_id: body.key_id, written_at_ms: body.written_at_ms };
}

function quarantinedAnswer(): ToolAnswer {
  const message =
    'the journal disagrees with its signed integrity anchor (rolled back, forged or missing history); nothing is sent until a person re-adopts it';
  const structured = agentToolReplySchema.parse({
    invocation_id: null,
    error: { code: 'JOURNAL_QUARANTINED', phase: 'validation', outcome: 'not_attempted', retry: 'never', message },
  });
  return { isError: true, structured, text: `JOURNAL_QUARANTINED: ${message}` };
}
