import { isCodedError, type ActionState } from '../contract/index.js';
import type { Journal } from '../journal/index.js';
import type { HeldObservations } from '../ports/index.js';
import { dispatchJournalFailure, journalFailedFacts, type JournalFailedFacts } from './journal-failure.js';

/** What both channels report about the journal at the dispatch boundary. */
export interface DispatchReport {
  readonly dispatchStarted: boolean;
  readonly journalFailed?: unknown;
  /** Observations held for the settlement's commit (any channel asked to): recordAndAnswer appends it with withHeld. */
  readonly observations?: HeldObservations;
}

/** The channel's two answers that do not come from its own record: a closure that won the race, or unknown. */
export interface SettleAnswers<R> {
  closed(state: ActionState): R;
  unknown(facts: JournalFailedFacts): R;
}

/**
 * After the channel ran: a journal failure at the dispatch boundary answers closed or unknown (journal-failure.ts);
 * otherwise the channel records and answers. After DISPATCH_STARTED a failed record is never not_attempted: the
 * agent hears unknown. The same for HTTP, SSH and MCP; only the envelope and the record differ.
 */
export async function settle<R>(
  journal: Journal,
  actionId: string,
  report: DispatchReport,
  answers: SettleAnswers<R>,
  recordAndAnswer: () => Promise<R>,
): Promise<R> {
  // Held observations already settled are checked here; those still queued are the journal's to check (withHeld).
  // Exact only because nothing between this line and the settlement's append waits: recordAndAnswer runs synchronously
  // up to that append (http-record.ts; the SSH and MCP records await a caller event first only when the caller
  // cancelled, and their channels then commit the observations themselves), so no commit can settle a held
  // observation in between. The scrub, which yields the event loop (scrubAsync), is done by the callers before this.
  const journalFailed = report.journalFailed ?? report.observations?.failure();
  if (journalFailed !== undefined) return failedAnswer(journal, actionId, journalFailed, answers);
  try {
    return await recordAndAnswer();
  } catch (error) {
    // A held observation refused in the settlement's commit refused the settlement with it: answered as its failure.
    const observed = await report.observations?.settled();
    if (observed !== undefined) return failedAnswer(journal, actionId, observed, answers);
    if (!report.dispatchStarted || !isCodedError(error) || error.code !== 'JOURNAL_UNAVAILABLE') throw error;
    return answers.unknown(journalFailedFacts(journal, actionId));
  }
}

function failedAnswer<R>(journal: Journal, actionId: string, journalFailed: unknown, answers: SettleAnswers<R>): R {
  const failure = dispatchJournalFailure(journal, actionId, journalFailed);
  return failure.kind === 'closed' ? answers.closed(failure.state) : answers.unknown(failure);
}
