import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ActionState, AgentDecision, NewEvent } from '../contract/index.js';
import { attestClassification } from '../core/index.js';
import { Journal, recoveryEvent } from '../journal/index.js';
import { actionPathNames, actionPaths, reconciledByLookup } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { decisionEventKinds, decisionFacts, sealedClosingHeadersMax, sealedDecisionFacts } from './call-waits.js';

let temp: TempJournal;
beforeEach(async () => {
  temp = await openTempJournal();
});
afterEach(() => temp.dispose());

/** A step of a script: an event, or one worded from the action's record as it stands (recovery's). */
type Step = NewEvent | ((state: ActionState) => NewEvent);

/** Appends an action's steps to the temp journal, a second apart. */
async function appendSteps(id: string, steps: readonly Step[]): Promise<void> {
  for (const step of steps) {
    temp.clock.advance(1_000);
    if (typeof step !== 'function') {
      await temp.journal.append(step);
      continue;
    }
    const state = temp.journal.getAction(id);
    if (state === undefined) throw new Error(`${id} not projected`);
    await temp.journal.append(step(state));
  }
}

/** Closes the temp journal, locks the vault and opens the file again: the earlier run's events are sealed now. */
async function reopenLocked(): Promise<Journal> {
  await temp.journal.close();
  temp.vault.lock();
  temp.clock.advance(1_000);
  return Journal.open({ path: temp.path, clock: temp.clock, vault: temp.vault });
}

/** The sealed reading of an action's decision, from what the journal reads without the vault (its events refused). */
function readSealed(journal: Journal, id: string): { state: ActionState; sealed: AgentDecision | undefined } {
  const state = journal.getAction(id);
  if (state === undefined) throw new Error(`${id} not projected`);
  expect(() => journal.subjectEvents(id), id).toThrow(expect.objectContaining({ code: 'AUDIT_KEY_UNAVAILABLE' }));
  const sealed = sealedDecisionFacts(
    state,
    journal.subjectKinds(id),
    journal.getActionTimeline(id),
    journal.classifiedHeaders(id, sealedClosingHeadersMax),
  );
  return { state, sealed };
}

/** A card shown and still waiting: nobody decided, nothing closed it. */
function cardWaiting(id: string): NewEvent[] {
  const [accepted, validated, card] = actionPaths.expired(id);
  if (accepted === undefined || validated === undefined || card?.kind !== 'CARD_SHOWN') throw new Error('path changed');
  return [accepted, validated, card];
}

/** What recovery records at a start for an action the previous run left open (the broker's own recoveryEvent). */
function recoveredIn(journal: 'trusted' | 'quarantined'): (state: ActionState) => NewEvent {
  return (state) => {
    const event = recoveryEvent(state, undefined, journal);
    if (event === undefined) throw new Error(`recovery has nothing to record for ${state.action_id}`);
    return event;
  };
}

/**
 * A waiting card that recovery in a quarantined journal closed (unknown, BROKER_RESTARTED: the record may lack a later
 * dispatch), then settled by `settlement` — a person's attestation or a lookup's answer — which records its own code.
 */
function cardClosedInQuarantineThen(id: string, settlement: 'attested' | 'reconciled'): Step[] {
  return [
    ...cardWaiting(id),
    recoveredIn('quarantined'),
    settlement === 'attested'
      ? {
          kind: 'OPERATOR_ATTESTED',
          action_id: id,
          payload: { actor: { kind: 'person', id: 'operator-1' }, basis: 'checked the target: it refused the change' },
          classification: attestClassification('rejected', 'rejected'),
        }
      : reconciledByLookup(id, 'act_lookup_0002'),
  ];
}

/** A card the broker's restart closed while it waited (recovery's BROKER_RESTARTED), nobody having decided. */
function cardClosedByRestart(id: string): NewEvent[] {
  const [accepted, validated, card] = actionPaths.expired(id);
  if (accepted === undefined || validated === undefined || card?.kind !== 'CARD_SHOWN') throw new Error('path changed');
  return [
    accepted,
    validated,
    card,
    {
      kind: 'OUTCOME_RECORDED',
      action_id: id,
      payload: {},
      classification: {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        retry: 'backoff',
        code: 'BROKER_RESTARTED',
        effect: 'no_effect',
        outcome_basis: 'broker_restarted_before_dispatch',
        source: 'local_gate',
      },
    },
  ];
}

describe('sealedDecisionFacts: the decision as the plaintext current-state table tells it', () => {
  it('agrees with the events on every path on what it tells, and leaves who, why and the expiry to the sealed events', async () => {
    const scripts: Array<[string, Step[]]> = [
      ...actionPathNames.map((name): [string, Step[]] => [`act_${name}`, actionPaths[name](`act_${name}`)]),
      ['act_cardClosedByRestart', cardClosedByRestart('act_cardClosedByRestart')],
      ['act_cardWaiting', cardWaiting('act_cardWaiting')],
      ['act_cardClosedThenAttested', cardClosedInQuarantineThen('act_cardClosedThenAttested', 'attested')],
      ['act_cardClosedThenReconciled', cardClosedInQuarantineThen('act_cardClosedThenReconciled', 'reconciled')],
    ];
    // A later classification replaced the closing outcome's code in the record: that code is sealed, never told.
    const closingCodeSealed = new Set(['act_cardClosedThenAttested', 'act_cardClosedThenReconciled']);
    const told = new Set<string>();
    for (const [id, steps] of scripts) {
      await appendSteps(id, steps);
      const kinds = temp.journal.subjectKinds(id);
      if (![...decisionEventKinds].some((k) => kinds.has(k))) continue;
      const state = temp.journal.getAction(id);
      if (state === undefined) throw new Error(`${id} not projected`);
      const oracle = decisionFacts(temp.journal.subjectEvents(id));
      const sealed = sealedDecisionFacts(
        state,
        kinds,
        temp.journal.getActionTimeline(id),
        temp.journal.classifiedHeaders(id, sealedClosingHeadersMax),
      );
      if (oracle === undefined) {
        expect(sealed, id).toBeUndefined();
        continue;
      }
      told.add(oracle.state);
      expect(sealed, id).toEqual({
        state: oracle.state,
        by: oracle.state === 'expired' ? oracle.by : null,
        reason: null,
        decided_at_ms: oracle.decided_at_ms,
        expires_at_ms: null,
        ...(oracle.closed_code === undefined || closingCodeSealed.has(id) ? {} : { closed_code: oracle.closed_code }),
        ...(oracle.closed_at_ms === undefined ? {} : { closed_at_ms: oracle.closed_at_ms }),
        sealed: true,
      });
    }
    expect([...told].sort()).toEqual(['approved', 'cancelled', 'closed', 'expired', 'rejected', 'waiting']);
  });

  it('after a restart with the vault locked: a card closed then settled tells no code as the closing one; one the restart closed tells its code', async () => {
    await appendSteps('act_attested', cardClosedInQuarantineThen('act_attested', 'attested'));
    await appendSteps('act_reconciled', cardClosedInQuarantineThen('act_reconciled', 'reconciled'));
    // Left waiting: this restart's recovery closes it (BROKER_RESTARTED, in the new run).
    await appendSteps('act_waiting', cardWaiting('act_waiting'));
    const journal = await reopenLocked();
    try {
      const locked = new Map(
        ['act_attested', 'act_reconciled', 'act_waiting'].map((id) => [id, readSealed(journal, id)]),
      );
      // The plaintext record holds the settlement's code now, not the one that closed the card.
      expect(locked.get('act_attested')?.state.code).toBe('ATTESTED_REJECTED');
      expect(locked.get('act_reconciled')?.state.code).toBeNull();
      temp.vault.unlock();
      for (const [id, { sealed }] of locked) {
        const oracle = decisionFacts(journal.subjectEvents(id));
        expect(oracle, id).toMatchObject({ state: 'closed', closed_code: 'BROKER_RESTARTED' });
        expect(sealed, id).toEqual({
          state: 'closed',
          by: null,
          reason: null,
          decided_at_ms: null,
          expires_at_ms: null,
          ...(id === 'act_waiting' ? { closed_code: 'BROKER_RESTARTED' } : {}),
          closed_at_ms: oracle?.closed_at_ms,
          sealed: true,
        });
      }
    } finally {
      await journal.close();
    }
  });

  it('a row migration 010 filled (settled_at_ms: its latest settling event): closed_at_ms is the closing outcome’s own time', async () => {
    await appendSteps('act_attested', cardClosedInQuarantineThen('act_attested', 'attested'));
    await temp.journal.close();
    // The row as migration 010 filled a row it found: settled_at_ms the wall time of the action's latest event of a
    // kind that may carry a classification — here the attestation, a second after the outcome that closed the card.
    const db = new Database(temp.path);
    try {
      db.prepare(
        `UPDATE actions SET settled_at_ms = (SELECT at_ms FROM events e WHERE e.action_id = actions.action_id
          AND e.kind IN ('OUTCOME_RECORDED', 'RECONCILIATION_RESULT', 'OPERATOR_ATTESTED') ORDER BY seq DESC LIMIT 1)
        WHERE action_id = 'act_attested'`,
      ).run();
    } finally {
      db.close();
    }
    const journal = await reopenLocked();
    try {
      const { sealed } = readSealed(journal, 'act_attested');
      const settledAt = journal.getActionTimeline('act_attested')?.settled_at_ms;
      temp.vault.unlock();
      const oracle = decisionFacts(journal.subjectEvents('act_attested'));
      expect(oracle?.closed_at_ms).toBeDefined();
      expect(settledAt).toBe((oracle?.closed_at_ms ?? 0) + 1_000);
      expect(sealed?.closed_at_ms).toBe(oracle?.closed_at_ms);
    } finally {
      await journal.close();
    }
  });
});
