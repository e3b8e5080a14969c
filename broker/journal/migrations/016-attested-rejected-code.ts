import type { Migration } from '../migration.js';

/** The rows this step recodes: a person's attested rejection, recorded under the remote's code. */
const attestedAsRemote = `source = 'operator_attested' AND code = 'REMOTE_REJECTED'`;

/** Those rows per counter key of migration 011 ('' for null), code aside (it is the key part that moves). */
const rateKeyOf = `coalesce(phase, '') AS phase, coalesce(outcome, '') AS outcome, coalesce(decision, '') AS decision,
  dispatch_seq IS NOT NULL AS dispatched`;
const countersMoved = (code: string, sign: string): string => `
  INSERT INTO action_counters (phase, outcome, decision, dispatched, in_flight, code, n)
  SELECT ${rateKeyOf}, recorded = 0 AND (outcome IS NULL OR dispatch_seq IS NOT NULL) AS in_flight, '${code}',
    ${sign}count(*)
  FROM actions WHERE ${attestedAsRemote} GROUP BY 1, 2, 3, 4, 5
  ON CONFLICT (phase, outcome, code, decision, dispatched, in_flight) DO UPDATE SET n = n + excluded.n;`;
const minutesOf = `(SELECT updated_at_ms / 60000 AS minute, ${rateKeyOf}, count(*) AS n
  FROM actions WHERE ${attestedAsRemote} GROUP BY 1, 2, 3, 4, 5) AS a`;
const sameMinuteKey = `o.code = 'REMOTE_REJECTED' AND o.n > 0 AND o.minute = a.minute AND o.phase = a.phase
  AND o.outcome = a.outcome AND o.decision = a.decision AND o.dispatched = a.dispatched`;

/**
 * An attested rejection is coded ATTESTED_REJECTED (101f91b): REMOTE_REJECTED means the remote returned a complete,
 * authoritative refusal, and an attestation is a person's word. A broker before that code recorded REMOTE_REJECTED, so
 * action_status, `actions show`, `actions list --code` and `metrics` said the remote refused. The fold reads such an
 * attestation as ATTESTED_REJECTED (broker/core/project.ts recordedCode: the same test on the same two fields, source
 * and code); this step brings the stored current state to what the fold says. The events, sealed and hash-chained,
 * stay as written.
 *
 * Plaintext only (no key is at hand while migrating): the `code` column, the state JSON's `code` (the only place the
 * state holds it; attempts carry none), and migration 011's counters, moved from the REMOTE_REJECTED key to the
 * ATTESTED_REJECTED key with every other key part the same, as the journal moves them when a row changes
 * (journal-store writeState): action_counters by the number of such rows; the rate's outcome_minutes by those counted
 * in a stored minute (a minute already pruned is not brought back, and a decrement never goes below 0). A remote's
 * refusal or a lookup's authoritative no-record (source remote_response, remote_query) is not touched. The rows are
 * found through migration 010's index on `code`, not by a scan of the table.
 */
export const migration016AttestedRejectedCode: Migration = {
  version: 16,
  name: 'attested-rejected-code',
  up(db) {
    db.exec(`
      ${countersMoved('REMOTE_REJECTED', '-')}
      ${countersMoved('ATTESTED_REJECTED', '')}

      INSERT INTO outcome_minutes (minute, phase, outcome, code, decision, dispatched, n)
      SELECT o.minute, o.phase, o.outcome, 'ATTESTED_REJECTED', o.decision, o.dispatched, min(o.n, a.n)
      FROM outcome_minutes AS o, ${minutesOf} WHERE ${sameMinuteKey}
      ON CONFLICT (minute, phase, outcome, code, decision, dispatched) DO UPDATE SET n = n + excluded.n;
      UPDATE outcome_minutes AS o SET n = o.n - min(o.n, a.n) FROM ${minutesOf} WHERE ${sameMinuteKey};

      UPDATE actions SET code = 'ATTESTED_REJECTED', state = json_set(state, '$.code', 'ATTESTED_REJECTED')
      WHERE ${attestedAsRemote};
    `);
  },
};
