import type { StateCreator } from 'zustand';
import type { Reply } from '../../../broker/contract/index.js';
import type { OperatorApi } from '../api/operator-api.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import {
  credentialRequestsReducer,
  initialCredentialRequestsView,
  type CredentialRequestsEvent,
  type CredentialRequestsView,
  type ProvisionNew,
} from './credential-requests-reducer.js';
import { bridgeFailed } from './operator-call.js';

export interface CredentialRequestsSlice {
  credentialRequestsView: CredentialRequestsView;
  refreshCredentialRequests(): Promise<void>;
  /**
   * Adds the pasted credential and answers the request. The input's secret is handed to the API and kept nowhere:
   * no event or state records it. Each decision resolves true when the broker accepted it.
   */
  provisionCredentialRequest(input: ProvisionNew): Promise<boolean>;
  /** Answers with a credential the vault holds, adding `addBinding` to it when given. */
  provisionWithExisting(requestId: string, existing: string, addBinding?: string): Promise<boolean>;
  declineCredentialRequest(requestId: string, reason?: string): Promise<boolean>;
}

/** One decision on one request: `message` says what the broker's accepted answer means. */
type Decide = <T>(
  requestId: string,
  call: string,
  send: () => Promise<Reply<T>>,
  message: (value: T) => string,
) => Promise<boolean>;

export function createCredentialRequestsSlice(
  api: OperatorApi,
): StateCreator<CredentialRequestsSlice, [], [], CredentialRequestsSlice> {
  return (set, get) => {
    const dispatch = (event: CredentialRequestsEvent): void =>
      set((state) => ({ credentialRequestsView: credentialRequestsReducer(state.credentialRequestsView, event) }));
    const refreshCredentialRequests = coalescedRefresh(async () => {
      dispatch({ type: 'requested' });
      dispatch({ type: 'received', reply: await api['credential_requests.list']({}).catch(bridgeFailed) });
    }).run;

    const decide: Decide = async (requestId, call, send, message) => {
      if (get().credentialRequestsView.calls.busy[requestId] !== undefined) return false;
      dispatch({ type: 'call_started', requestId, call });
      const reply = await send().catch(bridgeFailed);
      dispatch({ type: 'call_finished', requestId, call, reply, message: reply.ok ? message(reply.value) : '' });
      await refreshCredentialRequests();
      return reply.ok;
    };

    return {
      credentialRequestsView: initialCredentialRequestsView,
      refreshCredentialRequests,
      provisionCredentialRequest: (input) =>
        decide(
          input.request_id,
          'provision',
          () => api['credential_requests.provision'](input),
          (value) => `Added ${value.credential.name} (${value.credential.version_tag}); the agent was told its name.`,
        ),
      provisionWithExisting: (requestId, existing, addBinding) =>
        decide(
          requestId,
          'provision',
          () =>
            api['credential_requests.provision']({
              request_id: requestId,
              existing,
              ...(addBinding === undefined ? {} : { add_binding: addBinding }),
            }),
          (value) => `Answered with ${value.credential.name}; the agent was told its name.`,
        ),
      declineCredentialRequest: (requestId, reason) =>
        decide(
          requestId,
          'decline',
          () =>
            api['credential_requests.decline']({ request_id: requestId, ...(reason === undefined ? {} : { reason }) }),
          () => 'Declined; the agent was told.',
        ),
    };
  };
}
