import type { AuditVerifyResult, BrokerApi, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

/** The integrity banner: the last `audit verify` the broker ran over its journal, and a run in flight. */
export interface IntegrityView {
  /** False until the broker said what its last result is (possibly none). */
  loaded: boolean;
  last: AuditVerifyResult | null;
  verifying: boolean;
  /** Rows checked of the log's length while a verify runs in the broker (started here or in another window), else null. */
  progress: VerifyProgress | null;
  error: ReplyError | null;
}

export type VerifyProgress = NonNullable<BrokerApi['audit.last']['output']['progress']>;

export type IntegrityEvent =
  | { type: 'last_received'; reply: Reply<BrokerApi['audit.last']['output']> }
  | { type: 'verify_started' }
  | { type: 'verify_finished'; reply: Reply<AuditVerifyResult> };

export const initialIntegrityView: IntegrityView = {
  loaded: false,
  last: null,
  verifying: false,
  progress: null,
  error: null,
};

/** Pure: the next view from the current one and one event. A newer result is never replaced by an older one. */
export function integrityReducer(view: IntegrityView, event: IntegrityEvent): IntegrityView {
  switch (event.type) {
    case 'last_received':
      if (!event.reply.ok) return { ...view, error: event.reply.error };
      return {
        ...view,
        loaded: true,
        error: null,
        last: newer(view.last, event.reply.value.last),
        progress: event.reply.value.progress ?? null,
      };
    case 'verify_started':
      return { ...view, verifying: true, error: null };
    case 'verify_finished':
      return event.reply.ok
        ? { ...view, loaded: true, verifying: false, progress: null, last: newer(view.last, event.reply.value) }
        : { ...view, verifying: false, progress: null, error: event.reply.error };
  }
}

function newer(current: AuditVerifyResult | null, next: AuditVerifyResult | null): AuditVerifyResult | null {
  if (next === null) return current;
  if (current === null) return next;
  return next.checked_at_ms >= current.checked_at_ms ? next : current;
}

/** "41% (412000 of 1000000 events)": how far a running verify is; before the broker counted the rows, just "starting". */
export function progressText(progress: VerifyProgress): string {
  if (progress.total === 0) return 'starting';
  const percent = Math.min(100, Math.floor((progress.checked / progress.total) * 100));
  return `${percent}% (${progress.checked} of ${progress.total} events)`;
}

/**
 * What the banner says, without the time (the view renders that as a <time>), and the next step that fits. "Journal
 * verified" only when the broker checked the signatures under the vault's key; a verify run while the vault was locked
 * says the chain is intact but the signing key was not checked (a same-user rewrite re-signs under its own key).
 */
export type IntegrityLine = {
  tone: 'ok' | 'failed' | 'unverified';
  headline: string;
  detail: string;
  next: string | null;
};

export function integrityLine(last: AuditVerifyResult | null): IntegrityLine {
  if (last === null) {
    return {
      tone: 'unverified',
      headline: 'Journal not verified yet',
      detail: 'No audit verify has run since this broker started.',
      next: 'Verify now checks it, read-only.',
    };
  }
  if (last.ok) {
    const tail = last.unsigned_tail === 0 ? 'all signed' : `${last.unsigned_tail} after the last signed checkpoint`;
    const counts = `${last.events} ${last.events === 1 ? 'event' : 'events'} checked, ${last.checkpoints} signed ${last.checkpoints === 1 ? 'checkpoint' : 'checkpoints'} (${tail})`;
    if (last.key_source === 'vault') return { tone: 'ok', headline: 'Journal verified', detail: counts, next: null };
    // Locked: the signatures were checked under the key the journal names, which a rewrite of the file replaces too.
    return {
      tone: 'unverified',
      headline: 'Chain intact — signing key not checked',
      detail: `${counts}, under the key the journal itself names`,
      next: "Unlock the vault, then Verify now checks the signatures against the vault's key.",
    };
  }
  const where = last.seq === null ? 'outside the event rows' : `first bad position: seq ${last.seq}`;
  return {
    tone: 'failed',
    headline: `Journal integrity FAILED (${last.code})`,
    detail: `${where} — ${last.message}`,
    // Evidence first: a copy keeps what the verifier found; the CLI's report names each step (docs/audit.md).
    next: 'Copy the data directory as it is, then run postern audit verify on it for the full report.',
  };
}
