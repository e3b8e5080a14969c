import { createContext, useContext } from 'react';
import { createStore, useStore, type StoreApi } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import { createApprovalsSlice, type ApprovalsSlice } from './approvals-slice.js';
import { createSessionsSlice, type SessionsSlice } from './sessions-slice.js';
import { createStatusSlice, type StatusSlice } from './status-slice.js';

/** The whole renderer state: one slice per concern (activity joins later). */
export type AppState = StatusSlice & ApprovalsSlice & SessionsSlice;
export type AppStore = StoreApi<AppState>;

export function createAppStore(api: OperatorApi): AppStore {
  return createStore<AppState>()((...args) => ({
    ...createStatusSlice(api)(...args),
    ...createApprovalsSlice(api)(...args),
    ...createSessionsSlice(api)(...args),
  }));
}

export const AppStoreContext = createContext<AppStore | null>(null);

export function useAppStore<T>(selector: (state: AppState) => T): T {
  const store = useContext(AppStoreContext);
  if (store === null) throw new Error('useAppStore needs an <AppStoreContext.Provider> above it');
  return useStore(store, selector);
}
