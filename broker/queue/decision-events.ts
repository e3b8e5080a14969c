import type { Actor, Classification } from '../contract/index.js';
import { classifyOutcome, type LocalGate } from '../core/index.js';

/**
 * Classifications of the queue's closing decisions, all from broker/core: a closure before
 * dispatch is provably not_attempted. An expiry is never a person's denial; a caller's cancel is a
 * caller event; a person's cancel is a withdrawn approval.
 */
export function gateClassification(kind: Exclude<LocalGate['kind'], 'validation'>): Classification {
  return classifyOutcome({
    channel: 'http',
    gate: { kind } as LocalGate,
    dispatchStarted: false,
    handedToTransport: false,
    requestComplete: false,
    idempotent: false,
  });
}

export function callerClassification(stop: 'cancelled' | 'disconnected'): Classification {
  return classifyOutcome({
    channel: 'http',
    caller: stop,
    dispatchStarted: false,
    handedToTransport: false,
    requestComplete: false,
    idempotent: false,
  });
}

export const brokerActor = (id: string): Actor => ({ kind: 'broker', id });
export const sessionPolicyActor = (sessionId: string): Actor => ({ kind: 'policy', id: `session:${sessionId}` });
export const observePolicyActor: Actor = { kind: 'policy', id: 'observe' };
