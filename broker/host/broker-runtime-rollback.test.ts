import { copyFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { journalFileName } from '../journal/index.js';
import type { OperatorActor } from '../ports/index.js';
import { systemClock } from '../ports/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault } from '../vault/index.js';
import { createBrokerRuntime, type BrokerRuntime } from './broker-runtime.js';
import { sealConfigAtVaultCreation } from './config-integrity.js';

let dirs: TempDir[] = [];
afterEach(() => {
  for (const dir of dirs) dir.remove();
  dirs = [];
});

const options = { mode: 'headless' as const, version: '0.0.0-test', startedAtMs: 1 };
const passphrase = 'rollback recovery passphrase';
const person: OperatorActor = { kind: 'person', id: 'ann', surface: 'cli', auth: 'vault_passphrase_tty' };
const id = 'act_rollback_00001';
const script = actionPaths.httpApproved(id);
/** Accepted, validated, card shown, approved, credential authorized: the next event would be DISPATCH_STARTED. */
const beforeDispatch = script.findIndex((e) => e.kind === 'DISPATCH_STARTED');

function tempDir(prefix: string): string {
  const dir = createTempDir(prefix);
  dirs.push(dir);
  return dir.path;
}

async function initializedDir(): Promise<string> {
  const dataDir = tempDir('prrb-');
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min' });
  await vault.init(Buffer.from(passphrase));
  // As `postern vault init` does: no postern.yaml yet, so the empty configuration is the first-use one.
  sealConfigAtVaultCreation({ dataDir, vault, clock: systemClock });
  await vault.close();
  return dataDir;
}

/** Unlocked, so checkpoints are signed and each one writes the integrity anchor (at the latest, at close). */
function unlocked(dataDir: string): Promise<BrokerRuntime> {
  return createBrokerRuntime({ dataDir, ...options, vaultPassphrase: Buffer.from(passphrase) });
}

/** A consistent copy of the running broker's journal, as a backup tool would take it (SQLite's online backup). */
async function backupJournal(dataDir: string): Promise<string> {
  const copy = path.join(tempDir('prrb-copy-'), journalFileName);
  const reader = new Database(path.join(dataDir, journalFileName), { readonly: true, fileMustExist: true });
  try {
    await reader.backup(copy);
  } finally {
    reader.close();
  }
  return copy;
}

/** The copy put back over the journal; the newer WAL goes with the file it belonged to. */
function restoreJournal(dataDir: string, copy: string): void {
  const file = path.join(dataDir, journalFileName);
  for (const suffix of ['-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
  copyFileSync(copy, file);
}

describe('when the journal is restored to a copy taken before an action it holds open was dispatched', () => {
  it('the start is quarantined, and recovery records the action unknown — never not_attempted — even after re-adoption', async () => {
    const dataDir = await initializedDir();
    const first = await unlocked(dataDir);
    for (const event of script.slice(0, beforeDispatch)) await first.journal.append(event);
    const copy = await backupJournal(dataDir);
    // The action goes on: dispatched, committed, delivered. The shutdown checkpoint anchors that history.
    for (const event of script.slice(beforeDispatch)) await first.journal.append(event);
    expect(first.journal.getAction(id)).toMatchObject({ outcome: 'committed', effect: 'succeeded' });
    await first.close();

    restoreJournal(dataDir, copy);
    // Vault locked: judging the anchor and recovering need no key.
    const second = await createBrokerRuntime({ dataDir, ...options });
    expect(second.vault.state()).toBe('locked');
    expect(await second.broker['integrity.anchor']({}, person)).toMatchObject({
      state: 'quarantined',
      code: 'ANCHOR_ROLLBACK',
    });
    // The copy's events (the first-use configuration's CONFIG_APPLIED, the script before dispatch) and the recovery's.
    expect(second.status().journal).toMatchObject({ recovered_at_open: 1, events: 1 + beforeDispatch + 1 });
    const recovered = second.journal.getAction(id);
    expect(recovered?.outcome).not.toBe('not_attempted');
    expect(recovered).toMatchObject({
      dispatch_seq: null,
      outcome: 'unknown',
      effect: 'unknown_effect',
      code: 'BROKER_RESTARTED',
      outcome_basis: 'broker_restart_journal_quarantined',
      source: 'local_gate',
      retry: 'reconcile',
    });
    await second.close();

    // The person who re-adopts inherits that claim, not "provably never sent"; later starts leave it as it is.
    const third = await unlocked(dataDir);
    await third.broker['integrity.readopt']({ code: 'ANCHOR_ROLLBACK' }, person);
    await third.close();
    const fourth = await createBrokerRuntime({ dataDir, ...options });
    expect(await fourth.broker['integrity.anchor']({}, person)).toMatchObject({ state: 'ok' });
    expect(fourth.status().journal).toMatchObject({ recovered_at_open: 0 });
    expect(fourth.journal.getAction(id)).toMatchObject({
      outcome: 'unknown',
      outcome_basis: 'broker_restart_journal_quarantined',
    });
    // A reconciliation is asked like for any unknown: this route is not configured here, so there is no lookup to ask.
    await expect(fourth.broker['actions.reconcile']({ action_id: id }, person)).rejects.toMatchObject({
      code: 'UNSUPPORTED_ACTION',
      field: 'lookup',
    });
    await fourth.close();
  });
});

describe("when a person settles actions a quarantined journal's recovery left unknown before dispatch", () => {
  const attested = 'act_rollback_00002';
  const abandoned = 'act_rollback_00003';

  it('attest and abandon work as for any unknown, journaled with the person, and survive the next start', async () => {
    const dataDir = await initializedDir();
    const first = await unlocked(dataDir);
    for (const a of [attested, abandoned])
      for (const event of actionPaths.httpApproved(a).slice(0, beforeDispatch)) await first.journal.append(event);
    const copy = await backupJournal(dataDir);
    for (const a of [attested, abandoned])
      for (const event of actionPaths.httpApproved(a).slice(beforeDispatch)) await first.journal.append(event);
    await first.close();

    restoreJournal(dataDir, copy);
    const second = await createBrokerRuntime({ dataDir, ...options });
    expect(await second.broker['integrity.anchor']({}, person)).toMatchObject({ state: 'quarantined' });
    for (const a of [attested, abandoned])
      expect(second.journal.getAction(a)).toMatchObject({
        dispatch_seq: null,
        outcome: 'unknown',
        outcome_basis: 'broker_restart_journal_quarantined',
      });

    // Neither sends anything, so neither waits for re-adoption (only retry and reconcile may send).
    const ticketOf = (a: string): number => second.journal.getAction(a)?.ticket ?? 0;
    const attest = await second.broker['actions.attest'](
      { action_id: attested, outcome: 'committed', effect: 'succeeded', basis: 'the document shows the change' },
      person,
    );
    expect(attest).toMatchObject({ action_id: attested, decision: 'attested committed' });
    const abandon = await second.broker['approvals.abandon'](
      { ticket: ticketOf(abandoned), reason: 'cannot tell whether it was sent; giving up' },
      person,
    );
    expect(abandon).toMatchObject({ action_id: abandoned, decision: 'abandoned' });

    expect(second.journal.getAction(attested)).toMatchObject({
      dispatch_seq: null,
      outcome: 'committed',
      effect: 'succeeded',
      outcome_basis: 'operator_attested',
      source: 'operator_attested',
      retry: 'never',
    });
    expect(second.journal.getAction(abandoned)).toMatchObject({ outcome: 'unknown', abandoned: true });
    // Settled once: a second attestation or abandonment is a conflict naming the state.
    await expect(
      second.broker['actions.attest'](
        { action_id: attested, outcome: 'rejected', effect: 'no_effect', basis: 'changed my mind' },
        person,
      ),
    ).rejects.toMatchObject({ code: 'DECISION_CONFLICT', message: expect.stringContaining('already settled') });
    await expect(
      second.broker['approvals.abandon']({ ticket: ticketOf(abandoned), reason: 'again' }, person),
    ).rejects.toMatchObject({ code: 'DECISION_CONFLICT', message: expect.stringContaining('already abandoned') });
    await second.close();

    // The decisions are in the journal, not in memory: the next start folds them the same, each event naming the person.
    const third = await unlocked(dataDir);
    expect(third.journal.getAction(attested)).toMatchObject({ outcome: 'committed', source: 'operator_attested' });
    expect(third.journal.getAction(abandoned)).toMatchObject({ outcome: 'unknown', abandoned: true });
    const shown = await third.broker['actions.show']({ action_id: attested }, person);
    expect(shown.events.at(-1)).toMatchObject({ kind: 'OPERATOR_ATTESTED', summary: expect.stringContaining('ann') });
    const gaveUp = await third.broker['actions.show']({ action_id: abandoned }, person);
    expect(gaveUp.events.at(-1)).toMatchObject({ kind: 'ABANDONED', summary: expect.stringContaining('ann') });
    await third.close();
  });
});

describe('when the broker stops with an admitted action not yet dispatched, and its anchor agrees', () => {
  it('recovery records it not_attempted before dispatch, as after any crash', async () => {
    const dataDir = await initializedDir();
    const first = await unlocked(dataDir);
    for (const event of script.slice(0, beforeDispatch)) await first.journal.append(event);
    await first.close();

    const second = await createBrokerRuntime({ dataDir, ...options });
    expect(await second.broker['integrity.anchor']({}, person)).toMatchObject({ state: 'ok', code: null });
    expect(second.status().journal).toMatchObject({ recovered_at_open: 1 });
    expect(second.journal.getAction(id)).toMatchObject({
      outcome: 'not_attempted',
      effect: 'no_effect',
      code: 'BROKER_RESTARTED',
      outcome_basis: 'broker_restart_before_dispatch',
      source: 'local_gate',
    });
    await second.close();
  });
});
