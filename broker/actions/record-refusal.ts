import type { Logger } from 'pino';
import {
  errorCodeMeanings,
  isCodedError,
  type ActionState,
  type Channel,
  type Classification,
  type EventPayload,
  type NewEvent,
} from '../contract/index.js';
import { classifyOutcome, type LocalGate } from '../core/index.js';
import { stateClassification } from './state-envelope.js';
import type { PosternConfig } from '../config/index.js';
import type { AppendOptions, Journal, ResultInput, ResultStore } from '../journal/index.js';
import type { Clock, CredentialVault, IdSource } from '../ports/index.js';
import type { DispatchQueue } from '../queue/approval-queue.js';

/** Appends one event and returns the action's state after it (its seq is the envelope's journal_seq). */
export async function appendState(journal: Journal, event: NewEvent, options?: AppendOptions): Promise<ActionState> {
  return (await journal.append(event, undefined, options)).state;
}

/**
 * Article 000's order, in one transaction: the retrievable result (sealed now) and the RESULT_COMMITTED naming it are
 * written and synced together, so the event never names a result that is not durable. The channel's observations
 * still held for this action ride in the same commit, and one refused refuses this (AppendOptions.withHeld).
 */
export async function appendResultCommitted(
  deps: { readonly journal: Journal; readonly results: ResultStore },
  result: ResultInput,
  event: NewEvent,
): Promise<ActionState> {
  return (await deps.journal.append(event, deps.results.rowsOf(result), { withHeld: true })).state;
}

/** What an executor of any channel runs on, beside its channel (execute-ssh-action.ts, execute-mcp-action.ts). */
export interface ExecutorDeps extends AdmissionDeps {
  readonly ids: IdSource;
  readonly clock: Clock;
  readonly results: ResultStore;
  readonly vault: CredentialVault;
  readonly config: PosternConfig;
  readonly logger?: Logger;
  /** Lanes and approvals: every admitted action waits here for its turn (approval none included). */
  readonly queue: DispatchQueue;
}

/** What admission knows of the caller, for every channel. */
export interface AdmissionDeps {
  readonly journal: Journal;
  readonly sessionId?: string;
  /** Told the action id once ACTION_ACCEPTED is durable (the agent backend answers from the record after that). */
  readonly onAdmitted?: (actionId: string) => void;
}

/** The ACTION_ACCEPTED event of an action: ticket assigned by the journal, session and lane from the caller. */
export function acceptedEvent(
  deps: AdmissionDeps,
  actionId: string,
  lane: string | null,
  payload: EventPayload<'ACTION_ACCEPTED'>,
): NewEvent {
  return { kind: 'ACTION_ACCEPTED', action_id: actionId, session_id: deps.sessionId ?? null, lane, payload };
}

/** Makes the admission durable on its own (a refusal follows), then says the action exists. */
export async function recordAccepted(deps: AdmissionDeps, event: NewEvent): Promise<void> {
  await appendState(deps.journal, event);
  deps.onAdmitted?.(event.action_id);
}

/**
 * Records a pre-dispatch refusal, the same for every channel: PREFLIGHT_FAILED while the action is
 * still at admission and the gate is validation, else OUTCOME_RECORDED. The classification is the
 * core's for that gate (always not_attempted).
 */
export async function recordRefusal(
  journal: Journal,
  channel: Channel,
  actionId: string,
  gate: LocalGate,
): Promise<{ state: ActionState; classification: Classification; field: string | undefined }> {
  const classification = classifyOutcome({
    channel,
    gate,
    dispatchStarted: false,
    handedToTransport: false,
    requestComplete: false,
    idempotent: false,
  });
  const stage = journal.getAction(actionId)?.stage;
  const field = gate.kind === 'validation' ? gate.field : undefined;
  const state =
    stage === 'accepted' && gate.kind === 'validation'
      ? await appendState(journal, {
          kind: 'PREFLIGHT_FAILED',
          action_id: actionId,
          payload: field === undefined ? {} : { field: field.slice(0, 256) },
          classification,
        })
      : await appendState(journal, { kind: 'OUTCOME_RECORDED', action_id: actionId, payload: {}, classification });
  return { state, classification, field };
}

/** What every channel's envelope builder takes for an answer from the record rather than from an attempt's report. */
export interface RecordedFacts {
  readonly state: ActionState;
  readonly classification: Classification;
  readonly message: string;
  readonly field?: string;
  readonly fingerprint: string;
}

/** A ticket the queue closed (rejected, expired, cancelled, session revoked): its recorded classification. */
export function closedFacts(state: ActionState, fingerprint: string): RecordedFacts {
  const classification = stateClassification(state);
  if (classification === undefined)
    throw new Error(`closedEnvelope: ${state.action_id} has no recorded classification`);
  const message = classification.code === null ? '' : errorCodeMeanings[classification.code];
  return { state, classification, message, fingerprint };
}

/** A pre-dispatch refusal recorded (recordRefusal) and logged, as the facts its envelope is built from. */
export async function refusalFacts(
  deps: { readonly journal: Journal; readonly logger?: Logger | undefined },
  channel: Channel,
  actionId: string,
  refusal: { gate: LocalGate; message: string; fingerprint: string },
): Promise<RecordedFacts> {
  const { state, classification, field } = await recordRefusal(deps.journal, channel, actionId, refusal.gate);
  logRecorded(deps.logger, { action_id: actionId }, classification, `${channel} action recorded`);
  const facts = { state, classification, message: refusal.message, fingerprint: refusal.fingerprint };
  return field === undefined ? facts : { ...facts, field };
}

/** The vault's own refusals (locked, unknown name, missing secret) as a gate; undefined for anything else. */
export function vaultRefusal(error: unknown, field: string): { gate: LocalGate; message: string } | undefined {
  if (!isCodedError(error)) return undefined;
  if (error.code === 'VAULT_LOCKED') return { gate: { kind: 'vault_locked' }, message: errorCodeMeanings[error.code] };
  if (error.code === 'CREDENTIAL_MISSING')
    return { gate: { kind: 'credential_missing' }, message: errorCodeMeanings[error.code] };
  if (error.code === 'UNKNOWN_CREDENTIAL')
    return { gate: { kind: 'validation', code: 'UNKNOWN_CREDENTIAL', field }, message: errorCodeMeanings[error.code] };
  return undefined;
}

/** One log line per recorded classification: only ids and closed-set values, never targets or secrets. */
export function logRecorded(
  logger: Logger | undefined,
  fields: Record<string, string | undefined>,
  c: Classification,
  message: string,
): void {
  logger?.info(
    {
      ...fields,
      phase: c.phase,
      outcome: c.outcome,
      retry: c.retry,
      code: c.code,
      effect: c.effect,
      basis: c.outcome_basis,
    },
    message,
  );
}

/** A caller that cancelled is recorded as a caller event, at the stage it reached; it never decides the effect. */
export async function recordCallerCancelled(
  journal: Journal,
  actionId: string,
  dispatchStarted: boolean,
): Promise<void> {
  const stage = dispatchStarted ? 'remote_execution' : 'connection_setup';
  await appendState(journal, { kind: 'CALLER_CANCELLED', action_id: actionId, payload: { stage } });
}

/**
 * Settles a channel's only attempt (SSH, MCP): with a result, the retrievable result and RESULT_COMMITTED naming
 * it in one transaction (appendResultCommitted); without one, OUTCOME_RECORDED (naming the attempt if there was one).
 */
export async function settleOnlyAttempt(
  deps: { readonly journal: Journal; readonly results: ResultStore },
  actionId: string,
  classification: Classification,
  settled: { result: Omit<ResultInput, 'result_id' | 'action_id' | 'attempt'> } | { attempted: boolean },
): Promise<{ state: ActionState; resultId?: string }> {
  if ('attempted' in settled) {
    const state = await appendState(
      deps.journal,
      {
        kind: 'OUTCOME_RECORDED',
        action_id: actionId,
        payload: settled.attempted ? { attempt: 1 } : {},
        classification,
      },
      // The observations the channel still holds ride in this commit (settle.ts), as with a result.
      { withHeld: true },
    );
    return { state };
  }
  const resultId = `res_${actionId.slice(4)}_1`;
  const state = await appendResultCommitted(
    deps,
    { ...settled.result, result_id: resultId, action_id: actionId, attempt: 1 },
    {
      kind: 'RESULT_COMMITTED',
      action_id: actionId,
      payload: { attempt: 1, result_id: resultId, result_digest: settled.result.digest },
      classification,
    },
  );
  return { state, resultId };
}
