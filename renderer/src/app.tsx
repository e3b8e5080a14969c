import { StatusPanel } from './views/status-panel.js';

export function App() {
  return (
    <div className="shell">
      <header className="topbar">
        <h1>Postern</h1>
        <span className="muted">operator console</span>
      </header>
      <main>
        <StatusPanel />
      </main>
    </div>
  );
}
