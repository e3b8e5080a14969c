import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { pageSessionOf } from './api/page-session.js';
import { selectOperatorApi } from './api/select-operator-api.js';
import { App } from './app.js';
import { AppStoreContext, createAppStore } from './store/app-store.js';
import './styles.css';

const rootElement = document.getElementById('root');
if (rootElement === null) throw new Error('index.html has no #root element');

// On the headless host the tab's session comes first: it takes the sign-in the host's answer carried, if any.
const session = window.postern === undefined ? pageSessionOf(window) : undefined;
const store = createAppStore(selectOperatorApi(window));

createRoot(rootElement).render(
  <StrictMode>
    <AppStoreContext.Provider value={store}>
      <App session={session} />
    </AppStoreContext.Provider>
  </StrictMode>,
);
