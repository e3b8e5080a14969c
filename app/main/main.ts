import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { app, BrowserWindow, dialog, ipcMain, session, type IpcMainInvokeEvent } from 'electron';
import { brokerApiMethods, type Reply } from '../../broker/contract/index.js';
import {
  contentSecurityPolicy,
  createBrokerRuntime,
  createOperatorHandlers,
  ensureDataDir,
  resolveDataDir,
  type BrokerRuntime,
  type OperatorHandlers,
} from '../../broker/host/index.js';
import { apiChannel } from '../shared/api-channel.js';

/**
 * The Electron composition root: one broker runtime for the data directory, one window showing
 * the renderer, IPC handlers generated from the contract's BrokerApi map. Bundled to
 * dist/app/main.mjs (scripts/build-app.mjs); `postern start` runs it when Electron is installed.
 */
const bundleDir = path.dirname(fileURLToPath(import.meta.url));
const rendererIndex = path.join(bundleDir, '..', 'renderer', 'index.html');
const rendererUrl = pathToFileURL(rendererIndex).href;
const preloadPath = path.join(bundleDir, 'preload.cjs');

app.setName('Postern');
app.enableSandbox();

if (app.requestSingleInstanceLock()) {
  main().catch((error: unknown) => {
    dialog.showErrorBox('Postern could not start', error instanceof Error ? error.message : String(error));
    app.exit(1);
  });
} else {
  app.quit();
}

async function main(): Promise<void> {
  hardenWebContents();
  await app.whenReady();
  // Same rule as the CLI (which passes its choice in POSTERN_DATA_DIR), not Electron's userData.
  const dataDir = resolveDataDir({ flag: undefined, env: process.env, platform: process.platform, home: os.homedir(), cwd: process.cwd() });
  ensureDataDir(dataDir);
  const runtime = await createBrokerRuntime({ dataDir, mode: 'desktop', version: app.getVersion(), startedAtMs: Date.now() });
  closeRuntimeOnQuit(runtime);
  hardenSession();
  registerApiHandlers(createOperatorHandlers(runtime.broker));
  await openWindow();
  app.on('second-instance', () => BrowserWindow.getAllWindows()[0]?.focus());
  app.on('window-all-closed', () => app.quit());
}

async function openWindow(): Promise<void> {
  const win = new BrowserWindow({
    width: 1100,
    height: 760,
    title: 'Postern',
    show: false,
    webPreferences: {
      preload: preloadPath,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      spellcheck: false,
    },
  });
  win.once('ready-to-show', () => win.show());
  await win.loadFile(rendererIndex);
}

/** No new windows, no navigation away from the bundled page, no webviews, for every web contents. */
function hardenWebContents(): void {
  app.on('web-contents-created', (_event, contents) => {
    contents.setWindowOpenHandler(() => ({ action: 'deny' }));
    contents.on('will-navigate', (event) => event.preventDefault());
    contents.on('will-redirect', (event) => event.preventDefault());
    contents.on('will-attach-webview', (event) => event.preventDefault());
  });
}

/** Deny every permission; send the host's CSP on any HTTP response (the file:// page carries it as a meta tag). */
function hardenSession(): void {
  session.defaultSession.setPermissionRequestHandler((_contents, _permission, callback) => callback(false));
  session.defaultSession.setPermissionCheckHandler(() => false);
  session.defaultSession.webRequest.onHeadersReceived((details, callback) => {
    callback({ responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [contentSecurityPolicy] } });
  });
}

/**
 * One ipcMain handler per BrokerApi method (from the contract's method list), answering only
 * frames showing our bundled page.
 */
function registerApiHandlers(handlers: OperatorHandlers): void {
  for (const method of brokerApiMethods) {
    ipcMain.handle(apiChannel(method), (event: IpcMainInvokeEvent, input: unknown): Promise<Reply<unknown>> => {
      if (!fromOurPage(event)) {
        return Promise.resolve({ ok: false, error: { code: 'UNAUTHENTICATED', message: 'IPC from a page that is not the Postern UI.' } });
      }
      // The handler parses `input` with the method's contract schema before the broker sees it.
      return handlers[method](input);
    });
  }
}

function fromOurPage(event: IpcMainInvokeEvent): boolean {
  const url = event.senderFrame?.url;
  return url !== undefined && url.split('#')[0] === rendererUrl;
}

/** The journal must close cleanly: hold the quit until the runtime has closed. */
function closeRuntimeOnQuit(runtime: BrokerRuntime): void {
  let closed = false;
  let closing = false;
  app.on('will-quit', (event) => {
    if (closed) return;
    event.preventDefault();
    if (closing) return;
    closing = true;
    void runtime.close().finally(() => {
      closed = true;
      app.quit();
    });
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => app.quit());
}
