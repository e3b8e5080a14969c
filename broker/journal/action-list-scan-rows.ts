// Apart from the query, so the CLI's `daemon` command checks its test option without loading the journal.

/**
 * Rows one page of a search (text, or more than one filter) examines at most: past it the page
 * stops and says where (`searchedBeforeSeq`), so a rare or absent match on a journal of a million
 * actions never holds the event loop for the whole table. Measured here (bench/actions-list.ts, 2 shared
 * cores): a text search that matches nothing takes ~22 ms over 10,000 rows (~43 ms over 20,000, too close to
 * the daemon's ~50 ms answer to any other call); equality filters alone cost a tenth of that per row.
 */
export const actionListScanRowsMax = 10_000;
