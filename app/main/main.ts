import './refuse-inspector-signal.js';
import { existsSync, readFileSync } from 'node:fs';
import inspector from 'node:inspector';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  app,
  BrowserWindow,
  dialog,
  ipcMain,
  Menu,
  nativeImage,
  Notification,
  protocol,
  safeStorage,
  session,
  Tray,
  type IpcMainInvokeEvent,
  type MenuItemConstructorOptions,
  type WebContents,
} from 'electron';
import { brokerApiMethods, type BrokerApiMethod } from '../../broker/contract/index.js';
import {
  createBrokerRuntime,
  createOperatorHandlers,
  describeCutShutdown,
  describeHardening,
  ensureDataDir,
  hardenProcess,
  resolveDataDir,
  shutDownRuntime,
  type BrokerRuntime,
  type OperatorHandlers,
} from '../../broker/host/index.js';
import { apiChannel, changeChannel } from '../shared/api-channel.js';
import { appPageUrl, appScheme, appSchemePrivileges, handleAppRequest } from './app-protocol.js';
import { approvalPollMs, createApprovalWatcher, type CardNotice } from './approval-watcher.js';
import { createChangeForwarder, type ForwardTarget } from './change-forwarder.js';
import {
  developerSurface,
  launchSwitchProblem,
  signalledInspectorProblem,
  type MenuEntry,
} from './developer-surface.js';
import { describeDecision } from './decision-dialog.js';
import { createIpcGate, type IpcGate, type IpcSenderFacts } from './ipc-gate.js';
import { createQuitGate } from './shutdown-sequence.js';
import { startFailureText } from './start-failure.js';
import { electronSqliteBinding, missingSqliteBuildMessage, sqliteBindingEnv } from './sqlite-binding.js';
import {
  chooseVaultKeyProtector,
  describeKeyProtectorChoice,
  keyProtectionFromEnv,
  runtimeKeyProtectorOptions,
} from './vault-key-protector.js';
import {
  hardenContents,
  pageCspProblem,
  permissionAllowed,
  requestAllowed,
  windowWebPreferences,
} from './web-security.js';

/**
 * The Electron composition root: one broker runtime for the data directory (the same core
 * `postern daemon` runs), one sandboxed window showing the bundled renderer, one IPC channel per
 * operator method, a tray with a notification per new approval card, and the quit sequence (stop
 * intake → drain in flight, bounded → close the runtime and its journal). The rules themselves are
 * pure modules beside this file, unit-tested without Electron; this file only wires them to hooks.
 * Bundled to dist/app/main.mjs (scripts/build-app.mjs); `postern start` runs it when Electron is
 * installed. docs/desktop.md is the checklist.
 */
const bundleDir = path.dirname(fileURLToPath(import.meta.url));
const rendererDir = path.join(bundleDir, '..', 'renderer');
const rendererIndex = path.join(rendererDir, 'index.html');
const preloadPath = path.join(bundleDir, 'preload.cjs');

let mainWindow: BrowserWindow | undefined;
let tray: Tray | undefined;
/** DevTools, the reload / DevTools menu entries and debugging switches: a developer build only. */
const surface = developerSurface({ isPackaged: app.isPackaged, platform: process.platform });

app.setName('Postern');
app.enableSandbox();
// Before ready, or Chromium will not treat app:// as a standard, secure origin.
protocol.registerSchemesAsPrivileged([appSchemePrivileges]);

const switchProblem =
  launchSwitchProblem({ isPackaged: app.isPackaged, hasSwitch: (name) => app.commandLine.hasSwitch(name) }) ??
  signalledInspectorProblem({ inspectorUrl: inspector.url(), hasSwitch: (name) => app.commandLine.hasSwitch(name) });
if (switchProblem !== undefined) {
  // Before the lock, the broker and any window: nothing exists for a debugger to drive.
  process.stderr.write(`postern: ${switchProblem}\n`);
  app.exit(2);
} else if (app.requestSingleInstanceLock()) {
  main().catch((error: unknown) => {
    dialog.showErrorBox('Postern could not start', startFailureText(error));
    app.exit(1);
  });
} else {
  // Another Postern owns this user's app instance; it is told (second-instance) and shows its window.
  app.quit();
}

async function main(): Promise<void> {
  // First, before the vault can be unlocked: no decrypted credential ever sits in a readable process.
  const hardening = hardenProcess();
  if (hardening.hardened) console.info(describeHardening(hardening));
  else console.warn(describeHardening(hardening));
  app.on('web-contents-created', (_event, contents) => hardenContents(asHardenable(contents)));
  await app.whenReady();
  // Same rule as the CLI (which passes its choice in POSTERN_DATA_DIR), not Electron's userData.
  const dataDir = resolveDataDir({
    flag: undefined,
    env: process.env,
    platform: process.platform,
    home: os.homedir(),
    cwd: process.cwd(),
  });
  ensureDataDir(dataDir);
  pointSqliteAtElectronBuild();
  const cspProblem = pageCspProblem(readFileSync(rendererIndex, 'utf8'));
  if (cspProblem !== undefined)
    throw new Error(`The operator UI at ${rendererIndex} is not safe to show: ${cspProblem}.`);
  Menu.setApplicationMenu(Menu.buildFromTemplate(menuTemplate(surface.menu)));
  hardenSession();

  // safeStorage as a second wrap around the vault key where it protects something (docs/vault.md).
  const keyProtection = keyProtectionFromEnv(process.env);
  const keyProtector = await chooseVaultKeyProtector(process.platform, safeStorage);
  console.info(describeKeyProtectorChoice(keyProtector, keyProtection));
  const protectorOptions = runtimeKeyProtectorOptions(keyProtector, keyProtection);
  const runtime = await createBrokerRuntime({
    dataDir,
    mode: 'desktop',
    version: app.getVersion(),
    startedAtMs: Date.now(),
    ...protectorOptions,
  });
  const handlers = createOperatorHandlers(runtime.broker);
  const gate = createIpcGate({
    pageUrl: appPageUrl,
    handlers,
    confirm: (method, input) => confirmInMain(handlers, method, input),
  });
  registerApiChannels(gate);
  const watching = watchApprovals(handlers);
  const stopForwarding = forwardChanges(runtime, watching.pollNow);
  const stopWatching = (): void => {
    stopForwarding();
    watching.stop();
  };
  handleQuit(runtime, gate, stopWatching);

  tray = createTray();
  app.on('second-instance', showWindow);
  // The broker keeps serving agents with the window closed while the tray can bring it back.
  app.on('window-all-closed', () => {
    if (tray === undefined) app.quit();
  });
  await openWindow();
}

/** Inside Electron the journal must load better-sqlite3's Electron build, never node_modules' Node build. */
function pointSqliteAtElectronBuild(): void {
  const file = electronSqliteBinding({
    isPackaged: app.isPackaged,
    resourcesPath: process.resourcesPath,
    appPath: app.getAppPath(),
  });
  if (!existsSync(file)) throw new Error(missingSqliteBuildMessage(file, app.isPackaged));
  process.env[sqliteBindingEnv] = file;
}

async function openWindow(): Promise<void> {
  const webPreferences = windowWebPreferences(preloadPath, { devTools: surface.devTools });
  const win = new BrowserWindow({ width: 1100, height: 760, title: 'Postern', show: false, webPreferences });
  mainWindow = win;
  win.on('closed', () => {
    if (mainWindow === win) mainWindow = undefined;
  });
  win.once('ready-to-show', () => win.show());
  await win.loadURL(appPageUrl);
}

function showWindow(): void {
  if (mainWindow === undefined) {
    void openWindow();
    return;
  }
  if (mainWindow.isMinimized()) mainWindow.restore();
  mainWindow.show();
  mainWindow.focus();
}

/** Electron's overloaded `on` cannot be assigned to the one-signature shape the pure rule takes. */
function asHardenable(contents: WebContents): Parameters<typeof hardenContents>[0] {
  return {
    setWindowOpenHandler: (handler) => contents.setWindowOpenHandler(handler),
    on: (event, listener) => contents.on(event as 'will-navigate', listener),
  };
}

/**
 * Serve the renderer from app://postern (files of the bundled renderer only, CSP header on every
 * answer); deny every permission; cancel every request to anything but that origin (no remote content).
 */
function hardenSession(): void {
  const ses = session.defaultSession;
  ses.protocol.handle(appScheme, (request) => handleAppRequest(request, rendererDir));
  ses.setPermissionRequestHandler((_contents, permission, callback) => callback(permissionAllowed(permission)));
  ses.setPermissionCheckHandler((_contents, permission) => permissionAllowed(permission));
  ses.webRequest.onBeforeRequest((details, callback) =>
    callback({ cancel: !requestAllowed(details.url, { devTools: surface.devTools }) }),
  );
}

/** The pure menu (readonly data) as the mutable template Electron's builder takes. */
function menuTemplate(entries: readonly MenuEntry[]): MenuItemConstructorOptions[] {
  return entries.map(({ submenu, ...entry }) =>
    submenu === undefined ? { ...entry } : { ...entry, submenu: menuTemplate(submenu) },
  );
}

/** One ipcMain handler per operator method (the contract's list); the gate checks sender and input. */
function registerApiChannels(gate: IpcGate): void {
  for (const method of brokerApiMethods) {
    ipcMain.handle(apiChannel(method), (event: IpcMainInvokeEvent, input: unknown) =>
      gate.handle(method, senderFacts(event), input),
    );
  }
}

function senderFacts(event: IpcMainInvokeEvent): IpcSenderFacts {
  const frame = event.senderFrame;
  return {
    frameUrl: frame?.url,
    isMainFrame: frame !== null && frame.parent === null,
    fromOurWindow: mainWindow !== undefined && !mainWindow.isDestroyed() && event.sender === mainWindow.webContents,
  };
}

/**
 * The runtime's change notices to our window (its top frame, while it shows our page), and an
 * approvals notice also makes the notification watcher look at once instead of at its next poll.
 */
function forwardChanges(runtime: BrokerRuntime, approvalsChanged: () => void): () => void {
  const forwarder = createChangeForwarder({
    pageUrl: appPageUrl,
    target: forwardTarget,
    onNotice: (notice) => {
      if (notice.topics.includes('approvals')) approvalsChanged();
    },
  });
  const subscribed = runtime.changes.subscribe(forwarder);
  return subscribed.ok ? subscribed.unsubscribe : () => undefined;
}

function forwardTarget(): ForwardTarget | undefined {
  const win = mainWindow;
  if (win === undefined || win.isDestroyed()) return undefined;
  const contents = win.webContents;
  return { url: contents.getURL(), send: (notice) => contents.send(changeChannel, notice) };
}

/**
 * Looks at approvals.list on every approvals notice (pollNow) and every approvalPollMs as a fallback; a card newly
 * needing a person becomes a notification and the tray's count.
 */
function watchApprovals(handlers: OperatorHandlers): { stop: () => void; pollNow: () => void } {
  const watcher = createApprovalWatcher({
    list: () => handlers['approvals.list']({}),
    notify: showNotice,
    onCount: (count) => tray?.setToolTip(count === 0 ? 'Postern' : `Postern — ${count} waiting for a decision`),
  });
  let polling = false;
  let again = false;
  const pollNow = (): void => {
    if (polling) {
      again = true;
      return;
    }
    polling = true;
    watcher
      .poll()
      .catch(() => undefined)
      .finally(() => {
        polling = false;
        if (again) {
          again = false;
          pollNow();
        }
      });
  };
  const timer = setInterval(pollNow, approvalPollMs);
  return { stop: () => clearInterval(timer), pollNow };
}

function showNotice(notice: CardNotice): void {
  if (!Notification.isSupported()) return;
  const note = new Notification({ title: notice.title, body: notice.body, silent: false });
  note.on('click', showWindow);
  note.show();
}

function createTray(): Tray | undefined {
  try {
    const created = new Tray(trayIcon());
    created.setToolTip('Postern');
    created.setContextMenu(
      Menu.buildFromTemplate([
        { label: 'Show Postern', click: showWindow },
        { type: 'separator' },
        { label: 'Quit Postern', click: () => app.quit() },
      ]),
    );
    created.on('click', showWindow);
    return created;
  } catch {
    // No system tray (some Linux desktops): closing the window then quits.
    return undefined;
  }
}

/** A 16×16 square in the UI's accent colour, drawn here so the package carries no icon file yet. */
function trayIcon(): Electron.NativeImage {
  const size = 16;
  const pixels = Buffer.alloc(size * size * 4);
  for (let i = 0; i < size * size; i += 1) pixels.set([0x8a, 0x5a, 0x2b, 0xff], i * 4); // BGRA
  return nativeImage.createFromBitmap(pixels, { width: size, height: size });
}

/**
 * Quit = the broker host's stop, shared with the headless daemon (shutDownRuntime): stop intake (IPC answers
 * SHUTTING_DOWN, the watcher stops, then the runtime's sockets and releases) → wait, bounded, for the released
 * actions to settle → close the runtime, journal last, cutting what is still in flight. Electron's will-quit is held
 * until then.
 */
function handleQuit(runtime: BrokerRuntime, gate: IpcGate, stopWatching: () => void): void {
  const quitGate = createQuitGate();
  app.on('will-quit', (event) => {
    const decision = quitGate.onWillQuit();
    if (decision === 'let-quit') return;
    event.preventDefault();
    if (decision === 'hold') return;
    void shutDownRuntime(runtime, {
      stopHostIntake: () => {
        // IPC answers SHUTTING_DOWN, the watcher stops; the runtime's own intake stops next (shutdown-sequence.ts).
        gate.close();
        stopWatching();
      },
    })
      .then((report) => {
        const cut = describeCutShutdown(report);
        if (cut !== undefined) process.stderr.write(`postern: ${cut}\n`);
      })
      .catch((error: unknown) =>
        process.stderr.write(
          `postern: closing the broker failed: ${error instanceof Error ? error.message : String(error)}\n`,
        ),
      )
      .finally(() => {
        quitGate.finished();
        tray?.destroy();
        app.quit();
      });
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => app.quit());
}

/**
 * The person's confirmation of a decision, in a native dialog main owns and words from its own read of the
 * queue: the renderer can ask for a decision but cannot answer this (docs/desktop.md). Cancel is the default, and an
 * approval whose command the dialog cannot show whole gets Cancel only.
 */
async function confirmInMain(handlers: OperatorHandlers, method: BrokerApiMethod, input: unknown): Promise<boolean> {
  const ticket = typeof input === 'object' && input !== null ? (input as { ticket?: unknown }).ticket : undefined;
  let card;
  if (typeof ticket === 'number') {
    const listed = await handlers['approvals.list']({});
    card = listed.ok ? listed.value.cards.find((c) => c.ticket === ticket) : undefined;
  }
  let configChange;
  if (method === 'config.accept') {
    const pending = await handlers['config.pending']({});
    configChange = pending.ok ? pending.value.change : undefined;
  }
  const words = describeDecision(method, input, card, configChange);
  const options = {
    type: 'question' as const,
    buttons: [...words.buttons],
    defaultId: 0,
    cancelId: 0,
    noLink: true,
    message: words.message,
    detail: words.detail,
  };
  const win = mainWindow;
  const { response } =
    win === undefined || win.isDestroyed()
      ? await dialog.showMessageBox(options)
      : await dialog.showMessageBox(win, options);
  // No confirm button when the dialog cannot show what it would confirm (a command too long for it): never a yes.
  return words.confirmId !== null && response === words.confirmId;
}
