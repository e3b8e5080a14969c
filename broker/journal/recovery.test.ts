import { describe, expect, it } from 'vitest';
import type { ActionState, JournalEvent, NewEvent } from '../contract/index.js';
import { applyEvent, project } from '../core/index.js';
import { actionPathNames, actionPaths } from '../testing/action-paths.js';
import { recoveryEvent } from './recovery.js';

const id = 'act_recovery_0001';

function stamped(events: readonly NewEvent[]): JournalEvent[] {
  return events.map(
    (e, i) => ({ ...e, seq: i + 1, at_ms: 1_000 + i, session_id: null, ticket: 1, lane: null }) as JournalEvent,
  );
}

function stateAfter(events: readonly NewEvent[]): ActionState {
  const state = project(stamped(events)).get(id);
  if (state === undefined) throw new Error('no state');
  return state;
}

function prefix(name: keyof typeof actionPaths, kindsKept: number): NewEvent[] {
  return actionPaths[name](id).slice(0, kindsKept);
}

describe('when the broker restarts before DISPATCH_STARTED', () => {
  it.each([
    ['only accepted', prefix('httpApproved', 1), 'validation'],
    ['validated', prefix('httpApproved', 2), 'credential_injection'],
    ['approved, waiting', prefix('httpApproved', 4), 'credential_injection'],
    ['credential authorized', prefix('httpApproved', 5), 'credential_injection'],
    ['a setup attempt failed, nothing recorded', prefix('setupFailedThenSent', 4), 'connection_setup'],
  ] as const)('records not_attempted when %s', (_name, events, phase) => {
    expect(recoveryEvent(stateAfter(events))).toMatchObject({
      kind: 'OUTCOME_RECORDED',
      classification: {
        phase,
        outcome: 'not_attempted',
        retry: 'backoff',
        code: 'BROKER_RESTARTED',
        effect: 'no_effect',
        outcome_basis: 'broker_restart_before_dispatch',
        source: 'local_gate',
      },
    });
  });
});

describe('when the broker restarts after DISPATCH_STARTED with nothing classified', () => {
  it.each([
    ['just dispatched', prefix('httpApproved', 6)],
    ['response complete, result not committed', prefix('httpApproved', 9)],
    ['a retry dispatched after a setup failure', prefix('setupFailedThenSent', 8)],
  ])('records unknown, never not_attempted, when %s', (_name, events) => {
    const state = stateAfter(events);
    const event = recoveryEvent(state);
    expect(event).toMatchObject({
      payload: { attempt: state.attempts.at(-1)?.n },
      classification: {
        phase: 'remote_execution',
        outcome: 'unknown',
        code: 'BROKER_RESTARTED',
        effect: 'unknown_effect',
        outcome_basis: 'broker_restart_after_dispatch',
        source: 'transport_observed',
      },
    });
  });

  it('says reconcile for an operation not known to be idempotent, backoff for one that is', () => {
    expect(recoveryEvent(stateAfter(prefix('httpApproved', 6)))?.classification?.retry).toBe('reconcile');
    expect(recoveryEvent(stateAfter(prefix('deadlineInFlight', 6)))?.classification?.retry).toBe('backoff');
  });

  it('says same_idempotency_key while the bound key is within its earliest safe expiry at restart, reconcile once it passed or without a clock', () => {
    const keyed = { ...stateAfter(prefix('httpApproved', 6)), key_expires_at_ms: 50_000 };
    expect(recoveryEvent(keyed, 49_999)?.classification?.retry).toBe('same_idempotency_key');
    expect(recoveryEvent(keyed, 50_000)?.classification?.retry).toBe('reconcile');
    expect(recoveryEvent(keyed)?.classification?.retry).toBe('reconcile');
  });
});

describe('when the action is already classified', () => {
  it.each([
    ['committed', prefix('httpApproved', 10)],
    ['delivered', prefix('httpApproved', 11)],
    ['rejected by a person', prefix('rejectedByPerson', 4)],
    ['not_attempted with backoff after a setup failure', prefix('setupFailedThenSent', 5)],
    ['unknown, recorded', prefix('lostThenReconciled', 7)],
    ['preflight failed', prefix('preflightFailed', 2)],
  ])('leaves it alone when %s', (_name, events) => {
    expect(recoveryEvent(stateAfter(events))).toBeUndefined();
  });
});

describe('when every prefix of every scripted path is interrupted', () => {
  it('recovery always produces a record the projection accepts, and never not_attempted after dispatch', () => {
    let recovered = 0;
    for (const name of actionPathNames) {
      const path = actionPaths[name](id);
      for (let n = 1; n <= path.length; n += 1) {
        const events = stamped(path.slice(0, n));
        const state = stateAfter(path.slice(0, n));
        const event = recoveryEvent(state);
        if (event === undefined) continue;
        recovered += 1;
        const after = applyEvent(state, {
          ...event,
          seq: events.length + 1,
          at_ms: 9_999,
          session_id: null,
          ticket: 1,
          lane: null,
        } as JournalEvent);
        expect(after.recorded).toBe(true);
        if (state.dispatch_seq !== null) expect(after.outcome).toBe('unknown');
        else expect(after.outcome).toBe('not_attempted');
        expect(recoveryEvent(after)).toBeUndefined();
      }
    }
    expect(recovered).toBeGreaterThan(30);
  });
});

describe('when every prefix of every scripted path is interrupted in a journal the start found quarantined', () => {
  it('recovery never says not_attempted, and the projection accepts every record', () => {
    let undispatched = 0;
    for (const name of actionPathNames) {
      const path = actionPaths[name](id);
      for (let n = 1; n <= path.length; n += 1) {
        const state = stateAfter(path.slice(0, n));
        const event = recoveryEvent(state, 5_000, 'quarantined');
        if (event === undefined) {
          expect(recoveryEvent(state, 5_000)).toBeUndefined();
          continue;
        }
        if (state.dispatch_seq === null) undispatched += 1;
        else expect(event).toEqual(recoveryEvent(state, 5_000));
        const after = applyEvent(state, {
          ...event,
          seq: n + 1,
          at_ms: 9_999,
          session_id: null,
          ticket: 1,
          lane: null,
        } as JournalEvent);
        expect(after).toMatchObject({ recorded: true, outcome: 'unknown', effect: 'unknown_effect' });
        expect(recoveryEvent(after, 5_000, 'quarantined')).toBeUndefined();
      }
    }
    expect(undispatched).toBeGreaterThan(10);
  });
});
