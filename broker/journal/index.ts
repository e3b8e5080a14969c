export {
  Journal,
  journalFileName,
  type ActionRowRefuted,
  type AppendOptions,
  batchEventsMaxDefault,
  pendingEventsMaxDefault,
  journalBytesMaxDefault,
  busyTimeoutMsDefault,
  type DispatchConnection,
  type JournalCommit,
  type JournalOpenOptions,
  type JournalState,
  type JournalStats,
  type ListedSession,
  type SealedEventHeader,
  type UnitRows,
  type WriterThreadStartFailure,
} from './journal.js';
export type { Appended, AppendedConfig, AppendedSession } from './plan-unit.js';
export {
  assertDurable,
  readDurability,
  requireDurableConnection,
  syncModeFor,
  type DurabilityReadBack,
  type SyncMode,
} from './durability.js';
export { migrate, schemaVersion } from './migrate.js';
export type { Migration } from './migration.js';
export { journalMigrations } from './migrations/index.js';
export { logHoldsWords, recoveryEvent } from './recovery.js';
export { readJournalSnapshot, type JournalSnapshot } from './read-snapshot.js';
export type { ActionCounts, CountedSession } from './journal-store.js';
export type { ActionListDbRow, ActionListFilter, ActionListPage, LaneTicketRow } from './action-list-query.js';
export {
  ResultStore,
  resultChunkBytes,
  resultSummaryBytesMax,
  type ResultInput,
  type StoredResult,
  type StoredResultHead,
  type ResultPart,
} from './result-store.js';
export { RecordingStore, recordingIdOf, type StoredRecording } from './recording-store.js';
export { RequestStore, keptRequestBytesMax, type KeptRequest } from './request-store.js';
export type { AnchorFacts, AnchorRecord } from './anchor-store.js';
export {
  AuditWriter,
  auditDecryptPurpose,
  auditSignPurpose,
  checkpointEveryEventsDefault,
  sealedForGood,
  type AuditVault,
  type SignedHead,
} from './audit-writer.js';
export { signCheckpointNow } from './sign-checkpoint.js';
export { vaultCheckpointKey } from './vault-checkpoint-key.js';
export { readDecryptedEvents } from './read-decrypted-events.js';
