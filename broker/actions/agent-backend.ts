import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { McpUpstreams } from '../channels/mcp/index.js';
import { sanitizeMcpToolName, type PosternConfig } from '../config/index.js';
import {
  agentToolInputSchemas,
  agentToolReplySchema,
  CodedError,
  isCodedError,
  listRoutesEntriesMax,
  listRoutesRulesMax,
  TransitionRefused,
  type ActionState,
  type Actor,
  type AgentDecision,
  type AgentPeer,
  type AgentRefusal,
  type AllowlistEntry,
  type AgentRouteList,
  type AgentToolName,
  type EventKind,
  type NewEvent,
  type SessionState,
} from '../contract/index.js';
import { allowlistActorId } from '../core/index.js';
import type { Journal } from '../journal/index.js';
import type {
  AgentBackend,
  CallProgress,
  ResultHandoff,
  ToolAnswer,
  UpstreamToolListing,
  VaultState,
} from '../ports/index.js';
import { actionCall, cancelledAfterDispatch, cancelledNote, type CallWatch, waitSource } from './action-call.js';
import { mcpServerSpec } from './execute-mcp-action.js';
import type { AgentBackendDeps } from './agent-backend-deps.js';
import {
  decisionEventKinds,
  decisionFacts,
  sealedClosingHeadersMax,
  sealedDecisionFacts,
  waitForSettled,
} from './call-waits.js';
import { closedForCancel } from './closed-action.js';
import { credentialRequestCall } from './credential-request-call.js';
import { actionAnswer, closedSessionRefusal, passesOnceUnlocked, refusal } from './agent-answers.js';
import { observePolicyActor } from '../queue/decision-events.js';
import { OpenActions, openActionsPerSessionMax, runningActionsPerSessionMax } from './open-actions.js';
import { resultNotReady, stateClassification, stateEnvelope, stoppedAfterDispatch } from './state-envelope.js';
import { agentParse, issueField, issueMessage } from './http-action-request.js';
import {
  committedView,
  expiredEnvelope,
  handoffOf,
  noStoredResultEnvelope,
  resultExpired,
  resultKeptUntilMs,
  storedAnswerParts,
} from './stored-result.js';

export type { AgentBackendDeps } from './agent-backend-deps.js';

/** How often the sweeper looks for sessions whose process is gone. */
export const sessionSweepMsDefault = 5_000;

export interface RunningAgentBackend extends AgentBackend {
  /** Ends sessions whose process is gone and cancels their undispatched tickets; returns how many. */
  sweep(reason?: 'process_exited' | 'broker_found_gone'): Promise<number>;
  /** Stops the sweeper. */
  close(): void;
}

/**
 * The broker side of the agent socket (ports/agent-backend.ts): sessions per agent process, the seven
 * tools, and the caller's wait. A call's `timeout_ms` is how long the CALLER waits, never the
 * channel's timeout: when it passes, the action keeps its place and stays queryable
 * (action_status / fetch_result). Refusals are answers, never throws.
 */
export async function createAgentBackend(deps: AgentBackendDeps): Promise<RunningAgentBackend> {
  const bootId = deps.bootId ?? readBootId();
  const log = deps.logger;
  const open = new OpenActions(
    deps.openActionsPerSessionMax ?? openActionsPerSessionMax,
    (actionId) => {
      const state = deps.journal.getAction(actionId);
      return state === undefined || (state.dispatch_seq === null && state.outcome === null);
    },
    deps.runningActionsPerSessionMax ?? runningActionsPerSessionMax,
  );
  const sweep = (reason: 'process_exited' | 'broker_found_gone' = 'process_exited'): Promise<number> =>
    sweepSessions(deps, reason);
  const inTurn = handoffTurns();
  // Sessions a previous run left open whose process is gone: ended before anything else runs.
  await sweep('broker_found_gone');
  const timer = setInterval(() => {
    sweep().catch((error: unknown) => log?.error({ err: error }, 'session sweep failed'));
  }, deps.sweepMs ?? sessionSweepMsDefault);
  timer.unref();

  return {
    sweep,
    close: () => clearInterval(timer),
    openSession: (peer: AgentPeer, client: { name?: string; version?: string }) =>
      openSession(deps, bootId, peer, client),

    sessionDisconnected(sessionId: string): void {
      deps.queue.sessionDisconnected(sessionId);
    },

    // Names only, every one: an unknown route or host's refusal names them (withTargetNames), not list_routes' first page.
    targetNames: () => ({
      routes: [...deps.config.routes.values()].map((r) => r.name),
      ssh_hosts: [...deps.config.sshHosts.values()].map((h) => h.name),
    }),

    resultDelivered: (sessionId: string, handoff: ResultHandoff) =>
      inTurn(handoff.action_id, () => markDelivered(deps, sessionId, handoff)),
    resultNotDelivered: (sessionId: string, handoff: ResultHandoff) =>
      inTurn(handoff.action_id, () => noteDeliveryFailed(deps, sessionId, handoff)),

    async call(
      sessionId: string,
      tool: AgentToolName,
      args: unknown,
      signal: AbortSignal,
      onProgress?: (p: CallProgress) => void,
      onRecorded?: (actionId: string) => void,
    ): Promise<ToolAnswer> {
      try {
        const watch = { onProgress: afterDurable(deps, onProgress), onRecorded };
        const answer = await answerCall(deps, open, sessionId, tool, args, signal, watch);
        // Write-ahead for answers: an answer (or a progress note) that names an action leaves only once that
        // action's records are on disk — admission and observations ride to disk with the next sync (event-durability.ts).
        await deps.journal.durable();
        return answer;
      } catch (error) {
        if (!isCodedError(error)) throw error;
        const answer = refusal(
          error.code,
          error.message,
          readRefusalRetry(tool, error, deps.vault.state()),
          error.field,
        );
        return tool === 'http_request' || tool === 'ssh_exec' ? answer : readRefusal(answer);
      }
    },

    ...upstreamMethods(deps, open),
  };
}

/** The upstream MCP servers' side of the backend (absent without upstreams): listing, list_changed, calls. */
function upstreamMethods(
  deps: AgentBackendDeps,
  open: OpenActions,
): Pick<AgentBackend, 'upstreamTools' | 'onUpstreamToolsChanged' | 'callUpstream'> {
  const upstreams = deps.upstreams;
  if (upstreams === undefined) return {};
  return {
    upstreamTools: () => listUpstreamTools(deps, upstreams),
    onUpstreamToolsChanged(listener: () => void): () => void {
      // An unlock can let children start whose tools a locked vault kept out of the last list; a configuration applied
      // live can add, change or remove servers.
      const stops = [
        upstreams.onToolsChanged(() => listener()),
        deps.vault.onUnlock(listener),
        deps.journal.onCommit((commit) => {
          if (commit.kinds.includes('CONFIG_APPLIED')) listener();
        }),
      ];
      return () => {
        for (const stop of stops) stop();
      };
    },
    async callUpstream(sessionId, name, args, signal, onProgress, onRecorded): Promise<ToolAnswer> {
      const dot = name.indexOf('.');
      const tool = { server: name.slice(0, dot), tool: name.slice(dot + 1) };
      try {
        const watch = { onProgress: afterDurable(deps, onProgress), onRecorded };
        const answer = await withDecision(deps, await actionCall(deps, open, sessionId, tool, args, signal, watch));
        await deps.journal.durable();
        return answer;
      } catch (error) {
        if (!isCodedError(error)) throw error;
        return refusal(
          error.code,
          error.message,
          readRefusalRetry('http_request', error, deps.vault.state()),
          error.field,
        );
      }
    },
  };
}

/** Every configured server's tools as agents see them; a server that cannot start now is left out and logged. */
async function listUpstreamTools(deps: AgentBackendDeps, upstreams: McpUpstreams): Promise<UpstreamToolListing[]> {
  const listed: UpstreamToolListing[] = [];
  for (const server of deps.config.mcpServers.values()) {
    let tools: Awaited<ReturnType<McpUpstreams['listTools']>>;
    try {
      tools = await upstreams.listTools(mcpServerSpec(server));
    } catch (error) {
      deps.logger?.warn(
        { server: server.name, code: isCodedError(error) ? error.code : 'INTERNAL' },
        'upstream MCP server tools not listed',
      );
      continue;
    }
    const names = tools.map((tool) => sanitizeMcpToolName(server.name, tool.name));
    for (const [i, tool] of tools.entries()) {
      const name = names[i];
      if (name === undefined) {
        deps.logger?.warn({ server: server.name }, 'an upstream tool name outside MCP name characters was not listed');
        continue;
      }
      // Two tools of one server under one name: neither is listed (a call could not say which it meant).
      if (names.indexOf(name) !== names.lastIndexOf(name)) {
        deps.logger?.warn({ server: server.name }, 'an upstream server listed one tool name twice; neither was listed');
        continue;
      }
      const inputSchema = { ...tool.inputSchema, type: 'object' as const };
      listed.push({ name, ...(tool.description === undefined ? {} : { description: tool.description }), inputSchema });
    }
  }
  return listed;
}

/** Ends the sessions whose process is gone, cancelling their undispatched tickets; returns how many. */
async function sweepSessions(deps: AgentBackendDeps, reason: 'process_exited' | 'broker_found_gone'): Promise<number> {
  let ended = 0;
  for (const listed of deps.journal.unendedSessions()) {
    // An earlier run's session is judged by the process its events name, not its row (whose pid another process may
    // have moved to a dead one, to have a live session ended); while they cannot be opened it is left for later.
    if (!deps.journal.sessionConfirmed(listed.session_id)) continue;
    const s = deps.journal.getSession(listed.session_id);
    if (s === undefined || s.ended_at_ms !== null || deps.processAlive(s.pid, s.start_time)) continue;
    await deps.queue.endSession(s.session_id, reason);
    ended += 1;
  }
  return ended;
}

/**
 * Handoff reports per action, one after another: two connections' reports (a fetch written on one
 * while the other failed) each decide on the state the previous one left, so neither is lost or doubled.
 */
function handoffTurns(): (actionId: string, record: () => Promise<void>) => Promise<void> {
  const handoffs = new Map<string, Promise<void>>();
  return (actionId, record) => {
    const turn = (handoffs.get(actionId) ?? Promise.resolve()).then(record);
    const settled = turn.catch(() => undefined);
    handoffs.set(actionId, settled);
    void settled.then(() => {
      if (handoffs.get(actionId) === settled) handoffs.delete(actionId);
    });
    return turn;
  };
}

/** A process's session: the one it already has (a reconnection), or a new one, approved at once under `observe`. */
async function openSession(
  deps: AgentBackendDeps,
  bootId: string,
  peer: AgentPeer,
  client: { name?: string; version?: string },
): Promise<{ session_id: string }> {
  const existing = deps.journal.findSessionByProcess(peer.pid, peer.start_time);
  if (existing !== undefined) {
    const closed = closedSessionRefusal(existing, "this process's calls are refused", () =>
      deps.journal.sessionRecordCheck(existing.session_id),
    );
    if (closed !== undefined) throw new CodedError(closed.code, closed.message);
    // The session record shows each reconnection (a shim after a broker restart, or another connection).
    await deps.journal.appendSession({
      kind: 'SESSION_RECONNECTED',
      action_id: existing.session_id,
      payload: { client_name: clip(client.name ?? null, 200), client_version: clip(client.version ?? null, 100) },
    });
    // After a restart the allowlist has not seen this process yet: its scoped entries and an unscoped approval apply.
    if (existing.status === 'pending') await approveByAllowlist(deps, existing);
    deps.queue.sessionConnected(existing.session_id);
    return { session_id: existing.session_id };
  }
  const sessionId = sessionIdFor(bootId, peer);
  // Hashed before the session is recorded, so an allowlisted process never shows a pending card meanwhile.
  const allowed = deps.config.agents.session_approval === 'observe' ? undefined : await deps.allowlist?.identify(peer);
  const approver = sessionApprover(deps, allowed?.entry);
  // An entry matched but the process was started with an injection variable or is traced: the card says why.
  const withheld = allowed?.withheld === undefined ? {} : { allowlist_withheld: allowed.withheld };
  const startedEvent: NewEvent = {
    kind: 'SESSION_STARTED',
    action_id: sessionId,
    payload: {
      pid: peer.pid,
      uid: peer.uid,
      start_time: peer.start_time.slice(0, 64),
      ppid: peer.ppid,
      exe: clip(peer.exe, 4096),
      cwd: clip(peer.cwd, 4096),
      parent_exe: clip(peer.parent_exe, 4096),
      client_name: clip(client.name ?? null, 200),
      client_version: clip(client.version ?? null, 100),
      ...withheld,
    },
  };
  // Approved at once (observe policy, an allowlist entry): both in one commit, so no reader ever sees it pending.
  const approved = await deps.journal.tryAppendSessionBatch(
    approver === undefined
      ? [startedEvent]
      : [startedEvent, { kind: 'SESSION_APPROVED', action_id: sessionId, payload: { actor: approver } }],
  );
  if (allowed?.identity !== undefined) deps.allowlist?.remember(sessionId, allowed.identity);
  if (!approved.ok) {
    // session_exists, session_not_pending: the same process under the same boot maps to the same id, and an earlier record decides.
    const recorded = deps.journal.getSession(sessionId);
    if (recorded === undefined) throw new TransitionRefused(approved.refusal);
    const closed = closedSessionRefusal(recorded, "this process's calls are refused", () =>
      deps.journal.sessionRecordCheck(recorded.session_id),
    );
    if (closed !== undefined) throw new CodedError(closed.code, closed.message);
  }
  deps.queue.sessionConnected(sessionId);
  deps.logger?.info({ session_id: sessionId, pid: peer.pid }, 'agent session opened');
  return { session_id: sessionId };
}

/** Who approves a new session at once: observe-mode policy, or the unscoped process allowlist entry it matched. */
function sessionApprover(deps: AgentBackendDeps, entry: AllowlistEntry | undefined): Actor | undefined {
  if (deps.config.agents.session_approval === 'observe') return observePolicyActor;
  return entry === undefined ? undefined : { kind: 'policy', id: allowlistActorId(entry.entry_id) };
}

/** A pending session reconnecting after a restart: the allowlist has not seen its process in this run yet. */
async function approveByAllowlist(deps: AgentBackendDeps, reconnected: SessionState): Promise<void> {
  if (deps.config.agents.session_approval === 'observe') return;
  // An earlier run's session whose record its events have not confirmed (the vault locked): its row may have been
  // edited while no broker ran (a withheld mark cleared, its pid moved), so the allowlist does not act on it.
  if (!deps.journal.sessionApprovalUsable(reconnected.session_id)) return;
  const session = deps.journal.getSession(reconnected.session_id);
  if (session?.status !== 'pending') return;
  // Withheld when it opened (a tracer, an injection variable): whatever ran then may still run, however clean the
  // process reads now (a tracer detached, an environment block rewritten). Only a person approves it.
  if (session.allowlist_withheld !== null) return;
  const allowed = await deps.allowlist?.identify(session);
  if (allowed?.identity === undefined) return;
  deps.allowlist?.remember(session.session_id, allowed.identity);
  // A lost race (a person approved or revoked it meanwhile) leaves their decision standing.
  if (allowed.entry !== undefined)
    await deps.queue.approveSessionByPolicy(session.session_id, {
      kind: 'policy',
      id: allowlistActorId(allowed.entry.entry_id),
    });
}

/**
 * What the agent may do after a coded refusal of a call. after_correction only where the call itself can be fixed:
 * a read that needs the unlocked vault has nothing to correct, the same call works once a person unlocks —
 * VAULT_LOCKED (a result sealed under an earlier run), and AUDIT_KEY_UNAVAILABLE while the vault is locked (an
 * earlier run's events). What a run that never had a key sealed (AUDIT_KEY_UNAVAILABLE, sealedForGood) nothing will
 * open, locked or not: never — the journal tells that run from a locked one without the secret key
 * (passesOnceUnlocked). Limits pass with time.
 */
function readRefusalRetry(tool: AgentToolName, error: CodedError, vault: VaultState): AgentRefusal['error']['retry'] {
  switch (error.code) {
    case 'JOURNAL_UNAVAILABLE':
    case 'INTERNAL':
      return 'never';
    case 'VAULT_LOCKED':
    case 'AUDIT_KEY_UNAVAILABLE':
      return passesOnceUnlocked(error, vault) ? afterUnlock(tool) : 'never';
    case 'RATE_LIMITED':
    case 'SHUTTING_DOWN':
      return 'backoff';
    default:
      return 'after_correction';
  }
}

/** "Call again once the vault is unlocked": fetch_result reads the result again; another read is sent again later. */
function afterUnlock(tool: AgentToolName): AgentRefusal['error']['retry'] {
  return tool === 'fetch_result' ? 'fetch_result' : 'backoff';
}

async function answerCall(
  deps: AgentBackendDeps,
  open: OpenActions,
  sessionId: string,
  tool: AgentToolName,
  args: unknown,
  signal: AbortSignal,
  watch: CallWatch,
): Promise<ToolAnswer> {
  switch (tool) {
    case 'http_request':
    case 'ssh_exec':
      return await withDecision(deps, await actionCall(deps, open, sessionId, tool, args, signal, watch));
    case 'action_status':
    case 'fetch_result':
    case 'cancel_action':
      return await withDecision(deps, await readCall(deps, sessionId, tool, args, signal));
    case 'list_routes': {
      const parsed = agentToolInputSchemas.list_routes.safeParse(args, agentParse);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        return readRefusal(refusal('INVALID_ARGUMENT', issueMessage(issue), 'after_correction', issueField(issue)));
      }
      return listRoutes(deps.config, parsed.data.offset ?? 0);
    }
    case 'request_credential':
      return credentialRequestCall(deps, sessionId, args, signal);
  }
}

/** Progress notes in order, each sent once what it describes is on disk (see call). */
function afterDurable(
  deps: AgentBackendDeps,
  onProgress: ((p: CallProgress) => void) | undefined,
): ((p: CallProgress) => void) | undefined {
  if (onProgress === undefined) return undefined;
  let chain = Promise.resolve();
  return (p) => {
    // A failed journal drops the note (the answer says JOURNAL_UNAVAILABLE); the chain itself never rejects.
    chain = chain
      .then(() => deps.journal.durable())
      .then(() => onProgress(p))
      .catch(() => undefined);
  };
}

/**
 * Adds the recorded decision (who decided, when, a person's reason, the card's expiry) to an action's answer. A
 * rejection's reason is the person's own words to the agent; it is also named in the error's message. The events are
 * read once everything queued before is committed, without holding the loop (Journal.readCurrent), in one snapshot.
 */
async function withDecision(deps: AgentBackendDeps, answer: ToolAnswer): Promise<ToolAnswer> {
  const structured = answer.structured;
  if ('routes' in structured || 'request_id' in structured || structured.invocation_id === null) return answer;
  const actionId = structured.invocation_id;
  // Approval none and nobody decided (the auto-approved path): no card was shown (the queue shows none for approval
  // none) and no decision was recorded, which the state says without reading the events (nor committing what waits).
  const state = deps.journal.getAction(actionId);
  if (state?.approval === 'none' && state.decision === null) return answer;
  // A read that fails (the journal failed meanwhile) leaves the answer as it is: the decision is an addition to an
  // answer about an action that exists, never a reason to replace it with a refusal naming none.
  const read = await deps.journal
    .readCurrent(() => {
      const kinds = deps.journal.subjectKinds(actionId);
      if (![...decisionEventKinds].some((kind) => kinds.has(kind))) return undefined;
      const found = recordedDecision(deps, actionId, state, kinds);
      if (found === undefined) return undefined;
      return { decision: found, sealedNote: found.sealed === true ? sealedDecisionNote(deps, actionId) : '' };
    })
    .catch(() => undefined);
  if (read === undefined) return answer;
  const decision = read.decision;
  const error = structured.error;
  const said =
    decision.reason !== null &&
    decision.reason !== '' &&
    error !== undefined &&
    (decision.state === 'rejected' || decision.state === 'cancelled');
  const who = decision.by === null ? '' : ` by ${decision.by.kind} ${decision.by.id}`;
  const withReason = said
    ? { ...error, message: `${decision.state}${who}: ${decision.reason ?? ''}`.slice(0, 1000) }
    : error;
  const reply = agentToolReplySchema.parse({
    ...structured,
    ...(withReason === undefined ? {} : { error: withReason }),
    decision,
  });
  const sealedNote = decision.sealed === true ? ` (decision ${decision.state}; ${read.sealedNote})` : '';
  return {
    ...answer,
    structured: reply,
    text: said ? `${answer.text} (${decision.state}${who}: ${decision.reason ?? ''})` : `${answer.text}${sealedNote}`,
  };
}

/**
 * What the text line says of a decision read sealed: only what an unlock would change. An earlier run's events open
 * once a person unlocks; those of a run that never had a key (it ended before the vault was ever unlocked in it) open
 * never — its key lived only in that run's memory — so the line asks for no unlock then, locked or not.
 */
function sealedDecisionNote(deps: AgentBackendDeps, actionId: string): string {
  const what = "who decided, a reason and the card's expiry are sealed in the journal";
  if (deps.journal.subjectSealedForGood(actionId))
    return `${what} for good: the broker run that recorded them never had a key, and no unlock opens them`;
  return deps.vault.state() === 'locked' ? `${what}: read again once a person unlocks the vault` : what;
}

/**
 * The decision from the action's events, or — when they are sealed (an earlier run's events before a person unlocks
 * the vault, or a run that never had a key) — what the plaintext current-state table says of it, marked `sealed`: the
 * answer stands on what is readable instead of failing as a whole, and never guesses at what is sealed.
 */
function recordedDecision(
  deps: AgentBackendDeps,
  actionId: string,
  state: ActionState | undefined,
  kinds: ReadonlySet<EventKind>,
): AgentDecision | undefined {
  try {
    return decisionFacts(deps.journal.subjectEvents(actionId));
  } catch (error) {
    const sealed = isCodedError(error) && (error.code === 'AUDIT_KEY_UNAVAILABLE' || error.code === 'VAULT_LOCKED');
    if (!sealed || state === undefined) throw error;
    return sealedDecisionFacts(
      state,
      kinds,
      deps.journal.getActionTimeline(actionId),
      deps.journal.classifiedHeaders(actionId, sealedClosingHeadersMax),
    );
  }
}

/** A refused read names no outcome: it says nothing about any action, only that this read was refused. */
function readRefusal(answer: ToolAnswer): ToolAnswer {
  const structured = answer.structured;
  if ('routes' in structured || 'request_id' in structured || structured.invocation_id !== null) return answer;
  const { outcome: _none, ...error } = structured.error;
  return { ...answer, structured: agentToolReplySchema.parse({ ...structured, error }) };
}

/** action_status, fetch_result, cancel_action: only this session's actions (another's id is NOT_FOUND). */
async function readCall(
  deps: AgentBackendDeps,
  sessionId: string,
  tool: 'action_status' | 'fetch_result' | 'cancel_action',
  args: unknown,
  signal: AbortSignal,
): Promise<ToolAnswer> {
  const parsed = agentToolInputSchemas[tool].safeParse(args, agentParse);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return readRefusal(refusal('INVALID_ARGUMENT', issueMessage(issue), 'after_correction', issueField(issue)));
  }
  const notFound = (): ToolAnswer =>
    readRefusal(refusal('NOT_FOUND', 'no action with that id is visible to this session', 'never', 'action_id'));
  let found = ownAction(deps.journal, sessionId, parsed.data.action_id);
  if (found === undefined) return notFound();
  // A result is handed over, and a cancel recorded, only on what the action's sealed events say, never on the
  // plaintext row, which another process can edit to name its own session (or another result). What the row says
  // without a result or a record to make (a status, a closed action, no result) the agent can read from the file.
  if (actsOnSealedRecord(deps, tool, found)) {
    found = ownSealedAction(deps.journal, sessionId, parsed.data.action_id);
    if (found === undefined) return notFound();
  }
  let state = found;
  const waitMs = tool === 'action_status' ? agentToolInputSchemas.action_status.parse(args).wait_ms : undefined;
  if (waitMs !== undefined && waitMs > 0) {
    // The long-poll: an agent waits for the outcome in chunks shorter than its client's request timeout.
    await waitForSettled(waitSource(deps), state.action_id, waitMs, signal);
    state = deps.journal.getAction(state.action_id) ?? state;
  }
  if (tool === 'cancel_action') {
    // A closed action is not changed: no caller event, no CANCELLED; the answer says the cancel did nothing, and why.
    // One whose executor still runs is not closed, whatever its record reads (an automatic retry in its backoff): the
    // cancel is recorded and stops further rounds (the queue's stoppedByCaller, the retry engine's ready()). An
    // abandoned one is closed for good, running or not.
    const running = deps.queue.isExecuting(state.action_id) && !state.abandoned;
    const closed = running ? undefined : closedForCancel(state);
    if (closed !== undefined)
      return readRefusal(
        refusal(
          'ACTION_CLOSED',
          `cancel_action had no effect: action ${state.action_id} is already closed: ${closed}. Nothing was recorded; action_status answers its record`,
          'never',
          'action_id',
        ),
      );
    const after = (await deps.queue.callerStopped(state.action_id, 'cancelled')) ?? state;
    const stopped = stoppedAfterDispatch(
      after,
      'canceled',
      'CALLER_CANCELLED',
      cancelledAfterDispatch(after.action_id),
    );
    if (stopped !== undefined)
      return { ...actionAnswer({ envelope: stopped, state: after, note: cancelledNote }), isError: true };
    return actionAnswer({ envelope: stateEnvelope(after), state: after, queue: deps.queue.position(after.action_id) });
  }
  if (tool === 'action_status') {
    // Once the result was handed over, an earlier failed handoff is history: the status is the result's.
    const view = state.stage === 'result_delivered' ? await committedViewNow(deps, state) : state;
    return actionAnswer({ envelope: stateEnvelope(view), state: view, queue: deps.queue.position(state.action_id) });
  }
  return fetchResult(deps, state);
}

/**
 * committedView over the action's events, read once everything queued before is committed without holding the loop
 * (Journal.readCurrent). A read that fails (sealed events, a journal that failed meanwhile) leaves the state as it is.
 */
async function committedViewNow(deps: AgentBackendDeps, state: ActionState): Promise<ActionState> {
  return deps.journal
    .readCurrent(() => committedView(state, () => deps.journal.subjectEvents(state.action_id)))
    .catch(() => state);
}

/**
 * fetch_result: a read of the result store; it can never cause a remote call, and it journals
 * nothing itself — RESULT_DELIVERED follows when the socket reports the answer written
 * (resultDelivered). A result past its retention is RESULT_EXPIRED, checked before its bytes are
 * read; the action is never run again to recreate it. An action with no outcome recorded yet is
 * RESULT_NOT_READY (coded like any failure: a caller never has to read the text to know to wait).
 */
/** The committed result is the latest attempt's: no retry was dispatched after it (RESULT_DELIVERED keeps it so). */
function resultIsCurrent(state: ActionState): boolean {
  return state.stage === 'result_committed' || state.stage === 'result_delivered';
}

async function fetchResult(deps: AgentBackendDeps, state: ActionState): Promise<ToolAnswer> {
  const head = state.result_id === null ? undefined : deps.results.head(state.result_id);
  // A stored result is the action's only while no later attempt was dispatched after it (a retry of a 429 runs): an
  // earlier attempt's answer handed over then would read as the outcome of an action whose outcome is not known.
  if (head === undefined || !resultIsCurrent(state)) {
    const queue = deps.queue.position(state.action_id);
    const envelope = resultNotReady(state) ?? noStoredResultEnvelope(stateEnvelope(state), state);
    return { ...actionAnswer({ envelope, state, queue }), isError: true };
  }
  const retention = deps.config.results.retention_seconds;
  if (resultExpired(head, retention, deps.clock.nowMs())) {
    const keptUntil = new Date(resultKeptUntilMs(head, retention)).toISOString();
    return {
      ...actionAnswer({
        envelope: expiredEnvelope(stateEnvelope(state), state),
        state,
        note: `(result kept until ${keptUntil}; never re-executed)`,
      }),
      isError: true,
    };
  }
  const stored = deps.results.read(head.result_id);
  if (stored === undefined) {
    const envelope = noStoredResultEnvelope(stateEnvelope(state), state, true);
    return { ...actionAnswer({ envelope, state }), isError: true };
  }
  const view = await committedViewNow(deps, state);
  const handoff = handoffOf(state);
  return {
    ...actionAnswer({ envelope: stateEnvelope(view), state: view, ...storedAnswerParts(state.channel, stored) }),
    ...(handoff === undefined ? {} : { handoff }),
  };
}

/**
 * The answer carrying a committed result was written completely to the caller's connection (the
 * strongest acknowledgement MCP allows): RESULT_DELIVERED, once per action. A handoff of a result
 * that is not the action's committed one (cannot happen today) or of another session's action is ignored.
 * It starts no commit of its own: it rides in the next one (appendLater; event-durability.ts), at most laterFlushMs
 * away — a record after the answer, which nothing waits for.
 */
async function markDelivered(deps: AgentBackendDeps, sessionId: string, handoff: ResultHandoff): Promise<void> {
  const state = ownAction(deps.journal, sessionId, handoff.action_id);
  // Only the current attempt's committed result: an earlier attempt's handed over while a retry runs is not it.
  if (state === undefined || state.result_id !== handoff.result_id || state.stage !== 'result_committed') return;
  await deps.journal.appendLater({
    kind: 'RESULT_DELIVERED',
    action_id: state.action_id,
    payload: { result_id: handoff.result_id },
  });
}

/**
 * The answer carrying a committed result never reached the caller's connection: the outcome stays
 * what the remote said (committed or rejected, same effect) and a delivery note says so — phase
 * result_delivery, RESULT_DELIVERY_FAILED, retry fetch_result — beside CALLER_DISCONNECTED, in one
 * commit. Once per action, and never after the result was delivered on another connection.
 */
async function noteDeliveryFailed(deps: AgentBackendDeps, sessionId: string, handoff: ResultHandoff): Promise<void> {
  const state = ownAction(deps.journal, sessionId, handoff.action_id);
  if (state === undefined || state.result_id !== handoff.result_id) return;
  if (state.stage === 'result_delivered' || state.phase === 'result_delivery' || !state.recorded) return;
  const recorded = stateClassification(state);
  if (recorded === undefined || (recorded.outcome !== 'committed' && recorded.outcome !== 'rejected')) return;
  // A backoff delay belongs to the remote's answer, not to fetching it again.
  const { retry_after_ms: _delay, ...c } = recorded;
  await deps.journal.appendBatch([
    { kind: 'CALLER_DISCONNECTED', action_id: state.action_id, payload: { stage: 'result_delivery' } },
    {
      kind: 'OUTCOME_RECORDED',
      action_id: state.action_id,
      payload: {},
      // As classifyOutcome words a delivery failure: the remote's outcome, effect and source stand.
      classification: {
        ...c,
        phase: 'result_delivery',
        retry: 'fetch_result',
        code: 'RESULT_DELIVERY_FAILED',
        outcome_basis: 'result_recorded_delivery_failed',
      },
    },
  ]);
}

/** Whether the call hands over a stored result or records a cancel, going by what the row says. */
function actsOnSealedRecord(deps: AgentBackendDeps, tool: AgentToolName, row: ActionState): boolean {
  if (tool === 'fetch_result') return row.result_id !== null;
  if (tool === 'cancel_action') return deps.queue.isExecuting(row.action_id) || closedForCancel(row) === undefined;
  return false;
}

/** ownAction on Journal.sealedAction: whose action it is, and which result it holds, as the journal itself knows. */
function ownSealedAction(journal: Journal, sessionId: string, actionId: string): ActionState | undefined {
  if (!actionId.startsWith('act_')) return undefined;
  const state = journal.sealedAction(actionId);
  return state?.session_id === sessionId ? state : undefined;
}

function ownAction(journal: Journal, sessionId: string, actionId: string): ActionState | undefined {
  if (!actionId.startsWith('act_')) return undefined;
  const state = journal.getAction(actionId);
  return state?.session_id === sessionId ? state : undefined;
}

/**
 * One page of list_routes from `offset`: entries (routes, then SSH host entries, in config order) while the page holds
 * fewer than listRoutesEntriesMax and their rules stay within listRoutesRulesMax — at least one entry when any is
 * left, never part of one — and `more` with how many follow and the offset that lists them.
 */
function listRoutes(config: PosternConfig, offset: number): ToolAnswer {
  const { all, digest } = listingOf(config);
  const entries = [...all.routes, ...all.ssh_hosts];
  let end = offset;
  let rules = 0;
  while (end < entries.length && end - offset < listRoutesEntriesMax) {
    const entry = entries[end];
    const n = entry === undefined ? 0 : 'rules' in entry ? entry.rules.length : entry.commands.length;
    if (end > offset && rules + n > listRoutesRulesMax) break;
    rules += n;
    end += 1;
  }
  const routesEnd = all.routes.length;
  const structured: AgentRouteList = {
    ...(offset > 0 ? { offset } : {}),
    list_digest: digest,
    routes: all.routes.slice(Math.min(offset, routesEnd), Math.min(end, routesEnd)),
    ssh_hosts: all.ssh_hosts.slice(Math.max(offset - routesEnd, 0), Math.max(end - routesEnd, 0)),
    ...(end < entries.length ? { more: { not_shown: entries.length - end, next_offset: end } } : {}),
  };
  const more = structured.more === undefined ? '' : `; ${structured.more.not_shown} more not shown`;
  return {
    isError: false,
    structured,
    text: `${structured.routes.length} route(s), ${structured.ssh_hosts.length} SSH host entr${structured.ssh_hosts.length === 1 ? 'y' : 'ies'}${more}`,
  };
}

/** A config's whole listing and its digest, made once per config object (a reload swaps in a new one). */
const listings = new WeakMap<PosternConfig, { all: Pick<AgentRouteList, 'routes' | 'ssh_hosts'>; digest: string }>();

function listingOf(config: PosternConfig): {
  all: Pick<AgentRouteList, 'routes' | 'ssh_hosts'>;
  digest: string;
} {
  let listing = listings.get(config);
  if (listing === undefined) {
    const all = listedRoutes(config);
    listing = { all, digest: `sha256:${createHash('sha256').update(JSON.stringify(all)).digest('hex')}` };
    listings.set(config, listing);
  }
  return listing;
}

/** Every route and SSH host entry as list_routes describes it, in config order. */
function listedRoutes(config: PosternConfig): Pick<AgentRouteList, 'routes' | 'ssh_hosts'> {
  return {
    routes: [...config.routes.values()].map((r) => ({
      name: r.name,
      methods: [...r.methods],
      approval: r.approval,
      idempotency_contract: r.idempotency !== undefined,
      base_path: r.base_path,
      rules: (r.rules ?? []).map((rule) => ({ methods: [...rule.methods], path: rule.path, approval: rule.approval })),
    })),
    // A command rule without its own approval has the host's (sshCommandPolicy); its lane is not the agent's concern.
    ssh_hosts: [...config.sshHosts.values()].map((h) => ({
      name: h.name,
      approval: h.approval,
      commands: h.commands.map((rule) => ({
        command: rule.command,
        approval: rule.approval ?? h.approval,
        wildcard: rule.rules_may_loosen === true ? ('loose' as const) : ('strict' as const),
      })),
    })),
  };
}

/** `ses_` + a digest of (boot id, pid, start time): the same process maps to the same session. */
export function sessionIdFor(bootId: string, peer: Pick<AgentPeer, 'pid' | 'start_time'>): string {
  return `ses_${createHash('sha256').update(`${bootId}\n${peer.pid}\n${peer.start_time}`).digest('hex').slice(0, 32)}`;
}

function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim().slice(0, 64);
  } catch {
    return 'no-boot-id';
  }
}

function clip(value: string | null, charsMax: number): string | null {
  return value === null ? null : value.slice(0, charsMax);
}
