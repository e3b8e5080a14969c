import { createContext, useContext } from 'react';
import { createStore, useStore, type StoreApi } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import { createActionDetailSlice, type ActionDetailSlice } from './action-detail-slice.js';
import { createRecordingSlice, type RecordingSlice } from './recording-slice.js';
import { createActionListSlice, type ActionListSlice } from './action-list-slice.js';
import { createActivitySlice, type ActivitySlice } from './activity-slice.js';
import { createApprovalsSlice, type ApprovalsSlice } from './approvals-slice.js';
import { createMetricsSlice, type MetricsSlice } from './metrics-slice.js';
import { createSessionsSlice, type SessionsSlice } from './sessions-slice.js';
import { createStatusSlice, type StatusSlice } from './status-slice.js';
import { createConfigSlice, type ConfigSlice } from './config-slice.js';
import { createFirstRunSlice, type FirstRunSlice } from './first-run-slice.js';
import { createCredentialsSlice, type CredentialsSlice } from './credentials-slice.js';
import { createCredentialRequestsSlice, type CredentialRequestsSlice } from './credential-requests-slice.js';
import { createIntegritySlice, type IntegritySlice } from './integrity-slice.js';
import { createQuarantineSlice, type QuarantineSlice } from './quarantine-slice.js';
import { createVaultSlice, type VaultSlice } from './vault-slice.js';

/** The whole renderer state: one slice per concern. */
export type AppState = StatusSlice &
  ApprovalsSlice &
  SessionsSlice &
  ActivitySlice &
  ActionListSlice &
  ActionDetailSlice &
  RecordingSlice &
  MetricsSlice &
  VaultSlice &
  CredentialsSlice &
  CredentialRequestsSlice &
  IntegritySlice &
  QuarantineSlice &
  ConfigSlice &
  FirstRunSlice;
export type AppStore = StoreApi<AppState>;

export function createAppStore(api: OperatorApi): AppStore {
  return createStore<AppState>()((...args) => ({
    ...createStatusSlice(api)(...args),
    ...createApprovalsSlice(api)(...args),
    ...createSessionsSlice(api)(...args),
    ...createActivitySlice(api)(...args),
    ...createActionListSlice(api)(...args),
    ...createActionDetailSlice(api)(...args),
    ...createRecordingSlice(api)(...args),
    ...createMetricsSlice(api)(...args),
    ...createVaultSlice(api)(...args),
    ...createCredentialsSlice(api)(...args),
    ...createCredentialRequestsSlice(api)(...args),
    ...createIntegritySlice(api)(...args),
    ...createQuarantineSlice(api)(...args),
    ...createConfigSlice(api)(...args),
    ...createFirstRunSlice(api)(...args),
  }));
}

export const AppStoreContext = createContext<AppStore | null>(null);

export function useAppStore<T>(selector: (state: AppState) => T): T {
  const store = useContext(AppStoreContext);
  if (store === null) throw new Error('useAppStore needs an <AppStoreContext.Provider> above it');
  return useStore(store, selector);
}
