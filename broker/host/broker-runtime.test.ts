import { existsSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { brokerApiSchemas, brokerStatusSchema, type NewEvent } from '../contract/index.js';
import { journalFileName, ResultStore } from '../journal/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { createBrokerRuntime, readDataDirStatus } from './broker-runtime.js';
import { controlSocketFileName } from './control-socket.js';

let dir: TempDir;
afterEach(() => dir.remove());

const options = { mode: 'headless' as const, version: '0.0.0-test', startedAtMs: 1 };

describe('the broker runtime', () => {
  it('when it opens a data directory, status reports the real journal and its actions', async () => {
    dir = createTempDir();
    const runtime = await createBrokerRuntime({ dataDir: dir.path, ...options });
    const script = actionPaths.httpApproved('act_runtime0000001');
    // Stop just after DISPATCH_STARTED: the action is in flight (its row says unknown, but nothing settled it yet).
    const cut = script.findIndex((e) => e.kind === 'DISPATCH_STARTED') + 1;
    for (const event of script.slice(0, cut)) await runtime.journal.append(event);
    const status = brokerStatusSchema.parse(runtime.status());
    expect(status.journal).toMatchObject({ state: 'open', events: cut, last_seq: cut, recovered_at_open: 0 });
    // The daemon's 'on-demand' writer thread: one caller's commits stay on the loop, so none was started.
    expect(status.journal.writer_thread).toEqual({ state: 'inline' });
    expect(status.actions).toEqual({ total: 1, in_flight: 1, unknown: 0 });
    expect(status.vault).toMatchObject({ state: 'uninitialized' });
    await runtime.close();
    expect(runtime.status().journal.state).toBe('closed');
    expect(runtime.status().vault).toMatchObject({ state: 'locked' });
  });

  it("the operator's status and metrics read the journal through readCurrent (never draining the writer on the loop)", async () => {
    dir = createTempDir();
    const runtime = await createBrokerRuntime({ dataDir: dir.path, ...options });
    const actor = { kind: 'person', id: 'ann', surface: 'cli', auth: 'vault_passphrase_tty' } as const;
    try {
      await runtime.journal.appendBatch(actionPaths.httpNoApproval('act_runtime0000009'));
      const readCurrent = vi.spyOn(runtime.journal, 'readCurrent');
      const status = brokerStatusSchema.parse(await runtime.broker.status({}, actor));
      expect(status.actions).toEqual(runtime.status().actions);
      expect(status.actions.total).toBe(1);
      const metrics = brokerApiSchemas.metrics.output.parse(await runtime.broker.metrics({}, actor));
      expect(metrics.total).toBe(1);
      expect(readCurrent).toHaveBeenCalledTimes(2);
    } finally {
      await runtime.close();
    }
    // Closed: answered without reading the journal, as the synchronous status is.
    expect(brokerStatusSchema.parse(await runtime.broker.status({}, actor)).journal.state).toBe('closed');
  });

  it('stopIntake closes the agent and control sockets (no new caller gets in) while the journal stays open for the drain; close still closes the rest', async () => {
    dir = createTempDir();
    const runtime = await createBrokerRuntime({ dataDir: dir.path, ...options });
    const connects = (file: string): Promise<boolean> =>
      new Promise((resolve) => {
        const socket = createConnection(file);
        socket.once('connect', () => {
          socket.destroy();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      });
    expect(await connects(runtime.agentSocketPath)).toBe(true);
    expect(existsSync(path.join(dir.path, controlSocketFileName))).toBe(true);
    await runtime.stopIntake();
    await runtime.stopIntake();
    expect(await connects(runtime.agentSocketPath)).toBe(false);
    expect(existsSync(path.join(dir.path, controlSocketFileName))).toBe(false);
    expect(runtime.status().journal.state).toBe('open');
    const script = actionPaths.httpApproved('act_runtime0000002');
    await runtime.journal.append(script[0] as never);
    await runtime.close();
    expect(runtime.status().journal.state).toBe('closed');
  });

  it('when reopened after a stop mid-dispatch, recovery is counted and the action stays unknown, no longer in flight', async () => {
    dir = createTempDir();
    const first = await createBrokerRuntime({ dataDir: dir.path, ...options });
    const script = actionPaths.httpApproved('act_runtime0000002');
    const cut = script.findIndex((e) => e.kind === 'REQUEST_SENT') + 1;
    for (const event of script.slice(0, cut)) await first.journal.append(event);
    await first.close();

    const second = await createBrokerRuntime({ dataDir: dir.path, ...options });
    const status = second.status();
    expect(status.journal).toMatchObject({ recovered_at_open: 1, events: cut + 1 });
    expect(status.actions).toEqual({ total: 1, in_flight: 0, unknown: 1 });
    expect(second.journal.getAction('act_runtime0000002')).toMatchObject({
      outcome: 'unknown',
      outcome_basis: 'broker_restart_after_dispatch',
    });
    await second.close();
  });

  it("when reopened after a stop between an SSH recording's open row and DISPATCH_STARTED, the start seals it as never sent", async () => {
    dir = createTempDir();
    const first = await createBrokerRuntime({ dataDir: dir.path, ...options });
    const script = actionPaths.sshExit23('act_runtime0000003');
    const cut = script.findIndex((e) => e.kind === 'DISPATCH_STARTED');
    for (const event of script.slice(0, cut)) await first.journal.append(event);
    // The executor's open row, written before CREDENTIAL_AUTHORIZED; the broker stopped before it was sealed.
    const writer = ResultStore.open(path.join(dir.path, journalFileName), first.journal.rowCipher(), {
      role: 'broker',
    });
    await writer.recordings.start('act_runtime0000003', Date.now());
    writer.close();
    await first.close();

    const second = await createBrokerRuntime({ dataDir: dir.path, ...options });
    expect(second.journal.getAction('act_runtime0000003')).toMatchObject({
      outcome: 'not_attempted',
      dispatch_seq: null,
    });
    const reader = ResultStore.open(path.join(dir.path, journalFileName), second.journal.rowCipher());
    try {
      const lines = reader.recordings.read('act_runtime0000003').cast.toString('utf8').trimEnd().split('\n');
      expect(JSON.parse(lines[0] ?? '')).toMatchObject({
        timestamp: 0,
        title: 'postern act_runtime0000003 on build-1',
      });
      expect(lines.slice(1).map((l) => JSON.parse(l) as unknown)).toEqual([
        [0, 'm', 'postern: the exec request was never sent'],
      ]);
    } finally {
      reader.close();
      await second.close();
    }
  });

  it('postern status reads a data directory read-only, without migrating or recovering it', async () => {
    dir = createTempDir();
    expect(await readDataDirStatus(dir.path)).toMatchObject({
      journal: { events: 0, schema_version: 0 },
      actions: { total: 0 },
    });
    const runtime = await createBrokerRuntime({ dataDir: dir.path, ...options });
    const script = actionPaths.httpApproved('act_runtime0000003');
    for (const event of script.slice(0, 3)) await runtime.journal.append(event);
    // The daemon still holds the journal: the reader must not disturb it.
    const read = await readDataDirStatus(dir.path);
    expect(read).toMatchObject({
      journal: { state: 'closed', events: 3, last_seq: 3, recovered_at_open: 0 },
      actions: { total: 1, in_flight: 1, unknown: 0 },
    });
    expect(read.journal.schema_version).toBeGreaterThanOrEqual(1);
    await runtime.journal.append(script[3] as (typeof script)[number]);
    expect(runtime.status().journal.events).toBe(4);
    await runtime.close();
  });
});

describe('the broker runtime and postern.yaml', () => {
  it('when the routes file is bad, refuses to start naming the field, and opens nothing', async () => {
    dir = createTempDir();
    writeFileSync(
      path.join(dir.path, 'postern.yaml'),
      'version: 1\nroutes:\n  - name: docs\n    base_url: not a url\n    credential: docs-token\n    injection: bearer\n',
    );
    await expect(createBrokerRuntime({ dataDir: dir.path, ...options })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      field: expect.stringMatching(/^routes\[0\]\.base_url/),
    });
    expect(existsSync(path.join(dir.path, 'journal.sqlite'))).toBe(false);
  });

  it('when the routes file is good, the runtime carries its routes', async () => {
    dir = createTempDir();
    writeFileSync(
      path.join(dir.path, 'postern.yaml'),
      'version: 1\nroutes:\n  - name: docs\n    base_url: https://docs.example.com/api\n    credential: docs-token\n    injection: bearer\n    approval: none\n',
    );
    const runtime = await createBrokerRuntime({ dataDir: dir.path, ...options });
    expect([...runtime.config.routes.keys()]).toEqual(['docs']);
    await runtime.close();
  });

  it('logs one warning, with the code and the path-free first line status carries, when the journal writer thread fails to start', async () => {
    dir = createTempDir();
    const { logger, lines } = createCapturedLogger();
    // A native module that does not load (the journal's test seam): the thread's start fails, as a broken install's would.
    const binding = path.join(tmpdir(), `postern-no-binding-${process.pid}`, 'better_sqlite3.node');
    const runtime = await createBrokerRuntime({
      dataDir: dir.path,
      ...options,
      logger,
      journalWriterThreadNativeBinding: binding,
    });
    const warnings = () =>
      lines
        .map((line) => JSON.parse(line) as { level: number; msg: string; code?: string; detail?: string })
        .filter((line) => line.msg.includes('writer thread'));
    try {
      // The daemon's 'on-demand' thread is asked for by a batch of many callers' events (at least
      // threadBatchEventsMinDefault, 12); batches go on, committing inline, until its start has failed.
      const deadline = performance.now() + 20_000;
      for (
        let i = 0;
        runtime.status().journal.writer_thread?.state !== 'failed_to_start' && performance.now() < deadline;
        i += 1
      ) {
        const batch = Array.from(
          { length: 16 },
          (_, j) => actionPaths.httpNoApproval(`act_nothread_${String(i * 16 + j).padStart(6, '0')}`)[0] as NewEvent,
        );
        await runtime.journal.appendBatch(batch);
      }
      const writerThread = runtime.status().journal.writer_thread;
      expect(writerThread?.state).toBe('failed_to_start');
      expect(warnings()).toEqual([
        expect.objectContaining({
          level: 40,
          code: writerThread?.error?.code,
          detail: writerThread?.error?.detail,
          msg: 'the journal writer thread failed to start; commits run on the event loop for the rest of this run',
        }),
      ]);
      expect(warnings()[0]).toMatchObject({ code: 'MODULE_NOT_FOUND', detail: "Cannot find module '<path>'" });
      // More load: no second start, no second warning; and the module's path (where Postern is installed) nowhere.
      await runtime.journal.appendBatch(
        Array.from({ length: 16 }, (_, j) => actionPaths.httpNoApproval(`act_nothread_more_${j}`)[0] as NewEvent),
      );
      expect(warnings()).toHaveLength(1);
      expect(lines.join('')).not.toContain(path.dirname(binding));
    } finally {
      await runtime.close();
    }
  });
});
