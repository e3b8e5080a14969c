import type { Logger } from 'pino';
import type { Route } from '../config/index.js';
import { CodedError, isCodedError, unknownWaysOut } from '../contract/index.js';
import type { Journal, KeptRequest, RequestStore } from '../journal/index.js';
import type { Clock, CredentialVault } from '../ports/index.js';
import type { InternalHttpRequest } from './http-action-request.js';

/**
 * A kept request: the agent's request, sealed by the vault, for a person's same-key retry of an unknown action
 * (routes with an idempotency contract and a retry policy only). The HTTP executor keeps it at admission, drops
 * it once the action settled, and retryKeptRequest reads it back.
 */
export interface KeptRequestDeps {
  readonly clock: Clock;
  readonly journal: Journal;
  readonly vault: CredentialVault;
  readonly logger?: Logger;
  /** Absent: nothing is kept. */
  readonly requests?: RequestStore;
}

/** The purpose a kept request is sealed under: bound to its action, so a row cannot be replayed as another's. */
function keptRequestPurpose(actionId: string): string {
  return `postern.kept-request.v1:${actionId}`;
}

/**
 * Keeps the agent's request (as it sent it: no credential is in it yet) sealed by the vault until
 * the key's earliest safe expiry, so a person can retry it with the same key after the call ended.
 * Best effort: a locked vault or a full disk loses only that convenience, never the action.
 */
export async function keepRequest(
  deps: KeptRequestDeps,
  actionId: string,
  route: Route,
  request: InternalHttpRequest,
  expiresAtMs: number,
): Promise<boolean> {
  if (deps.requests === undefined || deps.vault.state() !== 'unlocked') return false;
  try {
    const { body, ...rest } = request;
    const plain = Buffer.from(
      JSON.stringify({ ...rest, ...(body === undefined ? {} : { body_base64: Buffer.from(body).toString('base64') }) }),
    );
    const sealed = deps.vault.wrap(keptRequestPurpose(actionId), plain);
    plain.fill(0);
    // Written through the journal's writer thread while it runs (RequestStore), never its write lock on the loop.
    await deps.requests.keep({
      action_id: actionId,
      route: route.name,
      sealed,
      kept_at_ms: deps.clock.nowMs(),
      expires_at_ms: expiresAtMs,
    });
    return true;
  } catch (error) {
    deps.logger?.warn(
      { action_id: actionId, code: isCodedError(error) ? error.code : 'INTERNAL' },
      'request not kept for a person retry',
    );
    return false;
  }
}

/**
 * The kept request of an action, unsealed. NOT_FOUND when nothing was kept (no contract or retry policy on the
 * route, the key's window passed, or already settled).
 */
export function readKeptRequest(deps: KeptRequestDeps, actionId: string): InternalHttpRequest {
  const kept = requireKeptRequest(deps, actionId);
  const plain = deps.vault.unwrap(keptRequestPurpose(actionId), kept.sealed);
  try {
    // Written by keepRequest from an InternalHttpRequest, sealed and bound to this action: read back as one.
    const { body_base64: body, ...rest } = JSON.parse(Buffer.from(plain).toString('utf8')) as Omit<
      InternalHttpRequest,
      'body'
    > & { body_base64?: string };
    return { ...rest, ...(typeof body === 'string' ? { body: new Uint8Array(Buffer.from(body, 'base64')) } : {}) };
  } finally {
    plain.fill(0);
  }
}

/**
 * The kept request, still sealed, or the refusal a person's retry gets without one. Opens nothing: the operator's
 * `actions.precheck` asks it before the CLI asks a person for the passphrase. An SSH command or an MCP tool call is
 * never resent (no protocol key to retry under: DESIGN §3), so a retry of one is UNSUPPORTED_ACTION; an HTTP action
 * with nothing kept is NOT_FOUND. Either names what a person can do instead when the action's outcome is unknown
 * (with `journal`: the record says so).
 */
export function requireKeptRequest(
  deps: Pick<KeptRequestDeps, 'requests' | 'clock'> & { readonly journal?: Pick<Journal, 'getAction'> },
  actionId: string,
): KeptRequest {
  const state = deps.journal?.getAction(actionId);
  const waysOut = state?.recorded === true && state.outcome === 'unknown' ? `; ${unknownWaysOut(state)}` : '';
  if (state !== undefined && state.channel !== 'http') {
    const what = state.channel === 'ssh' ? 'an SSH command' : 'an MCP tool call';
    throw new CodedError(
      'UNSUPPORTED_ACTION',
      `${actionId} is ${what}: a person's retry resends a kept HTTP request, and ${what} is never resent (no protocol key to retry under)${waysOut}`,
      { field: 'action_id' },
    );
  }
  const kept = deps.requests?.read(actionId, deps.clock.nowMs());
  if (kept === undefined) {
    throw new CodedError(
      'NOT_FOUND',
      `no kept request for ${actionId}: only an unknown action on a route with an idempotency contract and a retry policy, inside its key's window, can be retried by a person${waysOut}`,
      { field: 'action_id' },
    );
  }
  return kept;
}

/**
 * A settled action (or one that never left) needs no kept request any more: answered once it is dropped. A drop that
 * fails (the store closed as the broker stops, a refused write) never replaces the action's result with an error: the
 * action is settled and its answer says so; the row stays until its key's window ends (the purge's dropExpired).
 */
export async function dropWhenSettled<T>(deps: KeptRequestDeps, actionId: string, result: T): Promise<T> {
  if (deps.requests !== undefined && deps.journal.getAction(actionId)?.outcome !== 'unknown') {
    try {
      await deps.requests.drop(actionId);
    } catch (error) {
      deps.logger?.warn(
        { action_id: actionId, code: isCodedError(error) ? error.code : 'INTERNAL' },
        'kept request not dropped; it expires with its key window',
      );
    }
  }
  return result;
}
