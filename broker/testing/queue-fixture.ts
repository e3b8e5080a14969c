import { parseConfig, type PosternConfig } from '../config/index.js';
import type { AgentPeer, JournalEvent } from '../contract/index.js';
import { createRandomIdSource, type OperatorActor } from '../ports/index.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
import { createAgentBackend, type AgentBackendDeps, type RunningAgentBackend } from '../actions/agent-backend.js';
import { executeHttpAction, type HttpActionResult } from '../actions/execute-http-action.js';
import { ArrivalLogServer, type ArrivalLogServerOptions } from './arrival-log-server.js';
import { createCapturedLogger } from './captured-logger.js';
import { openHttpActionHarness, type HttpActionHarness } from './http-action-harness.js';
import { ManualTimers } from './manual-timers.js';

/**
 * The approval queue with everything real around it: a temp journal, the real vault holding the
 * canary credential, the HTTP channel, an arrival-log server on 127.0.0.1 and manual expiry timers
 * driven by the FakeClock. Routes (all to the arrival server, credential docs-token):
 * - `docs` (per_call): lane `document-{id}` for /documents/{id}, else `route:docs`; reads bypass lanes;
 * - `plain` (none): lane `document-{id}` too, so it conflicts with docs' documents;
 * - `sess` (session): lane `route:sess`.
 */
export const approvalTtlSeconds = 30;
export const person: OperatorActor = { kind: 'person', id: 'reviewer' };

export interface QueueFixture {
  readonly h: HttpActionHarness;
  readonly server: ArrivalLogServer;
  readonly queue: ApprovalQueue;
  readonly timers: ManualTimers;
  readonly config: PosternConfig;
  readonly logLines: string[];
  /** Starts one POST carrying `marker` (not awaited: it may wait for a person). */
  submit(
    marker: string,
    options?: {
      route?: string;
      path?: string;
      method?: string;
      sessionId?: string;
      query?: Record<string, string>;
      headers?: Record<string, string>;
    },
  ): Promise<HttpActionResult>;
  events(actionId: string): JournalEvent[];
  /** The ticket of the n-th action submitted (1-based), once admitted. */
  ticketOf(result: HttpActionResult): number;
  dispose(): Promise<void>;
}

export function queueFixtureConfig(port: number, agentsYaml = ''): PosternConfig {
  const route = (name: string, approval: string, lanes: boolean): string[] => [
    `  - name: ${name}`,
    `    base_url: http://127.0.0.1:${port}/api`,
    '    credential: docs-token',
    '    injection: bearer',
    `    approval: ${approval}`,
    '    reads_bypass_lanes: true',
    ...(lanes
      ? ['    lanes:', "      - methods: ['*']", '        path: /documents/{id}', '        lane: document-{id}']
      : []),
  ];
  return parseConfig(
    [
      'version: 1',
      'agents:',
      `  approval_ttl_seconds: ${approvalTtlSeconds}`,
      agentsYaml,
      'routes:',
      ...route('docs', 'per_call', true),
      ...route('plain', 'none', true),
      ...route('sess', 'session', false),
      '',
    ].join('\n'),
  );
}

export async function openQueueFixture(
  options: {
    agentsYaml?: string;
    server?: ArrivalLogServerOptions;
    beforeSync?: () => Promise<void>;
    laterFlushMs?: number;
  } = {},
): Promise<QueueFixture> {
  const h = await openHttpActionHarness({
    ...(options.beforeSync === undefined ? {} : { beforeSync: options.beforeSync }),
    ...(options.laterFlushMs === undefined ? {} : { laterFlushMs: options.laterFlushMs }),
  });
  const server = await ArrivalLogServer.start(options.server);
  const config = queueFixtureConfig(server.port, options.agentsYaml);
  const timers = new ManualTimers(h.temp.clock);
  h.queue.close();
  const { logger, lines: logLines } = createCapturedLogger();
  const queue = ApprovalQueue.open({ journal: h.temp.journal, clock: h.temp.clock, config, timers, logger });
  h.queue = queue;
  const ids = createRandomIdSource(h.temp.clock);
  return {
    h,
    server,
    queue,
    timers,
    config,
    logLines,
    submit(marker, o = {}) {
      const run = executeHttpAction(
        {
          ids,
          clock: h.temp.clock,
          journal: h.temp.journal,
          results: h.results,
          vault: h.vault,
          config,
          channel: h.channel,
          logger,
          queue,
          ...(o.sessionId === undefined ? {} : { sessionId: o.sessionId }),
        },
        {
          route: o.route ?? 'docs',
          method: o.method ?? 'POST',
          path: o.path ?? '/documents/7',
          // A read carries its marker in the query instead (a GET has no body).
          ...(o.method === 'GET'
            ? { query: { marker, ...o.query } }
            : {
                body: JSON.stringify({ marker }),
                headers: { 'content-type': 'application/json', ...o.headers },
                ...(o.query === undefined ? {} : { query: o.query }),
              }),
        },
      );
      run.then(
        (r) => h.envelopes.push(r.envelope),
        () => undefined,
      );
      return run;
    },
    events(actionId) {
      return [...h.temp.journal.events()].filter((e) => e.action_id === actionId);
    },
    ticketOf(result) {
      return h.temp.journal.getAction(result.envelope.invocation_id)?.ticket ?? 0;
    },
    async dispose() {
      queue.close();
      await server.stop();
      await h.dispose();
    },
  };
}

/**
 * The real agent backend over this fixture's journal, results, queue, config, vault and HTTP channel, with random ids on
 * the fixture's clock, every process alive and a sweeper that never runs in a test; `over` replaces any of its deps (a
 * wrapped journal, another config, which processes are alive).
 */
export function fixtureAgentBackend(
  f: QueueFixture,
  bootId: string,
  over: Partial<AgentBackendDeps> = {},
): Promise<RunningAgentBackend> {
  return createAgentBackend({
    journal: f.h.temp.journal,
    results: f.h.results,
    queue: f.queue,
    config: f.config,
    clock: f.h.temp.clock,
    ids: createRandomIdSource(f.h.temp.clock),
    vault: f.h.vault,
    httpChannel: f.h.channel,
    processAlive: () => true,
    sweepMs: 3_600_000,
    bootId,
    ...over,
  });
}

/** An agent process as the agent socket would have read it from its peer credentials: pid `pid`, no parent exe. */
export function agentPeer(pid: number): AgentPeer {
  return {
    pid,
    uid: 1000,
    gid: 1000,
    start_time: String(pid * 11),
    ppid: 1,
    exe: '/usr/bin/agent',
    cwd: '/work',
    parent_exe: null,
  };
}
