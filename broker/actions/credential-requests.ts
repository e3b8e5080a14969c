import type { Logger } from 'pino';
import type { PosternConfig } from '../config/index.js';
import {
  actorLabel,
  CodedError,
  type Actor,
  type CredentialRequestCard,
  type CredentialRequestInput,
  type CredentialRequestReply,
  type EventPayload,
  type JournalEvent,
} from '../contract/index.js';
import type { CredentialRequestState } from '../core/index.js';
import type { Journal } from '../journal/index.js';
import type { Clock, CredentialInfo, IdSource } from '../ports/index.js';
import { systemQueueTimers, type QueueTimer, type QueueTimers } from '../queue/index.js';

/** Requests waiting for a person at once, per agent session and in all: an agent cannot bury the operator in cards. */
export const credentialRequestsPendingPerSessionMax = 5;
export const credentialRequestsPendingMax = 100;
/** Answered requests credential_requests.list still shows (newest first, after the pending ones). */
const recentAnsweredMax = 50;

export interface CredentialRequestsOptions {
  readonly journal: Journal;
  readonly clock: Clock;
  readonly ids: IdSource;
  /** The configuration in force (live): a route's credential name, kind and host prefill the form. */
  readonly config: PosternConfig;
  /** How long a request waits for a person (postern.yaml `agents.credential_request_ttl_s`). */
  readonly ttlMs: number;
  readonly timers?: QueueTimers;
  readonly logger?: Logger;
  readonly pendingPerSessionMax?: number;
  readonly pendingMax?: number;
}

/** What a person's provisioning put in the vault (credentials.add's code path) or found there. */
export interface ProvisionedCredential {
  readonly info: CredentialInfo;
  readonly how: 'added' | 'bound_existing';
}

/**
 * Agents' credential requests (request_credential): each is a `crq_` subject in the journal — asked, then exactly one
 * answer (provisioned, declined, expired) — and the waiters of the calls that asked. The record is the journal: the
 * state of every request folds from its plaintext event headers, so a restart finds its pending requests and their
 * expiry even while the vault is locked. No value ever passes through here: provisioning is given a function that
 * puts the secret in the vault and answers the credential's metadata.
 */
export class CredentialRequests {
  private readonly timers: QueueTimers;
  private readonly expiries = new Map<string, QueueTimer>();
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Requests a person's answer is being written for (the vault add runs first): expiry and a second answer wait. */
  private readonly deciding = new Set<string>();
  private closed = false;

  private constructor(private readonly options: CredentialRequestsOptions) {
    this.timers = options.timers ?? systemQueueTimers;
  }

  /** Rebuilds the expiry of every pending request from the journal; those already past it expire now. */
  static async open(options: CredentialRequestsOptions): Promise<CredentialRequests> {
    const requests = new CredentialRequests(options);
    for (const state of options.journal.listCredentialRequests()) {
      if (state.status === 'pending') requests.armExpiry(state);
    }
    await requests.expireDue();
    return requests;
  }

  /** Records a new request of `sessionId` (the input as the contract schema parsed it) and arms its expiry. */
  async request(
    sessionId: string,
    input: CredentialRequestInput,
  ): Promise<{ request_id: string; expires_at_ms: number }> {
    if (input.purpose === undefined || input.for === undefined)
      throw new CodedError('INVALID_ARGUMENT', 'purpose and for are required', { field: 'purpose' });
    this.refuseOverLimit(sessionId);
    const requestId = `crq_${this.options.ids.newActionId().slice('act_'.length)}`;
    const payload: EventPayload<'CREDENTIAL_REQUESTED'> = {
      purpose: input.purpose,
      for: input.for,
      session_id: sessionId,
      ...(input.kind === undefined ? {} : { kind: input.kind }),
      ...(input.header === undefined ? {} : { header: input.header }),
      ...(input.format === undefined ? {} : { format: input.format }),
      ...(input.docs_url === undefined ? {} : { docs_url: input.docs_url }),
      ...(input.scopes === undefined ? {} : { scopes: input.scopes }),
    };
    const appended = await this.options.journal.tryAppendCredentialRequest({
      kind: 'CREDENTIAL_REQUESTED',
      action_id: requestId,
      session_id: sessionId,
      payload,
    });
    if (!appended.ok) throw new CodedError('INTERNAL', 'a new credential request id was already taken');
    this.armExpiry(appended.appended.request);
    this.options.logger?.info({ request_id: requestId, session_id: sessionId }, 'credential requested (agent)');
    return { request_id: requestId, expires_at_ms: this.expiresAtMs(appended.appended.request) };
  }

  /**
   * Waits up to `waitMs` (the caller's wait) for a person's answer and says where the request stands: the
   * credential's name once provisioned, never its value. Another session's request is NOT_FOUND.
   */
  async wait(
    sessionId: string,
    requestId: string,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<CredentialRequestReply> {
    const state = this.options.journal.getCredentialRequest(requestId);
    if (state === undefined || state.session_id !== sessionId)
      throw new CodedError('NOT_FOUND', 'no credential request with that id is visible to this session', {
        field: 'request_id',
      });
    if (state.status === 'pending') await this.settledOrTimeout(requestId, waitMs, signal);
    return this.reply(requestId);
  }

  /** Pending requests first (oldest first), then the newest answered ones: what a person sees on the cards. */
  list(): CredentialRequestCard[] {
    const states = this.options.journal.listCredentialRequests();
    const pending = states.filter((s) => s.status === 'pending');
    const answered = states
      .filter((s) => s.status !== 'pending')
      .sort((a, b) => b.last_seq - a.last_seq)
      .slice(0, recentAnsweredMax);
    return [...pending, ...answered].map((state) => this.card(state));
  }

  /**
   * A person's answer with a credential: `give` adds it to the vault (or binds an existing one) only while the
   * request is still pending and nobody else is answering it; then CREDENTIAL_PROVISIONED names it. A request
   * answered meanwhile is DECISION_CONFLICT, and `give` is not run.
   */
  async provision(
    requestId: string,
    actor: Actor,
    give: () => Promise<ProvisionedCredential>,
  ): Promise<{ provisioned: ProvisionedCredential; journal_seq: number }> {
    return this.answering(requestId, async () => {
      const provisioned = await give();
      const seq = await this.answer(requestId, {
        kind: 'CREDENTIAL_PROVISIONED',
        action_id: requestId,
        payload: {
          actor,
          credential_id: provisioned.info.id,
          credential_name: provisioned.info.name,
          how: provisioned.how,
        },
      });
      this.options.logger?.info(
        { request_id: requestId, credential_id: provisioned.info.id, how: provisioned.how },
        'credential request provisioned (operator)',
      );
      return { provisioned, journal_seq: seq };
    });
  }

  /** A person declines; the reason (optional) is passed to the agent as written. */
  async decline(requestId: string, actor: Actor, reason: string | undefined): Promise<{ journal_seq: number }> {
    return this.answering(requestId, async () => {
      const seq = await this.answer(requestId, {
        kind: 'CREDENTIAL_REQUEST_DECLINED',
        action_id: requestId,
        payload: { actor, ...(reason === undefined ? {} : { reason }) },
      });
      this.options.logger?.info({ request_id: requestId }, 'credential request declined (operator)');
      return { journal_seq: seq };
    });
  }

  /** Stops the expiry timers and releases every waiter (each answers what the journal says). */
  close(): void {
    this.closed = true;
    for (const timer of this.expiries.values()) timer.cancel();
    this.expiries.clear();
    for (const id of [...this.waiters.keys()]) this.wake(id);
  }

  private refuseOverLimit(sessionId: string): void {
    const pending = this.options.journal.listCredentialRequests().filter((s) => s.status === 'pending');
    const perSession = this.options.pendingPerSessionMax ?? credentialRequestsPendingPerSessionMax;
    if (pending.filter((s) => s.session_id === sessionId).length >= perSession)
      throw new CodedError('RATE_LIMITED', `at most ${perSession} credential requests may wait per session`);
    const all = this.options.pendingMax ?? credentialRequestsPendingMax;
    if (pending.length >= all) throw new CodedError('RATE_LIMITED', `at most ${all} credential requests may wait`);
  }

  /** One answer at a time per request, and only to a pending one (the journal's fold is the last word). */
  private async answering<T>(requestId: string, run: () => Promise<T>): Promise<T> {
    const state = this.options.journal.getCredentialRequest(requestId);
    if (state === undefined)
      throw new CodedError('NOT_FOUND', `no credential request ${requestId}`, { field: 'request_id' });
    if (state.status !== 'pending' || this.deciding.has(requestId))
      throw new CodedError(
        'DECISION_CONFLICT',
        `the credential request is already ${state.status === 'pending' ? 'being answered' : state.status}`,
        {
          field: 'request_id',
        },
      );
    this.deciding.add(requestId);
    try {
      return await run();
    } finally {
      this.deciding.delete(requestId);
      // An answer that failed (a locked vault, a bad form) leaves the request pending: its expiry may be due now.
      if (this.options.journal.getCredentialRequest(requestId)?.status === 'pending') void this.expireDue();
    }
  }

  private async answer(
    requestId: string,
    event: Parameters<Journal['tryAppendCredentialRequest']>[0],
  ): Promise<number> {
    const appended = await this.options.journal.tryAppendCredentialRequest(event);
    if (!appended.ok)
      throw new CodedError('DECISION_CONFLICT', 'the credential request was answered meanwhile', {
        field: 'request_id',
      });
    this.settled(requestId);
    return appended.appended.event.seq;
  }

  private expiresAtMs(state: CredentialRequestState): number {
    return state.requested_at_ms + this.options.ttlMs;
  }

  private armExpiry(state: CredentialRequestState): void {
    if (this.closed || this.expiries.has(state.request_id)) return;
    const delay = this.expiresAtMs(state) - this.options.clock.nowMs();
    const timer = this.timers.set(() => {
      this.expiries.delete(state.request_id);
      void this.expire(state.request_id);
    }, delay);
    this.expiries.set(state.request_id, timer);
  }

  /** Expires every pending request whose time passed (at open, and after an answer that failed). */
  private async expireDue(): Promise<void> {
    const now = this.options.clock.nowMs();
    for (const state of this.options.journal.listCredentialRequests()) {
      if (state.status === 'pending' && this.expiresAtMs(state) <= now) await this.expire(state.request_id);
    }
  }

  private async expire(requestId: string): Promise<void> {
    // A person is answering it now: that answer settles it (and re-checks the expiry if it fails).
    if (this.closed || this.deciding.has(requestId)) return;
    const state = this.options.journal.getCredentialRequest(requestId);
    if (state?.status !== 'pending' || this.expiresAtMs(state) > this.options.clock.nowMs()) return;
    try {
      const appended = await this.options.journal.tryAppendCredentialRequest({
        kind: 'CREDENTIAL_REQUEST_EXPIRED',
        action_id: requestId,
        payload: {},
      });
      // A refusal: a person's answer landed first, and it stands.
      if (appended.ok) this.options.logger?.info({ request_id: requestId }, 'credential request expired');
    } catch (error) {
      this.options.logger?.error({ err: error, request_id: requestId }, 'a credential request could not be expired');
    }
    this.settled(requestId);
  }

  private settled(requestId: string): void {
    this.expiries.get(requestId)?.cancel();
    this.expiries.delete(requestId);
    this.wake(requestId);
  }

  private wake(requestId: string): void {
    const waiting = this.waiters.get(requestId);
    this.waiters.delete(requestId);
    for (const wake of waiting ?? []) wake();
  }

  /** Resolves on the request's answer, the caller's wait, or the caller going away, whichever comes first. */
  private settledOrTimeout(requestId: string, waitMs: number, signal: AbortSignal): Promise<void> {
    if (this.closed || signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.get(requestId)?.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, waitMs));
      timer.unref();
      signal.addEventListener('abort', done, { once: true });
      let set = this.waiters.get(requestId);
      if (set === undefined) this.waiters.set(requestId, (set = new Set()));
      set.add(done);
    });
  }

  private reply(requestId: string): CredentialRequestReply {
    const state = this.options.journal.getCredentialRequest(requestId);
    if (state === undefined) throw new CodedError('NOT_FOUND', 'no such credential request', { field: 'request_id' });
    const base = { status: state.status, request_id: requestId };
    if (state.status === 'pending') return { ...base, expires_at_ms: this.expiresAtMs(state) };
    if (state.status === 'expired') return base;
    const answer = this.answerEvent(requestId);
    if (answer?.kind === 'CREDENTIAL_PROVISIONED') return { ...base, credential: answer.payload.credential_name };
    if (answer?.kind === 'CREDENTIAL_REQUEST_DECLINED' && answer.payload.reason !== undefined)
      return { ...base, reason: answer.payload.reason };
    return base;
  }

  private answerEvent(requestId: string): JournalEvent | undefined {
    // Written by this run (or opened with the vault unlocked); an earlier run's sealed answer says only its status.
    try {
      return this.options.journal.subjectEvents(requestId, 16).at(-1);
    } catch {
      return undefined;
    }
  }

  private card(state: CredentialRequestState): CredentialRequestCard {
    return credentialRequestCard(state, this.options, this.expiresAtMs(state));
  }
}

/** A request as a person sees it: the agent's words as stored, the asking process, the answer, a prefill. */
function credentialRequestCard(
  state: CredentialRequestState,
  options: CredentialRequestsOptions,
  expiresAtMs: number,
): CredentialRequestCard {
  let events: JournalEvent[] | undefined;
  try {
    events = options.journal.subjectEvents(state.request_id, 16);
  } catch {
    events = undefined; // An earlier run's rows while the vault is locked: the status only.
  }
  const asked = events?.find((e) => e.kind === 'CREDENTIAL_REQUESTED');
  const answer = events?.at(-1);
  const details = asked?.kind === 'CREDENTIAL_REQUESTED' ? asked.payload : undefined;
  const session = state.session_id === null ? undefined : options.journal.getSession(state.session_id);
  return {
    request_id: state.request_id,
    status: state.status,
    session_id: state.session_id,
    session:
      session === undefined
        ? null
        : {
            status: session.status,
            pid: session.pid,
            exe: session.exe,
            client_name: session.client_name,
            record: options.journal.sessionRecordCheck(session.session_id),
          },
    requested_at_ms: state.requested_at_ms,
    expires_at_ms: state.status === 'pending' ? expiresAtMs : null,
    decided_at_ms: state.decided_at_ms,
    sealed: details === undefined,
    purpose: details?.purpose ?? null,
    for: details?.for ?? null,
    kind: details?.kind ?? null,
    header: details?.header ?? null,
    format: details?.format ?? null,
    docs_url: details?.docs_url ?? null,
    scopes: details?.scopes ?? [],
    suggested: suggestion(details, options.config),
    credential: answer?.kind === 'CREDENTIAL_PROVISIONED' ? answer.payload.credential_name : null,
    how: answer?.kind === 'CREDENTIAL_PROVISIONED' ? answer.payload.how : null,
    decided_by:
      answer?.kind === 'CREDENTIAL_PROVISIONED' || answer?.kind === 'CREDENTIAL_REQUEST_DECLINED'
        ? actorLabel(answer.payload.actor)
        : null,
    reason: answer?.kind === 'CREDENTIAL_REQUEST_DECLINED' ? (answer.payload.reason ?? null) : null,
  };
}

/** The form's prefill: a configured route's credential name, injection and host; else the agent's own hints. */
function suggestion(
  details: EventPayload<'CREDENTIAL_REQUESTED'> | undefined,
  config: PosternConfig,
): CredentialRequestCard['suggested'] {
  const hinted = { kind: details?.kind ?? null, header: details?.header ?? null };
  if (details === undefined) return { name: null, ...hinted, bindings: [] };
  if ('host' in details.for) return { name: null, ...hinted, bindings: [details.for.host] };
  const route = config.routes.get(details.for.route);
  if (route === undefined) return { name: null, ...hinted, bindings: [details.for.route] };
  const host = hostOf(route.base_url);
  return {
    name: route.credential,
    // An oauth2 route's credential is the client it fetches tokens with.
    kind: hinted.kind ?? (route.injection === 'oauth2_client_credentials' ? 'oauth2_client' : route.injection),
    header: hinted.header,
    bindings: host === undefined ? [route.name] : [route.name, host],
  };
}

function hostOf(baseUrl: string): string | undefined {
  try {
    return new URL(baseUrl).hostname.replace(/^\[(.*)\]$/, '$1');
  } catch {
    return undefined;
  }
}
