import type { JournalSnapshot } from './read-snapshot.js';

/** The journal's file in a data directory. Its own module: `postern status` looks for it before loading the journal. */
export const journalFileName = 'journal.sqlite';

/** What a data directory with no journal file holds: zeros, known without loading SQLite. */
export const noJournalSnapshot: JournalSnapshot = Object.freeze({
  exists: false,
  events: 0,
  last_seq: 0,
  schema_version: 0,
  actions: Object.freeze({ total: 0, in_flight: 0, unknown: 0, dispatched_unrecorded: 0 }),
});
