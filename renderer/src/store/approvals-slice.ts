import type { StateCreator } from 'zustand';
import type { Effect, Reply } from '../../../broker/contract/index.js';
import type { OperatorApi } from '../api/operator-api.js';
import {
  approvalsReducer,
  closuresToRead,
  initialApprovalsView,
  type ApprovalsEvent,
  type ApprovalsView,
} from './approvals-reducer.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import { bridgeFailed } from './operator-call.js';
import { eventsSealed, readPlainRow } from './sealed-action.js';

export interface ApprovalsSlice {
  approvalsView: ApprovalsView;
  /**
   * Lists the cards once. A call while one is in flight asks for one more right after it, so a
   * refresh requested after a decision never returns the list from before it.
   */
  refreshApprovals(): Promise<void>;
  /** Each decision resolves true when the broker accepted it (its form may close). */
  approve(ticket: number): Promise<boolean>;
  reject(ticket: number, reason: string): Promise<boolean>;
  cancel(ticket: number, reason: string): Promise<boolean>;
  abandon(ticket: number, reason: string): Promise<boolean>;
  attest(
    ticket: number,
    actionId: string,
    outcome: 'committed' | 'rejected',
    effect: Effect,
    basis: string,
  ): Promise<boolean>;
  reconcile(ticket: number, actionId: string): Promise<boolean>;
  /** A person's same-key retry of an unknown head (its kept request, resent under the next lease). */
  retrySameKey(ticket: number, actionId: string): Promise<boolean>;
}

/** One operator call on one card, named by `call`: `message` says what the broker's accepted answer means. */
type Decide = <T>(
  ticket: number,
  call: string,
  send: () => Promise<Reply<T>>,
  message: (value: T) => string,
) => Promise<boolean>;

type DecisionActions = Omit<ApprovalsSlice, 'approvalsView' | 'refreshApprovals'>;

export function createApprovalsSlice(api: OperatorApi): StateCreator<ApprovalsSlice, [], [], ApprovalsSlice> {
  return (set, get) => {
    const dispatch = (event: ApprovalsEvent): void =>
      set((state) => ({ approvalsView: approvalsReducer(state.approvalsView, event) }));
    const readClosures = closureReader(api, () => get().approvalsView, dispatch);

    const listOnce = async (): Promise<void> => {
      dispatch({ type: 'requested' });
      const reply = await api['approvals.list']({}).catch(bridgeFailed);
      dispatch({ type: 'received', reply });
      readClosures();
    };

    const refreshApprovals = coalescedRefresh(listOnce).run;

    /** One operator call on one card: busy while it runs, its result on the card, then a refresh. */
    const decide: Decide = async (ticket, call, send, message) => {
      if (get().approvalsView.calls.busy[ticket] !== undefined) return false;
      dispatch({ type: 'call_started', ticket, call });
      const reply = await send().catch(bridgeFailed);
      dispatch({ type: 'call_finished', ticket, call, reply, message: reply.ok ? message(reply.value) : '' });
      await refreshApprovals();
      return reply.ok;
    };

    return { approvalsView: initialApprovalsView, refreshApprovals, ...decisionActions(api, decide) };
  };
}

/**
 * Reads why each newly closed card closed; failures stay unread and are tried on the next refresh. A card whose events
 * are sealed (the vault is locked) also gets its plaintext row, so it says how it closed while they cannot be read.
 */
function closureReader(
  api: OperatorApi,
  view: () => ApprovalsView,
  dispatch: (event: ApprovalsEvent) => void,
): () => void {
  const reading = new Set<number>();
  return () => {
    for (const entry of closuresToRead(view())) {
      const { ticket, action_id } = entry.card;
      if (reading.has(ticket)) continue;
      reading.add(ticket);
      void api['actions.show']({ action_id })
        .catch(bridgeFailed)
        .then(async (reply) => {
          dispatch({ type: 'closure_read', ticket, reply });
          // Sealed (vault locked): say what the plaintext projection knows, once, until the events can be read.
          if (!reply.ok && eventsSealed(reply.error) && entry.plain === null)
            dispatch({ type: 'closure_plain', ticket, row: await readPlainRow(api, action_id) });
        })
        .finally(() => reading.delete(ticket));
    }
  };
}

/** Each decision as its operator call and the words said on the card when the broker accepts it. */
function decisionActions(api: OperatorApi, decide: Decide): DecisionActions {
  return {
    approve: (ticket) =>
      decide(
        ticket,
        'approve',
        () => api['approvals.approve']({ ticket }),
        () => `#${ticket} approved`,
      ),
    reject: (ticket, reason) =>
      decide(
        ticket,
        'reject',
        () => api['approvals.reject']({ ticket, reason }),
        () => `#${ticket} rejected`,
      ),
    cancel: (ticket, reason) =>
      decide(
        ticket,
        'cancel',
        () => api['approvals.cancel']({ ticket, reason }),
        () => `#${ticket} cancelled`,
      ),
    abandon: (ticket, reason) =>
      decide(
        ticket,
        'abandon',
        () => api['approvals.abandon']({ ticket, reason }),
        () => `#${ticket} abandoned`,
      ),
    attest: (ticket, actionId, outcome, effect, basis) =>
      decide(
        ticket,
        'attest',
        () => api['actions.attest']({ action_id: actionId, outcome, effect, basis }),
        () => `#${ticket} attested ${outcome} (${effect})`,
      ),
    reconcile: (ticket, actionId) =>
      decide(
        ticket,
        'reconcile',
        () => api['actions.reconcile']({ action_id: actionId }),
        // The record's note is part of the answer: why a "no record" was not trusted yet, or a read-back's ambiguity.
        (value) =>
          `#${ticket} reconciled: ${value.outcome} (${value.outcome_basis})${value.note === undefined ? '' : `. ${value.note}`}`,
      ),
    retrySameKey: (ticket, actionId) =>
      decide(
        ticket,
        'retry',
        () => api['actions.retry']({ action_id: actionId }),
        (value) =>
          value.generation === null
            ? `#${ticket}: no retry sent (${value.outcome})`
            : `#${ticket} retried (lease generation ${value.generation}): ${value.outcome}`,
      ),
  };
}
