import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { actionPathNames, actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { decisionEventKinds, decisionFacts, sealedDecisionFacts } from './call-waits.js';

let temp: TempJournal;
beforeEach(async () => {
  temp = await openTempJournal();
});
afterEach(() => temp.dispose());

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
    const scripts: Array<[string, NewEvent[]]> = [
      ...actionPathNames.map((name): [string, NewEvent[]] => [`act_${name}`, actionPaths[name](`act_${name}`)]),
      ['act_cardClosedByRestart', cardClosedByRestart('act_cardClosedByRestart')],
    ];
    const told = new Set<string>();
    for (const [id, events] of scripts) {
      for (const event of events) {
        temp.clock.advance(1_000);
        await temp.journal.append(event);
      }
      const kinds = temp.journal.subjectKinds(id);
      if (![...decisionEventKinds].some((k) => kinds.has(k))) continue;
      const state = temp.journal.getAction(id);
      if (state === undefined) throw new Error(`${id} not projected`);
      const oracle = decisionFacts(temp.journal.subjectEvents(id));
      const sealed = sealedDecisionFacts(state, kinds, temp.journal.getActionTimeline(id));
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
        ...(oracle.closed_code === undefined ? {} : { closed_code: oracle.closed_code }),
        ...(oracle.closed_at_ms === undefined ? {} : { closed_at_ms: oracle.closed_at_ms }),
        sealed: true,
      });
    }
    expect([...told].sort()).toEqual(['approved', 'cancelled', 'closed', 'expired', 'rejected']);
  });
});
