import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { selectOperatorApi } from './api/select-operator-api.js';
import { App } from './app.js';
import { AppStoreContext, createAppStore } from './store/app-store.js';
import './styles.css';

const rootElement = document.getElementById('root');
if (rootElement === null) throw new Error('index.html has no #root element');

const store = createAppStore(selectOperatorApi(window));

createRoot(rootElement).render(
  <StrictMode>
    <AppStoreContext.Provider value={store}>
      <App />
    </AppStoreContext.Provider>
  </StrictMode>,
);
