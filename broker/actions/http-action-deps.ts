/**
 * What every HTTP step shares: the executor's dependencies, its answer, and an admitted request bound to its route.
 * Its own module so the attempt steps (http-steps.ts) and the record → answer steps (http-record.ts) both import it and
 * neither imports the other back.
 */
import type { BoundCredential } from './credential-binding.js';
import type { Logger } from 'pino';
import type { HttpChannel } from '../channels/http/index.js';
import type { PosternConfig, Route } from '../config/index.js';
import type { Envelope, IdempotencyKeyBinding } from '../contract/index.js';
import type { Journal, RequestStore, ResultStore } from '../journal/index.js';
import type { Clock, CredentialVault, IdSource } from '../ports/index.js';
import type { DispatchQueue } from '../queue/approval-queue.js';
import type { NormalizedHttpRequest } from './http-action-request.js';
import type { HttpActionResponse } from './delivered-response.js';
import type { RetryEngineDeps } from './retry-engine.js';

export interface HttpActionDeps extends Omit<RetryEngineDeps, 'journal' | 'clock' | 'logger'> {
  readonly ids: IdSource;
  readonly clock: Clock;
  readonly journal: Journal;
  readonly results: ResultStore;
  readonly vault: CredentialVault;
  readonly config: PosternConfig;
  readonly channel: HttpChannel;
  readonly logger?: Logger;
  readonly sessionId?: string;
  /** Lanes and approvals: every admitted action waits here for its turn (approval none included). */
  readonly queue: DispatchQueue;
  /** Called once ACTION_ACCEPTED is durable (the agent backend needs the id to stop waiting). */
  readonly onAdmitted?: (actionId: string) => void;
  /**
   * The route's lookup for an action whose key window passed (automation, no person): the retry
   * engine asks it instead of resending. Wired by the runtime to the reconciler; absent in tests
   * that do not reconcile.
   */
  readonly reconcile?: (actionId: string) => Promise<void>;
  /**
   * Where the agent's request is kept, sealed by the vault, for a person's same-key retry (routes
   * with an idempotency contract and a retry policy only). Absent: nothing is kept.
   */
  readonly requests?: RequestStore;
}

export type { HttpActionResponse } from './delivered-response.js';

export interface HttpActionResult {
  readonly envelope: Envelope;
  /** A complete, settled response (also stored under envelope.evidence.result_id). */
  readonly response?: HttpActionResponse;
  /** An incomplete response's first bytes: a marked diagnostic, never a result. */
  readonly diagnostic?: {
    readonly kind: 'incomplete_response_partial_body';
    readonly status: number;
    readonly body: Buffer;
  };
}

/** An admitted request bound to its route, fingerprint and key: what every attempt of the action sends. */
export interface Bound {
  actionId: string;
  route: Route;
  request: NormalizedHttpRequest;
  fingerprint: string;
  idempotent: boolean;
  /** base path + normalized request path. */
  path: string;
  /** The idempotency key as journaled before dispatch (a declared contract and a key only). */
  binding: IdempotencyKeyBinding | undefined;
  /** The operation deadline the channel enforces (the route's timeout_ms). */
  timeoutMs: number;
  /** The credential (id + version) bound at admission (ACTION_ACCEPTED.credential); absent: none was known. */
  credential?: BoundCredential | undefined;
}
