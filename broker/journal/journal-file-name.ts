/** The journal's file in a data directory. Its own module: `postern status` looks for it before loading the journal. */
export const journalFileName = 'journal.sqlite';
