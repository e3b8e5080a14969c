/**
 * What one action's commits write, page by page (issue 18): the WAL frames an action's durable commits add, each
 * named by the b-tree its page belongs to (SQLite's `dbstat`), for bench/durable.ts's table 8. A commit's cost on
 * the loop (its COMMIT writes each page to the WAL) and the sync's (it flushes them) grow with its pages; the table
 * says which tables and indexes they come from.
 *
 * The WAL is read as SQLite writes it: a 32-byte header with two salts, then frames of a 24-byte header (page number,
 * the database's size in pages on a commit's last frame, else 0, the salts) and one page. Frames whose salts are not
 * the header's belong to an earlier generation of the file (a checkpoint restarted it): not counted.
 */
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';

export interface CommitPages {
  /** Actions run; commits and pages counted over them. */
  readonly actions: number;
  readonly commits: number;
  readonly pages: number;
  /** Pages a commit wrote, for each commit of the first action (in order). */
  readonly firstAction: readonly { readonly pages: number; readonly trees: readonly string[] }[];
  /** Pages written per action, by b-tree (table or index; `page 1` is the database header), most first. */
  readonly byTree: readonly { readonly tree: string; readonly perAction: number }[];
}

const walHeaderBytes = 32;
const frameHeaderBytes = 24;

interface Frames {
  readonly salts: string;
  /** Each frame's page number and whether it ends a commit. */
  readonly frames: readonly { readonly page: number; readonly commitEnd: boolean }[];
}

function readFrames(walPath: string, pageSize: number): Frames {
  const wal = readFileSync(walPath);
  const salts = wal.subarray(16, 24).toString('hex');
  const frames: { page: number; commitEnd: boolean }[] = [];
  for (let at = walHeaderBytes; at + frameHeaderBytes + pageSize <= wal.length; at += frameHeaderBytes + pageSize) {
    if (wal.subarray(at + 8, at + 16).toString('hex') !== salts) break;
    frames.push({ page: wal.readUInt32BE(at), commitEnd: wal.readUInt32BE(at + 4) !== 0 });
  }
  return { salts, frames };
}

/**
 * Runs `actions` actions one after another (`runOne`, then `durable`, awaited) on the journal at `dbPath` and counts
 * the pages each one's commits added to the WAL. An action during which a checkpoint restarted the WAL (its salts
 * changed: the frames before the restart are overwritten) is not counted and another runs in its place, at most
 * `actions` more.
 */
export async function measureCommitPages(
  dbPath: string,
  actions: number,
  runOne: () => Promise<void>,
  durable: () => Promise<void>,
): Promise<CommitPages> {
  const reader = new Database(dbPath, { readonly: true });
  try {
    const pageSize = Number(reader.pragma('page_size', { simple: true }));
    const walPath = `${dbPath}-wal`;
    const counted: Frames['frames'][] = [];
    await durable();
    let before = readFrames(walPath, pageSize);
    for (let run = 0; counted.length < actions; run += 1) {
      if (run === 2 * actions) throw new Error(`the WAL restarted during ${run - counted.length} of ${run} actions`);
      await runOne();
      await durable();
      const after = readFrames(walPath, pageSize);
      if (after.salts === before.salts && after.frames.length > before.frames.length)
        counted.push(after.frames.slice(before.frames.length));
      before = after;
    }
    return summarize(reader, counted);
  } finally {
    reader.close();
  }
}

function summarize(reader: Database.Database, perAction: readonly Frames['frames'][]): CommitPages {
  const names = new Map<number, string>();
  for (const row of reader.prepare('SELECT name, pageno FROM dbstat').all() as { name: string; pageno: number }[])
    names.set(row.pageno, row.name === 'sqlite_schema' && row.pageno === 1 ? 'page 1' : row.name);
  /** An action's frames as its commits, each the b-trees of its pages in the order written. */
  const commitsOf = (frames: Frames['frames']): string[][] => {
    const commits: string[][] = [[]];
    for (const frame of frames) {
      (commits.at(-1) as string[]).push(names.get(frame.page) ?? `page ${frame.page} (freed since)`);
      if (frame.commitEnd) commits.push([]);
    }
    return commits.slice(0, -1);
  };
  const commits = perAction.map(commitsOf);
  const perTree = new Map<string, number>();
  for (const tree of commits.flat(2)) perTree.set(tree, (perTree.get(tree) ?? 0) + 1);
  const actions = perAction.length;
  return {
    actions,
    commits: commits.flat().length,
    pages: perAction.flat().length,
    firstAction: (commits[0] ?? []).map((trees) => ({ pages: trees.length, trees: [...new Set(trees)] })),
    byTree: [...perTree]
      .map(([tree, n]) => ({ tree, perAction: n / actions }))
      .sort((a, b) => b.perAction - a.perAction || a.tree.localeCompare(b.tree)),
  };
}
