import { join } from 'node:path';

/**
 * A benchmark's daemons (and every other process it starts, which inherit its environment) write their integrity
 * anchors into `<scratch>/anchors`, removed with the scratch, never into the user's state folder
 * (~/.local/state/postern/anchors, broker/host/integrity-anchor.ts): an anchor there would name a data directory the
 * bench deletes, and stay. Call it once the scratch exists, before the first daemon starts.
 */
export function anchorsInScratch(scratch: string): void {
  process.env['POSTERN_ANCHOR_DIR'] = join(scratch, 'anchors');
}
