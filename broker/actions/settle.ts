import { isCodedError, type ActionState } from '../contract/index.js';
import type { Journal } from '../journal/index.js';
import { dispatchJournalFailure, journalFailedFacts, type JournalFailedFacts } from './journal-failure.js';

/** What both channels report about the journal at the dispatch boundary. */
export interface DispatchReport {
  readonly dispatchStarted: boolean;
  readonly journalFailed?: unknown;
}

/** The channel's two answers that do not come from its own record: a closure that won the race, or unknown. */
export interface SettleAnswers<R> {
  closed(state: ActionState): R;
  unknown(facts: JournalFailedFacts): R;
}

/**
 * After the channel ran: a journal failure at the dispatch boundary answers closed or unknown (journal-failure.ts);
 * otherwise the channel records and answers. After DISPATCH_STARTED a failed record is never not_attempted: the
 * agent hears unknown. The same for HTTP and SSH; only the envelope and the record differ.
 */
export async function settle<R>(
  journal: Journal,
  actionId: string,
  report: DispatchReport,
  answers: SettleAnswers<R>,
  recordAndAnswer: () => Promise<R>,
): Promise<R> {
  if (report.journalFailed !== undefined) {
    const failure = dispatchJournalFailure(journal, actionId, report.journalFailed);
    return failure.kind === 'closed' ? answers.closed(failure.state) : answers.unknown(failure);
  }
  try {
    return await recordAndAnswer();
  } catch (error) {
    if (!report.dispatchStarted || !isCodedError(error) || error.code !== 'JOURNAL_UNAVAILABLE') throw error;
    return answers.unknown(journalFailedFacts(journal, actionId));
  }
}
