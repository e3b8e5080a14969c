import type { Migration } from '../migration.js';
import { migration001Initial } from './001-initial.js';
import { migration002ReadIndexes } from './002-read-indexes.js';
import { migration003Results } from './003-results.js';
import { migration004AuditLog } from './004-audit-log.js';
import { migration005Sessions } from './005-sessions.js';
import { migration006IdempotencyKeys } from './006-idempotency-keys.js';
import { migration007ResultPurge } from './007-result-purge.js';
import { migration008KeptRequests } from './008-kept-requests.js';
import { migration009SealedResults } from './009-sealed-results.js';
import { migration010ActionList } from './010-action-list.js';
import { migration011StatusCounters } from './011-status-counters.js';
import { migration012IntegrityAnchor } from './012-integrity-anchor.js';
import { migration013SshRecordings } from './013-ssh-recordings.js';
import { migration014DropUnreadProjections } from './014-drop-unread-projections.js';
import { migration015QuarantinedUnknownBlocks } from './015-quarantined-unknown-blocks.js';
import { migration016AttestedRejectedCode } from './016-attested-rejected-code.js';
import { migration017SessionCounters } from './017-session-counters.js';
import { migration018SessionsByFirstSeq } from './018-sessions-by-first-seq.js';
import { migration019RecordingAlive } from './019-recording-alive.js';
import { migration020OpenIncludesBlockingUnknown } from './020-open-includes-blocking-unknown.js';
import { migration021OutcomeFilterSettled } from './021-outcome-filter-settled.js';
import { migration022RateCountsSettled } from './022-rate-counts-settled.js';
import { migration023IdempotencyKeysByExpiry } from './023-idempotency-keys-by-expiry.js';
import { migration024DispatchMarks } from './024-dispatch-marks.js';
import { migration025OutcomeHeaders } from './025-outcome-headers.js';

/** Every schema step in order; a new step is a new numbered file appended here. */
export const journalMigrations: readonly Migration[] = [
  migration001Initial,
  migration002ReadIndexes,
  migration003Results,
  migration004AuditLog,
  migration005Sessions,
  migration006IdempotencyKeys,
  migration007ResultPurge,
  migration008KeptRequests,
  migration009SealedResults,
  migration010ActionList,
  migration011StatusCounters,
  migration012IntegrityAnchor,
  migration013SshRecordings,
  migration014DropUnreadProjections,
  migration015QuarantinedUnknownBlocks,
  migration016AttestedRejectedCode,
  migration017SessionCounters,
  migration018SessionsByFirstSeq,
  migration019RecordingAlive,
  migration020OpenIncludesBlockingUnknown,
  migration021OutcomeFilterSettled,
  migration022RateCountsSettled,
  migration023IdempotencyKeysByExpiry,
  migration024DispatchMarks,
  migration025OutcomeHeaders,
];
