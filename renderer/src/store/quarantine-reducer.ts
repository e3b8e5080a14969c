import type { IntegrityAnchorReport, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

/** The quarantine banner: what the broker's start found of its signed integrity anchor, and a re-adoption in flight. */
export interface QuarantineView {
  report: IntegrityAnchorReport | null;
  readopting: boolean;
  /** The last read or re-adoption that failed (a locked vault, no proof, a broker gone), else null. */
  error: ReplyError | null;
}

export type QuarantineEvent =
  | { type: 'report_received'; reply: Reply<IntegrityAnchorReport> }
  | { type: 'readopt_started' }
  | { type: 'readopt_finished'; reply: Reply<IntegrityAnchorReport> };

export const initialQuarantineView: QuarantineView = { report: null, readopting: false, error: null };

/** Pure: the next view from the current one and one event. A failed read keeps the last report shown. */
export function quarantineReducer(view: QuarantineView, event: QuarantineEvent): QuarantineView {
  switch (event.type) {
    case 'report_received':
      return event.reply.ok ? { ...view, report: event.reply.value } : { ...view, error: event.reply.error };
    case 'readopt_started':
      return { ...view, readopting: true, error: null };
    case 'readopt_finished':
      return event.reply.ok
        ? { report: event.reply.value, readopting: false, error: null }
        : { ...view, readopting: false, error: event.reply.error };
  }
}

/** What a person reads for each stable code: what happened, in words (the code itself is shown beside it). */
export const quarantineWords: Readonly<Record<NonNullable<IntegrityAnchorReport['code']>, string>> = {
  ANCHOR_ROLLBACK:
    'The journal is behind its signed anchor: it (or the whole data directory) was restored from an earlier copy, and the actions recorded since are gone from it.',
  ANCHOR_FORGED: 'The integrity anchor is damaged or its signature does not verify: it was edited or replaced.',
  ANCHOR_TAIL_MISSING:
    'The journal no longer holds the history its anchor names: events were removed or rewritten after they were signed.',
  ANCHOR_MISSING:
    'The journal recorded an integrity anchor, but none exists for this data directory: it was deleted, or the data directory moved.',
  ANCHOR_STATE_MISMATCH: "The journal's audit key ring is not the one its anchor was signed over.",
};
