import type { CardPair, CardPairCut } from './events.js';

// Schema-free (types only from events.ts), so the CLI prints cards without loading zod (issue 18: cold start).

/** How many characters a pair's sides hide (zero each for an uncut pair or the broker's summary). Pure. */
export function pairCut(pair: CardPair): CardPairCut {
  const extra = pair[2];
  return extra !== undefined && 'name_hidden' in extra ? extra : { name_hidden: 0, value_hidden: 0 };
}

/** The number of pairs the broker's summary pair says are not shown, or null for any other pair. Pure. */
export function pairsHidden(pair: CardPair): number | null {
  const extra = pair[2];
  return extra !== undefined && 'pairs_hidden' in extra ? extra.pairs_hidden : null;
}
