import inspector from 'node:inspector';
import { CodedError } from '../contract/index.js';

/**
 * Node's inspector is a door into a process: `kill -USR1 <pid>` (or `node inspect -p <pid>`) makes
 * any node process listen on 127.0.0.1:9229, and whoever connects runs code inside it — in a broker,
 * with the vault unlocked, that is every credential and every approval. Non-dumpable memory does
 * not close it (the code runs in the process). THREAT-MODEL.md's agent runs as the same user, so it
 * may send the signal. Two parts close the door in every Postern process:
 *
 * - `refuseInspectorSignal`: a SIGUSR1 listener. With one installed, libuv owns the signal and
 *   node's own handler, which starts the inspector, never runs (Node 20 has no flag for it;
 *   `--disable-sigusr1` came in 22.14). bin/postern.mjs installs one as its first statement, the
 *   desktop main process as its first import.
 * - `refuseOpenInspector`: a process whose inspector is already open (started with `--inspect`, or
 *   a signal that arrived before the listener) closes it and refuses with DEBUGGER_OPEN, at start
 *   and wherever a secret is about to enter memory; the headless broker also looks every second and
 *   stops if one opened.
 */

let refusedSignals = 0;
const signalListeners = new Set<(refused: number) => void>();

function onInspectorSignal(): void {
  refusedSignals += 1;
  for (const listener of signalListeners) listener(refusedSignals);
}

/** Keeps SIGUSR1 from opening the inspector, once per process. Later calls only add `onRefused`. */
export function refuseInspectorSignal(onRefused?: (refused: number) => void): () => void {
  if (!process.listeners('SIGUSR1').includes(onInspectorSignal)) process.on('SIGUSR1', onInspectorSignal);
  if (onRefused === undefined) return () => undefined;
  signalListeners.add(onRefused);
  return () => signalListeners.delete(onRefused);
}

/** How many SIGUSR1 signals this process refused so far. */
export function inspectorSignalsRefused(): number {
  return refusedSignals;
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
