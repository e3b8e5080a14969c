import { CodedError, type Classification, type JournalEvent } from '../contract/index.js';
import {
  appendLeaf,
  auditHeaderText,
  checkpointDomain,
  decodeFrontier,
  encodeAssociatedData,
  encodeCheckpointMessage,
  encodeFrontier,
  encodeLeaf,
  eventOutcomeHeader,
  frontierRoot,
  leafHash,
  type MerkleFrontier,
} from '../core/index.js';
import type { Clock, CredentialVault } from '../ports/index.js';
import {
  decryptPayload,
  encryptPayload,
  newAuditKeyPairs,
  newRunKey,
  NoncePool,
  openRunKey,
  sealRunKey,
  sha256,
  signDetached,
  wipe,
} from './event-cipher.js';
import type { AuditStore, EventRow } from './journal-store.js';
import type { AuditOp, WriteAck } from './journal-writer.js';

/** What the journal needs of the vault: wrapping its audit secrets, and knowing when it locks. */
export type AuditVault = Pick<CredentialVault, 'state' | 'wrap' | 'unwrap' | 'onLock' | 'onUnlock'>;

/** Vault purposes (associated data) under which the audit secrets are wrapped. */
export const auditDecryptPurpose = 'audit_decrypt';
export const auditSignPurpose = 'audit_sign';
/** A checkpoint at least this often (events), besides lock and shutdown. */
export const checkpointEveryEventsDefault = 1_000;
/** A decrypted event body larger than this is refused as hostile before JSON.parse. */
const eventBodyBytesMax = 256 * 1024;

export type CheckpointReason = 'interval' | 'lock' | 'unlock' | 'shutdown' | 'export' | 'readopt';

/**
 * A tree head just signed, inside the checkpoint's transaction, with the signing key still in memory: the integrity
 * anchor (broker/host/integrity-anchor.ts) signs its own file with it there and writes it after the sync that covers
 * the head. `sign` is valid only during the call.
 */
export interface SignedHead {
  readonly size: number;
  readonly root: Uint8Array;
  readonly at_ms: number;
  readonly signPublic: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

export interface SealedEvent {
  readonly row: EventRow;
  readonly leaf: Uint8Array;
}

const domain = Buffer.from(checkpointDomain, 'utf8');

/**
 * AUDIT_KEY_UNAVAILABLE for what a run that never had a key sealed (AuditWriter.keyLost): no unlock opens it, locked or
 * not. The code is the one every sealed read gives (readers that show a sealed row's header catch it by code); the
 * class tells an answer that it is for good (sealedForGood), where the same code from a locked vault is not.
 */
export class RunKeyLostError extends CodedError {
  constructor(
    readonly run: number,
    what: 'events' | 'rows',
  ) {
    const sealed = what === 'events' ? 'its events are' : 'what it sealed is';
    const them = what === 'events' ? 'them' : 'it';
    super(
      'AUDIT_KEY_UNAVAILABLE',
      `run ${run} ended before any audit key existed: ${sealed} sealed in the journal for good, and no unlock opens ${them}`,
    );
  }
}

/**
 * Run 0 is the plaintext of events written before encryption existed (migration 004), all before the first sealed
 * event. A run-0 row anywhere else is one another process inserted — the events table refuses updates and deletes, not
 * inserts — and its plaintext body would be read as the broker's own record (a process allowlist entry, an admission's
 * credential and key): refused as a row that fails authentication is.
 */
export function refusePlaintextOutsidePrefix(seq: number, plaintextThrough: number): void {
  if (seq >= 1 && seq <= plaintextThrough) return;
  throw new CodedError(
    'INTERNAL',
    `event ${seq} is unsealed (run 0) outside the journal's plaintext prefix (events 1–${plaintextThrough}), so it failed authentication; run \`postern audit verify\``,
  );
}

/** Whether a refusal is about something sealed for good (RunKeyLostError): no unlock, no retry changes it. */
export function sealedForGood(error: unknown): boolean {
  return error instanceof RunKeyLostError;
}

/** What the AuditWriter reads of the audit tables, and the one row it writes itself: its run's start, at open. */
export type AuditReads = Pick<
  AuditStore,
  | 'countEvents'
  | 'readTree'
  | 'readKeys'
  | 'insertRun'
  | 'readRunSealedKey'
  | 'lastCheckpointSize'
  | 'plaintextPrefixEnd'
>;

/** A row another store of the journal file keeps sealed under a run's key (results at rest). */
export interface SealedRow {
  /** audit_runs.run whose key sealed it. */
  readonly run: number;
  readonly nonce: Uint8Array;
  readonly ciphertext: Uint8Array;
}

/**
 * The journal's key as the other stores of its file use it: seal under this run's key, open under
 * the key of the run that sealed (this run's from memory, an earlier run's only through the
 * unlocked vault). `ad` names the row, so a ciphertext moved to another row fails to open.
 */
export interface RowCipher {
  seal(ad: Uint8Array, plaintext: Uint8Array): SealedRow;
  /**
   * VAULT_LOCKED: an earlier run's key needs the unlocked vault; AUDIT_KEY_UNAVAILABLE (a RunKeyLostError): that run
   * never had a sealed key; INTERNAL: tampered.
   */
  open(row: SealedRow, ad: Uint8Array): Uint8Array;
}

/**
 * The journal's audit side: seals each event under this run's key and hashes it into the Merkle
 * tree (through the JournalWriter's RunSealer, built from sealerStart), and signs committed tree heads, the head moved
 * by each commit's WriteAck. Write-blind: sealing needs only the audit public key, so the broker
 * appends while the vault is locked; signing needs the Ed25519 secret, which exists in memory only
 * while the vault is unlocked, so a checkpoint that falls due while locked is signed at the next
 * unlock. Reading this run's events needs only the run key in memory; reading earlier runs needs
 * the X25519 secret, i.e. the unlocked vault.
 */
export class AuditWriter {
  /** The committed tree head: what checkpoints sign. Moved by each commit's ack; decoded only to sign. */
  private committed: TreeHead;
  /** plaintextPrefixEnd as the journal opened: a run-0 row is opened as plaintext only at seq 1 to this. */
  private readonly plaintextThrough: number;
  private readonly run: number;
  private readonly runKey: Uint8Array;
  private runKeySealed: boolean;
  private readonly nonces = new NoncePool();
  private readonly runKeys = new Map<number, Uint8Array>();
  private boxPublic: Uint8Array | undefined;
  private boxSecret: Uint8Array | undefined;
  private signSecret: Uint8Array | undefined;
  /**
   * The signing key's public half, from the first unlock on (kept here, not read back: with a writer thread the keys
   * row of the very first unlock is written after the checkpoint that needs it is signed).
   */
  private signPublic: Uint8Array | undefined;
  private lastCheckpointSize: number;
  private checkpointSink: ((head: SignedHead) => void) | undefined;

  constructor(
    private readonly store: AuditReads,
    private readonly clock: Clock,
    private readonly checkpointEveryEvents: number,
    /**
     * Writes an audit row outside a commit (the JournalWriter's write, inside the journal's transaction): the rows as
     * data, signed, sealed or wrapped here first. Only the run's start row is written directly, at open.
     */
    private readonly writeRows: (op: AuditOp) => void,
  ) {
    this.plaintextThrough = store.plaintextPrefixEnd();
    const tree = store.readTree();
    const frontier = tree === undefined ? undefined : decodeFrontier(tree.size, tree.frontier);
    if (tree === undefined || frontier === undefined)
      throw new CodedError(
        'JOURNAL_UNAVAILABLE',
        'the audit tree state is missing or damaged; run `postern audit verify`',
      );
    if (frontier.size !== store.countEvents()) {
      throw new CodedError(
        'JOURNAL_UNAVAILABLE',
        `the audit tree covers ${frontier.size} events but the log holds ${store.countEvents()}; run \`postern audit verify\``,
      );
    }
    this.committed = { size: tree.size, frontier: tree.frontier };
    this.lastCheckpointSize = store.lastCheckpointSize();
    this.boxPublic = store.readKeys()?.box_public;
    this.runKey = newRunKey();
    this.runKeySealed = this.boxPublic !== undefined;
    this.run = store.insertRun(
      clock.nowMs(),
      this.boxPublic === undefined ? null : sealRunKey(this.runKey, this.boxPublic),
    );
    this.runKeys.set(this.run, this.runKey);
  }

  /**
   * What the writer's RunSealer is built from (plain data: a writer thread's start data): this run, its key and the
   * committed tree. Inline, the sealer holds these very bytes (no copy).
   */
  sealerStart(): RunSealerStart {
    return { run: this.run, runKey: this.runKey, tree: this.committed };
  }

  /** After COMMIT: the tree head the writer answered for the batch (WriteAck.frontier) is the committed one. */
  commitSucceeded(ack: WriteAck): void {
    this.committed = { size: ack.treeSize, frontier: ack.frontier };
  }

  /**
   * The committed tree head, which the writer's sealer goes back to after a ROLLBACK or a failed commit
   * (JournalWriter.abandoned).
   */
  committedHead(): TreeHead {
    return this.committed;
  }

  /**
   * The event as appended, or AUDIT_KEY_UNAVAILABLE when its run's key cannot be had now: a RunKeyLostError when it
   * never can (that run never had a key), asked before whether the vault is locked.
   */
  openRow(row: EventRow): JournalEvent {
    if (row.run === 0) {
      refusePlaintextOutsidePrefix(row.seq, this.plaintextThrough);
      return eventOfBody(row, row.ciphertext);
    }
    return eventOfBody(row, this.decrypt(row));
  }

  /**
   * Whether what `run` sealed can never be opened, whatever the vault does: an earlier run (not this one, not the
   * plaintext run 0) with no sealed key. A run's key is sealed to the audit key at its start, or at its own first unlock
   * (`unlocked`); one that ended before either kept its key only in its process's memory, and a later unlock seals only
   * its own run's key.
   */
  keyLost(run: number): boolean {
    return run !== 0 && !this.runKeys.has(run) && this.store.readRunSealedKey(run) === undefined;
  }

  /**
   * RowCipher.seal: the same AEAD and nonces as events, under this run's key. The nonce is copied out of the pool: a
   * sealed row crosses to the writer thread, and postMessage's structured clone copies a view's whole ArrayBuffer (the
   * pool's 6 KiB for 24 bytes, once per batch that holds a result).
   */
  sealRow(ad: Uint8Array, plaintext: Uint8Array): SealedRow {
    const nonce = new Uint8Array(this.nonces.next());
    return { run: this.run, nonce, ciphertext: encryptPayload(this.runKey, nonce, ad, plaintext) };
  }

  /** RowCipher.open. The codes tell a caller whether unlocking would help (VAULT_LOCKED) or nothing will. */
  openSealedRow(row: SealedRow, ad: Uint8Array): Uint8Array {
    if (!this.runKeys.has(row.run)) {
      if (this.store.readRunSealedKey(row.run) === undefined) throw new RunKeyLostError(row.run, 'rows');
      if (this.boxSecret === undefined) {
        throw new CodedError(
          'VAULT_LOCKED',
          `this was sealed by broker run ${row.run} (an earlier run); its key needs the unlocked vault`,
        );
      }
    }
    const key = this.keyOfRun(row.run);
    try {
      return decryptPayload(key, row.nonce, ad, row.ciphertext);
    } catch (cause) {
      throw new CodedError(
        'INTERNAL',
        `a row sealed by run ${row.run} failed authentication (changed, or moved from another row)`,
        { cause },
      );
    }
  }

  intervalCheckpointDue(): boolean {
    return this.signSecret !== undefined && this.committed.size - this.lastCheckpointSize >= this.checkpointEveryEvents;
  }

  /** Signs the current tree head if it moved since the last checkpoint and a signing key is here. */
  checkpointIfDue(reason: CheckpointReason): boolean {
    const size = this.committed.size;
    if (this.signSecret === undefined || size === 0 || size <= this.lastCheckpointSize) return false;
    if (reason === 'interval' && size - this.lastCheckpointSize < this.checkpointEveryEvents) return false;
    const root = frontierRoot(sha256, frontierOf(this.committed));
    const atMs = this.clock.nowMs();
    const signature = signDetached(encodeCheckpointMessage(domain, size, root, atMs), this.signSecret);
    this.writeRows({ kind: 'checkpoint', checkpoint: { size, root, at_ms: atMs, reason, signature } });
    this.lastCheckpointSize = size;
    const secret = this.signSecret;
    const signPublic = this.signPublic;
    if (signPublic !== undefined)
      this.checkpointSink?.({ size, root, at_ms: atMs, signPublic, sign: (m) => signDetached(m, secret) });
    return true;
  }

  /** Whether a checkpoint could be signed now (the unlocked vault gave the signing key). */
  canSign(): boolean {
    return this.signSecret !== undefined;
  }

  /** One listener for every checkpoint signed from now on (the integrity anchor); undefined removes it. */
  onCheckpoint(sink: ((head: SignedHead) => void) | undefined): void {
    this.checkpointSink = sink;
  }

  /**
   * At unlock: unwrap the audit secrets (creating the key pairs on the very first unlock), seal
   * this run's key if it waited for a public key, then sign what fell due while locked.
   */
  unlocked(vault: AuditVault): void {
    const stored = this.store.readKeys();
    if (stored === undefined) {
      const keys = newAuditKeyPairs();
      this.writeRows({
        kind: 'auditKeys',
        keys: {
          box_public: keys.boxPublic,
          sign_public: keys.signPublic,
          box_secret_wrapped: vault.wrap(auditDecryptPurpose, keys.boxSecret),
          sign_secret_wrapped: vault.wrap(auditSignPurpose, keys.signSecret),
          created_at_ms: this.clock.nowMs(),
        },
      });
      this.boxPublic = keys.boxPublic;
      this.boxSecret = keys.boxSecret;
      this.signSecret = keys.signSecret;
      this.signPublic = keys.signPublic;
    } else {
      this.boxPublic = stored.box_public;
      this.signPublic = stored.sign_public;
      this.boxSecret = vault.unwrap(auditDecryptPurpose, stored.box_secret_wrapped);
      this.signSecret = vault.unwrap(auditSignPurpose, stored.sign_secret_wrapped);
    }
    if (!this.runKeySealed) {
      this.writeRows({ kind: 'runKeySealed', run: this.run, sealedKey: sealRunKey(this.runKey, this.boxPublic) });
      this.runKeySealed = true;
    }
    this.checkpointIfDue('unlock');
  }

  /** At lock: one last checkpoint while the key is still in memory, then forget the secrets. */
  locked(): void {
    this.checkpointIfDue('lock');
    this.forgetSecrets();
  }

  /** At close: a shutdown checkpoint and the run's end, both best left in the file. */
  closing(reason: string): void {
    this.checkpointIfDue('shutdown');
    this.writeRows({ kind: 'runEnded', run: this.run, atMs: this.clock.nowMs(), reason });
    this.forgetSecrets();
  }

  /** Best effort after a failure: the database may refuse this too (disk full). */
  recordFailure(code: string): void {
    try {
      this.writeRows({ kind: 'runEnded', run: this.run, atMs: this.clock.nowMs(), reason: `failed: ${code}` });
    } catch {
      // The failure is still surfaced (journal state failed) and recovery runs at the next open.
    }
    this.forgetSecrets();
  }

  private forgetSecrets(): void {
    wipe(this.boxSecret);
    wipe(this.signSecret);
    this.boxSecret = undefined;
    this.signSecret = undefined;
    for (const [run, key] of this.runKeys) {
      if (run !== this.run) wipe(key);
    }
    this.runKeys.clear();
    this.runKeys.set(this.run, this.runKey);
  }

  private decrypt(row: EventRow): Uint8Array {
    const key = this.keyOfRun(row.run);
    const header = Buffer.from(auditHeaderText(row), 'utf8');
    try {
      return decryptPayload(key, row.nonce, encodeAssociatedData(row.seq, header), row.ciphertext);
    } catch (cause) {
      throw new CodedError('INTERNAL', `event ${row.seq} failed authentication; run \`postern audit verify\``, {
        cause,
      });
    }
  }

  private keyOfRun(run: number): Uint8Array {
    const known = this.runKeys.get(run);
    if (known !== undefined) return known;
    // A run that never had a key first: that needs no secret (the plaintext sealed_key column), and no unlock changes
    // it — asked after the lock, it would read as "unlock and ask again" to whoever is told.
    const sealed = this.store.readRunSealedKey(run);
    if (sealed === undefined) throw new RunKeyLostError(run, 'events');
    if (this.boxSecret === undefined || this.boxPublic === undefined) {
      throw new CodedError(
        'AUDIT_KEY_UNAVAILABLE',
        `events of run ${run} (an earlier broker run) need the unlocked vault`,
      );
    }
    const key = openRunKey(sealed, this.boxPublic, this.boxSecret);
    this.runKeys.set(run, key);
    return key;
  }
}

/** A row's opened body (bounded before JSON.parse) with its plaintext header: the event as appended. */
export function eventOfBody(row: EventRow, body: Uint8Array): JournalEvent {
  if (body.length > eventBodyBytesMax)
    throw new CodedError('INTERNAL', `event ${row.seq} body exceeds ${eventBodyBytesMax} bytes`);
  const { payload, classification } = JSON.parse(Buffer.from(body).toString('utf8')) as {
    payload: unknown;
    classification?: Classification;
  };
  const event = { ...eventHeaderOf(row), payload };
  const opened = (classification === undefined ? event : { ...event, classification }) as JournalEvent;
  // A header naming an outcome names the one its body sets (RunSealer.seal): the same seal covers both, so only a row
  // made whole elsewhere could differ, and what recovery reads from headers must not.
  const outcome = row.outcome ?? null;
  if (outcome !== null && outcome !== eventOutcomeHeader(opened))
    throw new CodedError('INTERNAL', `event ${row.seq}'s header names another outcome than its body`);
  return opened;
}

/** What an event's ciphertext seals: its payload, and its classification where it carries one (eventOfBody reads it). */
export function sealedBodyOf(event: Pick<JournalEvent, 'payload' | 'classification'>): {
  payload: unknown;
  classification?: Classification;
} {
  return event.classification === undefined
    ? { payload: event.payload }
    : { payload: event.payload, classification: event.classification };
}

/** A row's plaintext header: what every reader may see of an event, its body opened or not. */
export function eventHeaderOf(row: EventRow) {
  return {
    seq: row.seq,
    at_ms: row.at_ms,
    kind: row.kind,
    action_id: row.action_id,
    session_id: row.session_id,
    ticket: row.ticket,
    lane: row.lane,
  };
}

/**
 * A tree head as plain data, as audit_tree stores it: `size` leaves and the frontier's subtree roots concatenated
 * (encodeFrontier). What crosses between the loop and the writer: the ack's, the sealer's start, a rollback's.
 */
export interface TreeHead {
  readonly size: number;
  readonly frontier: Uint8Array;
}

/** A RunSealer's start, plain data: the run, its key (32 bytes) and the committed tree its first event extends. */
export interface RunSealerStart {
  readonly run: number;
  readonly runKey: Uint8Array;
  readonly tree: TreeHead;
}

/** The frontier a TreeHead encodes; INTERNAL when its bytes cannot be one (they come from this process's own writer). */
function frontierOf(head: TreeHead): MerkleFrontier {
  const frontier = decodeFrontier(head.size, head.frontier);
  if (frontier === undefined) throw new CodedError('INTERNAL', `a tree head of ${head.size} leaves is malformed`);
  return frontier;
}

/**
 * Seals one run's events for the audit log: each event's body encrypted under the run key (with nonces of its own pool:
 * 24 random bytes each, so it needs no coordination with the AuditWriter's sealRow under the same key) and its leaf
 * added to the pending Merkle tree, whose frontier writeTree stores in the commit's transaction. Holds no secret but the
 * run key and no state but the pending tree: the part of the audit writer a journal writer thread takes
 * (docs/journal-writer-thread.md), built from plain start data (AuditWriter.sealerStart). The AuditWriter keeps the
 * committed head (from each WriteAck's frontier), the secrets and the signing.
 */
export class RunSealer {
  private pending: MerkleFrontier;
  private readonly nonces = new NoncePool();
  private readonly run: number;
  private readonly runKey: Uint8Array;

  constructor(
    private readonly store: Pick<AuditStore, 'writeTree'>,
    start: RunSealerStart,
  ) {
    this.run = start.run;
    this.runKey = start.runKey;
    this.pending = frontierOf(start.tree);
  }

  /** Encrypts one planned event and adds its leaf to the pending tree (inside the commit). */
  seal(event: JournalEvent): SealedEvent {
    if (event.seq !== this.pending.size + 1) {
      throw new Error(`event seq ${event.seq} does not extend an audit tree of ${this.pending.size} leaves`);
    }
    const { at_ms, action_id, session_id, ticket, lane, kind } = event;
    const outcome = eventOutcomeHeader(event);
    const header = Buffer.from(
      auditHeaderText({ at_ms, action_id, session_id, ticket, lane, kind, run: this.run, outcome }),
      'utf8',
    );
    const body = sealedBodyOf(event);
    const nonce = this.nonces.next();
    const ciphertext = encryptPayload(
      this.runKey,
      nonce,
      encodeAssociatedData(event.seq, header),
      Buffer.from(JSON.stringify(body), 'utf8'),
    );
    const leaf = leafHash(sha256, encodeLeaf(event.seq, header, nonce, ciphertext));
    this.pending = appendLeaf(sha256, this.pending, leaf);
    return {
      row: {
        seq: event.seq,
        at_ms: event.at_ms,
        action_id: event.action_id,
        session_id: event.session_id,
        ticket: event.ticket,
        lane: event.lane,
        kind: event.kind,
        run: this.run,
        outcome,
        nonce,
        ciphertext,
        leaf_hash: leaf,
      },
      leaf,
    };
  }

  /** Inside the commit's transaction, after its events: the tree head moves with them. Answers the head written. */
  writeTree(): TreeHead {
    const frontier = encodeFrontier(this.pending);
    this.store.writeTree(this.pending.size, frontier);
    return { size: this.pending.size, frontier };
  }

  /**
   * Back to `head` (the committed tree), after a commit was rolled back. The pending tree only ever extends the
   * committed one, so at the same size it is that tree: nothing to decode (a commit that wrote no batch).
   */
  reset(head: TreeHead): void {
    if (head.size !== this.pending.size) this.pending = frontierOf(head);
  }
}
