import path from 'node:path';
import type { PosternConfig } from '../config/index.js';
import { CodedError } from '../contract/index.js';
import {
  createBrokerRuntime,
  createOperatorHandlers,
  webProofFor,
  describeCutShutdown,
  describeHardening,
  drainBoundMs,
  drainPollMs,
  hardenProcess,
  shutDownRuntime,
  signInCodeLabel,
  startOperatorHttpHost,
  type OperatorHttpHost,
  type OperatorHttpHostOptions,
} from '../host/index.js';
import { systemClock, type CredentialInfo } from '../ports/index.js';
import type { CliIo } from './cli-io.js';
import { inspectorPortParked } from '../core/index.js';
import {
  inspectorSignalsRefused,
  refuseInspectorSignal,
  refuseOpenInspector,
  startedParked,
  watchForOpenInspector,
} from '../host/inspector-guard.js';
import type { ConfigTrust } from '../host/config-integrity.js';
import { packageRoot } from '../host/package-root.js';
import { stopDrainBoundMs, type StopSignal } from './stop-signal.js';

export interface HeadlessOptions {
  dataDir: string;
  /** `--port`; absent: the accepted configuration's `operator.port`, else 0 (any free port). */
  port?: number;
  version: string;
  io: CliIo;
  stopSignal: Promise<StopSignal>;
  /** Unlocks the vault at start; zeroed here once used. */
  vaultPassphrase?: Buffer;
  /** `--config FILE` (else <dataDir>/postern.yaml). */
  configFile?: string;
  /** `--test-action-list-scan-rows` (tests only): the action list's lowered search bound. */
  actionListScanRowsMax?: number;
  /** `--test-drain-ms` (tests only): the stop's drain bound, lowered from drainBoundMs. */
  drainBoundMs?: number;
}

/**
 * The headless broker: the runtime for the data directory and the operator host in front of it,
 * until SIGINT/SIGTERM. Shutdown is the desktop's sequence (shutDownRuntime): stop intake (the operator host, the
 * control socket, new agent connections and calls, further releases), drain the dispatched actions (bounded,
 * drainBoundMs), close the runtime (what is still in flight then is cut), then exit 0. A second signal exits 130 at once
 * (stop-signal.ts).
 */
export async function runHeadless(options: HeadlessOptions): Promise<number> {
  const { io, dataDir } = options;
  // First, before the vault can be unlocked: no decrypted credential ever sits in a readable process, nor in
  // one whose inspector is open (broker/host/inspector-guard.ts).
  const hardening = hardenProcess();
  try {
    refuseOpenInspector('unlock the vault or serve agents');
  } catch (error) {
    options.vaultPassphrase?.fill(0);
    throw error;
  }
  const runtime = await createBrokerRuntime({
    dataDir,
    mode: 'headless',
    version: options.version,
    startedAtMs: systemClock.nowMs(),
    ...(options.vaultPassphrase === undefined ? {} : { vaultPassphrase: options.vaultPassphrase }),
    ...(options.configFile === undefined ? {} : { configFile: options.configFile }),
    actionListScanRowsMax: options.actionListScanRowsMax,
  }).finally(() => options.vaultPassphrase?.fill(0));
  const port = operatorPort(options.port, runtime.config);
  let host: OperatorHttpHost;
  try {
    host = await startOperatorHttpHost({
      handlers: createOperatorHandlers(runtime.broker),
      // The sign-in code proves only that the caller read this terminal: a web decision also needs the passphrase.
      proof: webProofFor(runtime, systemClock),
      rendererDir: path.join(packageRoot, 'dist', 'renderer'),
      port: port.value,
      changes: runtime.changes,
      // Each URL signs in once; the next one goes only to this terminal (the operator's own), never to a file or the UI.
      ...signInNotices(io),
    });
  } catch (error) {
    await runtime.close();
    throw listenError(error, port);
  }
  io.out(`Postern ${options.version} is running headless. Data directory: ${dataDir}`);
  if (hardening.hardened) io.out(describeHardening(hardening));
  else io.err(describeHardening(hardening));
  io.out(`Vault: ${runtime.vault.state()}${runtime.vault.state() === 'locked' ? ' (postern vault unlock)' : ''}`);
  io.out(startupSummary(runtime.config, runtime.vault.list(), runtime.configTrust()));
  if (!host.rendererBuilt)
    io.err(
      'warning: the operator UI is not built (dist/renderer is missing); run `npm run build:renderer`. The API works.',
    );
  // The only place the token and the code are ever printed: the operator's own terminal. The code is never in the URL:
  // opening the URL puts it on a command line every process of the user reads; the person types the code.
  io.out(`Operator UI: ${host.operatorUrl}`);
  io.out(
    `${signInCodeLabel}: ${host.signInCode} (type it on the page, do not copy it: it is not in the URL, so a program ` +
      'that reads the link cannot sign in, and a copy goes through the clipboard, which programs can read)',
  );
  io.event({ event: 'ready', mode: 'headless', origin: host.origin, port: host.port, data_dir: dataDir });

  if (!startedParked())
    io.err(
      `warning: node was started without ${inspectorPortParked}, so until Postern's first line ran a SIGUSR1 from ` +
        `another process could have opened node's inspector; start it as \`postern …\` (bin/postern.mjs's first line ` +
        `passes it) or \`node ${inspectorPortParked} bin/postern.mjs …\`.`,
    );
  const logRefusal = signalRefusalLog(io);
  // Signals refused while starting (bin/postern.mjs's listener counted them) are told now, with the later ones.
  if (inspectorSignalsRefused() > 0) logRefusal(inspectorSignalsRefused());
  const stopLogging = refuseInspectorSignal(logRefusal);
  let stopWatching = (): void => undefined;
  const inspectorOpened = new Promise<'DEBUGGER_OPEN'>((resolve) => {
    stopWatching = watchForOpenInspector('keep running', (refusal) => {
      io.err(`postern: ${refusal.code} ${refusal.message}`);
      resolve('DEBUGGER_OPEN');
    });
  });
  const signal = await Promise.race([options.stopSignal, inspectorOpened]);
  stopWatching();
  stopLogging();
  if (signal !== 'DEBUGGER_OPEN') io.err(`Received ${signal}; stopping.`);
  io.event({ event: 'stopping', signal });
  const report = await shutDownRuntime(runtime, {
    stopHostIntake: () => host.close(),
    bounds: { drainBoundMs: stopDrainBoundMs(signal, options.drainBoundMs ?? drainBoundMs), drainPollMs },
  });
  const cut = describeCutShutdown(report);
  if (cut !== undefined) io.err(`warning: ${cut}`);
  io.event({ event: 'stopped', drained: report.drained, left_in_flight: report.leftInFlight });
  return signal === 'DEBUGGER_OPEN' ? 2 : 0;
}

/** Refuses after this long are counted and told with the next line, so a flood of signals cannot flood the log. */
const signalRefusalQuietMs = 60_000;

/**
 * A line for the operator when another process sent SIGUSR1 (an attempt to open the inspector): at most one a
 * minute, each saying how many were refused in all. Node does not say who sent it.
 */
function signalRefusalLog(io: CliIo): (refused: number) => void {
  let lastLineMs = Number.NEGATIVE_INFINITY;
  return (refused) => {
    const now = systemClock.nowMs();
    if (now - lastLineMs < signalRefusalQuietMs) return;
    lastLineMs = now;
    io.err(
      `warning: refused SIGUSR1 (a request to open node's inspector, which would let the sender run code in the ` +
        `broker) from another process of this user; the inspector stays closed (${refused} refused since start).`,
    );
  };
}

/**
 * One line: what was loaded, and which entries name a credential the vault does not hold (docs/operator.md). While the
 * configuration is untrusted (no person accepted postern.yaml, or its accepted copy failed its check) nothing listed is
 * in force: the line says every one is refused until a person accepts the file.
 */
export function startupSummary(
  config: PosternConfig,
  credentials: readonly CredentialInfo[],
  trust: ConfigTrust = 'verified',
): string {
  const held = new Set(credentials.map((info) => info.name));
  const entries = [...config.routes.values(), ...config.sshHosts.values()];
  const routes = [...config.routes.values()].map((route) => `${route.name} (${route.injection}, ${route.approval})`);
  const hosts = [...config.sshHosts.values()].map((host) => `${host.name} (${host.approval})`);
  const missing = entries.filter((entry) => !held.has(entry.credential)).map((entry) => entry.name);
  const loaded = `Routes: ${routes.length === 0 ? 'none' : routes.join(', ')}; SSH hosts: ${hosts.length === 0 ? 'none' : hosts.join(', ')}`;
  const line = missing.length === 0 ? loaded : `${loaded}; missing credential: ${missing.join(', ')}`;
  if (trust !== 'untrusted') return line;
  return `${line} — none in force: every route and host is refused until a person accepts postern.yaml (operator UI, Routes & hosts; or postern config pending, then postern config accept)`;
}

interface ChosenPort {
  readonly value: number;
  /** Where it came from, named in a listen error so the person knows what to change. */
  readonly field: '--port' | 'operator.port';
}

/**
 * `--port` wins; else the configuration in force (the accepted one, so an edit nobody accepted
 * cannot move the operator UI); else 0, any free port.
 */
function operatorPort(flag: number | undefined, config: PosternConfig): ChosenPort {
  if (flag !== undefined) return { value: flag, field: '--port' };
  const configured = config.operator?.port;
  return configured === undefined ? { value: 0, field: '--port' } : { value: configured, field: 'operator.port' };
}

function listenError(error: unknown, port: ChosenPort): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const { value, field } = port;
  // The CLI prints `postern: CODE field: message`, so the message does not repeat the field.
  const hint = field === 'operator.port' ? ' (set in the configuration; --port overrides it)' : '';
  if (code === 'EADDRINUSE') {
    // The host holds both loopbacks (so `localhost:PORT` reaches only it): say which one another program holds.
    const address = (error as NodeJS.ErrnoException & { address?: string }).address ?? '127.0.0.1';
    return new CodedError('INVALID_ARGUMENT', `port ${value} is already in use on ${address}${hint}`, {
      field,
      cause: error,
    });
  }
  if (code === 'EACCES')
    return new CodedError('INVALID_ARGUMENT', `not allowed to listen on port ${value}${hint}`, { field, cause: error });
  return error;
}

/** What the operator's terminal is told as sign-ins spend URLs: the next URL and code, and each wrong code. */
function signInNotices(io: CliIo): Pick<OperatorHttpHostOptions, 'onSignIn' | 'onWrongCode'> {
  return {
    onSignIn: (next) => {
      io.out(`Operator UI (next sign-in): ${next.url}`);
      io.out(`${signInCodeLabel} (next sign-in): ${next.code}`);
    },
    onWrongCode: (attemptsLeft) => {
      const left =
        attemptsLeft === 0 ? 'the URL is spent' : `${attemptsLeft} more ${attemptsLeft === 1 ? 'try' : 'tries'}`;
      io.err(
        `warning: a sign-in presented the current URL with a wrong code (${left}). If that was not you mistyping, a ` +
          'program running as you read the link: a browser is started with the URL on its command line, which every ' +
          'process of your user can read. The code was not in it.',
      );
    },
  };
}
