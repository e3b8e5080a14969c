import type { z } from 'zod';
import {
  brokerApiMethods,
  brokerApiSchemas,
  isDecisionMethod,
  type BrokerApiMethod,
  type DesktopRefusalCode,
  type Reply,
} from '../../broker/contract/index.js';

/**
 * What main checks before an IPC call reaches the broker, as a pure gate (no Electron import, so
 * it is unit-tested with plain objects): the channel is one of the operator methods, the caller is
 * the top frame of our own window showing our bundled page, the input parses with the method's
 * contract schema, and the app is not shutting down. The operator handlers parse the input again;
 * checking here too means a malformed call never reaches them at all.
 */

/**
 * The messages of the refusals main gives itself; each code and its one meaning is in the registry
 * (broker/contract/error-codes.ts, source `desktop`), which this table may not leave.
 */
export const IpcRefusal = {
  /** The call came from a frame, window or page that is not the Postern UI (same code as the HTTP host's token check). */
  UNAUTHENTICATED: 'IPC from a page that is not the Postern UI.',
  /** The app is quitting: intake stopped, in-flight work is draining, the journal is about to close. */
  SHUTTING_DOWN: 'Postern is shutting down; nothing new is accepted.',
  /** A decision the person did not confirm in main's own dialog (cancelled, or the dialog could not be shown). */
  NOT_CONFIRMED: 'The decision was not confirmed in the Postern dialog; nothing was decided.',
} as const satisfies { readonly [K in DesktopRefusalCode]?: string };
export type IpcRefusal = keyof typeof IpcRefusal;

/** The facts about an IPC sender main reads from Electron's event (see senderFacts in main.ts). */
export interface IpcSenderFacts {
  /** event.senderFrame?.url; undefined once the frame is gone. */
  readonly frameUrl: string | undefined;
  /** The sending frame is its page's top frame (no iframe, which our page never has). */
  readonly isMainFrame: boolean;
  /** event.sender is the web contents of the window main opened (not a devtools or other contents). */
  readonly fromOurWindow: boolean;
}

/** The one page allowed to call: our bundled renderer, compared without its fragment. */
export function isOurPage(url: string | undefined, pageUrl: string): boolean {
  if (url === undefined) return false;
  const hash = url.indexOf('#');
  return (hash === -1 ? url : url.slice(0, hash)) === pageUrl;
}

export function senderAllowed(facts: IpcSenderFacts, pageUrl: string): boolean {
  return facts.fromOurWindow && facts.isMainFrame && isOurPage(facts.frameUrl, pageUrl);
}

/** One IPC channel name per operator method: main registers exactly these, the preload invokes them. */
export function isOperatorMethod(name: string): name is BrokerApiMethod {
  return (brokerApiMethods as readonly string[]).includes(name);
}

/** Parses `input` with the method's contract schema; INVALID_ARGUMENT names the field, as the handlers do. */
export function parseIpcInput(method: BrokerApiMethod, input: unknown): { ok: true; value: unknown } | Reply<never> {
  const parsed = (brokerApiSchemas[method].input as z.ZodType).safeParse(input ?? {});
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0];
  const field = issue === undefined || issue.path.length === 0 ? 'input' : issue.path.map(String).join('.');
  return { ok: false, error: { code: 'INVALID_ARGUMENT', message: `${field}: ${issue?.message ?? 'invalid'}`, field } };
}

/**
 * How every call through this gate is recorded: a person at the desktop window. The proof is the
 * window itself: only our own top frame showing our bundled page reaches these handlers, and a
 * same-user process cannot click in it (on X11 it can synthesise input: docs/operator.md says so).
 */
export const desktopCaller = { surface: 'desktop', auth: 'desktop_window' } as const;

/** How a decision confirmed in main's dialog is recorded: the renderer asked, a person answered main. */
export const confirmedDesktopCaller = { surface: 'desktop', auth: 'desktop_confirmed' } as const;

export type DesktopCaller = typeof desktopCaller | typeof confirmedDesktopCaller;

export type IpcHandlers = {
  readonly [M in BrokerApiMethod]: (input: unknown, caller: DesktopCaller) => Promise<Reply<unknown>>;
};

/**
 * Asks the person, in a dialog main owns (not the renderer's page), whether to make this decision. Resolves
 * true only on an explicit confirmation; a dialog that cannot be shown resolves false.
 */
export type ConfirmDecision = (method: BrokerApiMethod, input: unknown) => Promise<boolean>;

/**
 * Which decisions need main's confirmation: every decision but the unlock, whose passphrase is its own proof
 * (a renderer that does not know it cannot unlock).
 */
export function needsConfirmation(method: BrokerApiMethod): boolean {
  return isDecisionMethod(method) && method !== 'vault.unlock';
}

export interface IpcGate {
  /** Answers one call: a refusal, or what the method's handler answers for the parsed input. */
  handle(method: string, sender: IpcSenderFacts, input: unknown): Promise<Reply<unknown>>;
  /** Stops intake: every later call answers SHUTTING_DOWN. */
  close(): void;
  readonly accepting: boolean;
}

export function createIpcGate(options: { pageUrl: string; handlers: IpcHandlers; confirm: ConfirmDecision }): IpcGate {
  let accepting = true;
  return {
    get accepting() {
      return accepting;
    },
    close() {
      accepting = false;
    },
    handle(method, sender, input) {
      if (!isOperatorMethod(method)) return Promise.resolve(refusal('UNAUTHENTICATED'));
      if (!senderAllowed(sender, options.pageUrl)) return Promise.resolve(refusal('UNAUTHENTICATED'));
      if (!accepting) return Promise.resolve(refusal('SHUTTING_DOWN'));
      const parsed = parseIpcInput(method, input);
      if (!parsed.ok) return Promise.resolve(parsed);
      if (!needsConfirmation(method)) return options.handlers[method](parsed.value, desktopCaller);
      return confirmThenDecide(options, method, parsed.value);
    },
  };
}

/** The decisions the broker can tell beforehand it would refuse (`actions.precheck`, a read), and as which operation. */
const prechecked: Partial<Record<BrokerApiMethod, 'reconcile' | 'retry'>> = {
  'actions.reconcile': 'reconcile',
  'actions.retry': 'retry',
};

/**
 * A compromised renderer holds every operator method's channel; what it cannot do is answer a dialog main
 * shows. So a decision from the window runs only after the person confirmed it there. A reconcile or retry the
 * broker would refuse before sending anything (no lookup, no kept request, not a recorded unknown) is refused
 * before the dialog, as the CLI refuses before its passphrase prompt: nobody confirms what cannot happen.
 */
async function confirmThenDecide(
  options: { handlers: IpcHandlers; confirm: ConfirmDecision },
  method: BrokerApiMethod,
  input: unknown,
): Promise<Reply<unknown>> {
  const operation = prechecked[method];
  if (operation !== undefined) {
    const { action_id } = input as { action_id: string };
    const precheck = await options.handlers['actions.precheck']({ action_id, operation }, desktopCaller);
    if (!precheck.ok) return precheck;
  }
  let confirmed = false;
  try {
    confirmed = (await options.confirm(method, input)) === true;
  } catch {
    confirmed = false;
  }
  if (!confirmed) return refusal('NOT_CONFIRMED');
  return options.handlers[method](input, confirmedDesktopCaller);
}

export function refusal(code: IpcRefusal): Reply<never> {
  return { ok: false, error: { code, message: IpcRefusal[code] } };
}
