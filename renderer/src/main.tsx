import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { pagePassphrasePrompt, pageSessionOf } from './api/page-session.js';
import { selectOperatorApi } from './api/select-operator-api.js';
import { App } from './app.js';
import { AppStoreContext, createAppStore } from './store/app-store.js';
import './styles.css';

const rootElement = document.getElementById('root');
if (rootElement === null) throw new Error('index.html has no #root element');

// On the headless host the tab's session comes first: it takes the sign-in the host's answer carried, if any.
const session = window.postern === undefined ? pageSessionOf(window) : undefined;
const store = createAppStore(selectOperatorApi(window));
// A passphrase asked for a tab that signs out (or in again) meanwhile answers nothing: that decision's session is gone.
session?.subscribe(() => pagePassphrasePrompt().answer(null));

createRoot(rootElement).render(
  <StrictMode>
    <AppStoreContext.Provider value={store}>
      <App session={session} prompt={session === undefined ? undefined : pagePassphrasePrompt()} />
    </AppStoreContext.Provider>
  </StrictMode>,
);
