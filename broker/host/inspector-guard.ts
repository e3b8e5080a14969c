import inspector from 'node:inspector';
import { CodedError } from '../contract/coded-error.js';
import { inspectorPortParked } from '../core/inspector-port.js';

/**
 * Node's inspector is a door into a process: `kill -USR1 <pid>` (or `node inspect -p <pid>`) makes
 * any node process listen on 127.0.0.1:9229, and whoever connects runs code inside it — in a broker,
 * with the vault unlocked, that is every credential and every approval. Non-dumpable memory does
 * not close it (the code runs in the process). THREAT-MODEL.md's agent runs as the same user, so it
 * may send the signal. Three parts close the door in every Postern process:
 *
 * - Node is started with the inspector parked on an unreachable address (`inspectorPortParked`,
 *   broker/core/inspector-port.ts), which holds from node's first instruction: the parts below need
 *   Postern's code to run, and a signal before that could let an attacker's code blind them.
 * - `refuseInspectorSignal`: a SIGUSR1 listener. With one installed, libuv owns the signal and
 *   node's own handler, which starts the inspector, never runs (Node 20 has no flag for it;
 *   `--disable-sigusr1` came in 22.14). bin/postern.mjs installs one as its first statement, the
 *   desktop main process as its first import.
 * - `refuseOpenInspector`: a process whose inspector is already open (started with `--inspect`, or
 *   an unparked start signalled before the listener) closes it and refuses with DEBUGGER_OPEN, at
 *   start and wherever a secret is about to enter memory; the headless broker also looks every
 *   second and stops if one opened. Closing does not undo what ran through it: the parking is the
 *   defence, this the backstop.
 */

let refusedSignals = 0;
const signalListeners = new Set<(refused: number) => void>();

/** What bin/postern.mjs's first listener counted before this module loaded (it hands over to ours). */
interface EarlyRefusals {
  refused: number;
  listener: () => void;
}
const earlyKey = Symbol.for('postern.earlyInspectorSignals');

function onInspectorSignal(): void {
  refusedSignals += 1;
  for (const listener of signalListeners) listener(refusedSignals);
}

/** Keeps SIGUSR1 from opening the inspector, once per process. Later calls only add `onRefused`. */
export function refuseInspectorSignal(onRefused?: (refused: number) => void): () => void {
  if (!process.listeners('SIGUSR1').includes(onInspectorSignal)) {
    // Ours first, then the early one goes: there is never a moment without a listener.
    process.on('SIGUSR1', onInspectorSignal);
    const early = (globalThis as { [earlyKey]?: EarlyRefusals })[earlyKey];
    if (early !== undefined) {
      process.off('SIGUSR1', early.listener);
      refusedSignals += early.refused;
    }
  }
  if (onRefused === undefined) return () => undefined;
  signalListeners.add(onRefused);
  return () => signalListeners.delete(onRefused);
}

/** How many SIGUSR1 signals this process refused so far. */
export function inspectorSignalsRefused(): number {
  return refusedSignals;
}

/**
 * Whether node was started with `inspectorPortParked` (so a SIGUSR1 before the first listener opened nothing
 * reachable). A process started otherwise (`node bin/postern.mjs` by hand) had that window open for its first moments.
 */
export function startedParked(execArgv: readonly string[] = process.execArgv): boolean {
  // node takes the last of its inspector options: a later --inspect-port (or --inspect=HOST:PORT) un-parks it.
  const inspectorOptions = execArgv.filter((arg) => /^--inspect(-port|-brk|-wait)?(=|$)/.test(arg));
  return inspectorOptions.at(-1) === inspectorPortParked;
}

/**
 * Throws DEBUGGER_OPEN when node's inspector is open in this process, after closing it (so the door
 * is shut even if the caller goes on to clean up). `purpose` says what was refused, for the line.
 */
export function refuseOpenInspector(purpose: string): void {
  if (inspector.url() === undefined) return;
  inspector.close();
  throw new CodedError(
    'DEBUGGER_OPEN',
    `node's inspector was open in this process (started with --inspect, or opened by a signal before Postern could ` +
      `refuse it); it is closed now and Postern refuses to ${purpose}. Whoever connected to it could run code here.`,
  );
}

/**
 * Every `intervalMs`, whether an inspector opened (a SIGUSR1 that reached node before the listener
 * starts it a moment later); calls `onOpen` once with the refusal and stops looking. The timer does
 * not keep the process alive. Returns the stop function.
 */
export function watchForOpenInspector(
  purpose: string,
  onOpen: (refusal: CodedError) => void,
  intervalMs = 1_000,
): () => void {
  const timer = setInterval(() => {
    try {
      refuseOpenInspector(purpose);
    } catch (error) {
      clearInterval(timer);
      onOpen(error as CodedError);
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
