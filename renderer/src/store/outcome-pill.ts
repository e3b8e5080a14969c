import type { ActionListRow } from '../../../broker/contract/index.js';

/**
 * How an action's result is coloured: by what the remote did (its effect), not only by whether the broker knows it
 * (its outcome). `committed` means a complete, authoritative result — an HTTP 500 or `exit 23` is committed too — so
 * green is kept for a committed success; a committed failure is the error colour, a partial or unknown effect the
 * warning colour. An open action is neutral (nothing went wrong yet).
 */
export type OutcomeTone = 'succeeded' | 'failed' | 'uncertain' | 'rejected' | 'not_attempted' | 'unknown' | 'open';

export interface OutcomePill {
  /** e.g. "committed", "committed · failed", "open · card shown". */
  text: string;
  tone: OutcomeTone;
}

type PillFacts = Pick<ActionListRow, 'outcome' | 'effect' | 'settled_at_ms' | 'stage'>;

const committedEffect: Record<NonNullable<ActionListRow['effect']>, OutcomePill> = {
  succeeded: { text: 'committed', tone: 'succeeded' },
  no_effect: { text: 'committed · no effect', tone: 'succeeded' },
  failed: { text: 'committed · failed', tone: 'failed' },
  rejected: { text: 'committed · rejected', tone: 'failed' },
  partial_effect: { text: 'committed · partial effect', tone: 'uncertain' },
  unknown_effect: { text: 'committed · effect unknown', tone: 'uncertain' },
};

/** Pure: the pill an action's row (Actions list) and bar (Timeline) show. */
export function outcomePill(row: PillFacts): OutcomePill {
  if (row.settled_at_ms === null) return { text: `open · ${row.stage.replaceAll('_', ' ')}`, tone: 'open' };
  switch (row.outcome) {
    case 'committed':
      return row.effect === null ? { text: 'committed', tone: 'succeeded' } : committedEffect[row.effect];
    case 'rejected':
      return { text: 'rejected', tone: 'rejected' };
    case 'not_attempted':
      return { text: 'not_attempted', tone: 'not_attempted' };
    case 'unknown':
      return { text: 'unknown', tone: 'unknown' };
    case null:
      return { text: 'closed', tone: 'not_attempted' };
  }
}
