import type { ActionListRow, AgentHookup, BrokerApi, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

/**
 * The guided first run (#/welcome): create the vault, add a credential, add a route or SSH host,
 * hook an agent up, see its first call. Each step's state is computed from what the broker says
 * (vault status, config, sessions, actions), never remembered, so a step taken elsewhere (the CLI,
 * another tab) shows as done here too. Only "copied the hookup line" and skips are the page's own.
 */
export const firstRunStepIds = ['vault', 'credential', 'route', 'hookup', 'first_call'] as const;
export type FirstRunStepId = (typeof firstRunStepIds)[number];
export type FirstRunStepState = 'done' | 'current' | 'todo' | 'skipped';

export interface FirstRunFacts {
  /** null until the first vault status arrived. */
  vault: BrokerApi['vault.status']['output'] | null;
  /** null until config.show answered. */
  config: Pick<BrokerApi['config.show']['output'], 'routes' | 'ssh_hosts'> | null;
  /** Routes and hosts the file holds after an edit made here that applies only at the next start (the vault was locked); else null. */
  writtenForNextStart: number | null;
  /** Agent sessions the broker knows (any status). */
  sessions: number;
  /** The newest action (on a fresh data directory, the agent's first), once one exists. */
  firstAction: ActionListRow | null;
  hookupCopied: boolean;
  skipped: readonly FirstRunStepId[];
}

export interface FirstRunStep {
  id: FirstRunStepId;
  title: string;
  state: FirstRunStepState;
  /** What holds now, in words ("Vault created and unlocked", "Waiting for your agent's first call…"). */
  status: string;
}

export interface FirstRun {
  steps: FirstRunStep[];
  /** The first step neither done nor skipped; null when every step is done or skipped. */
  current: FirstRunStepId | null;
  /** "Next: …" for the step after the one in progress, or what is left when all are done. */
  next: string;
}

const titles: Record<FirstRunStepId, string> = {
  vault: 'Create the vault',
  credential: 'Add the first credential',
  route: 'Add the first route or SSH host',
  hookup: "Copy your agent's hookup line",
  first_call: "Watch your agent's first call",
};

/** Pure: whether each step is done, and what it says, from the facts. */
function stepFacts(facts: FirstRunFacts): Record<FirstRunStepId, { done: boolean; status: string }> {
  const vault = facts.vault;
  const routes = facts.config === null ? null : facts.config.routes.length + facts.config.ssh_hosts.length;
  const action = facts.firstAction;
  return {
    vault: {
      done: vault !== null && vault.state !== 'uninitialized',
      status:
        vault === null
          ? 'Reading the vault…'
          : vault.state === 'uninitialized'
            ? 'No vault yet: choose a passphrase; it seals every credential.'
            : vault.state === 'locked'
              ? 'The vault exists and is locked: unlock it to add a credential.'
              : 'Vault created and unlocked.',
    },
    credential: {
      done: vault !== null && vault.credentials > 0,
      status:
        vault === null || vault.credentials === 0
          ? 'No credential yet.'
          : `${vault.credentials} ${vault.credentials === 1 ? 'credential' : 'credentials'} in the vault.`,
    },
    route: {
      done: (routes !== null && routes > 0) || (facts.writtenForNextStart ?? 0) > 0,
      status:
        routes !== null && routes > 0
          ? `${routes} ${routes === 1 ? 'route or host' : 'routes and hosts'} in force.`
          : (facts.writtenForNextStart ?? 0) > 0
            ? 'Written to postern.yaml; it applies at the next start (the vault was locked).'
            : routes === null
              ? 'Reading the configuration…'
              : 'No route or SSH host yet.',
    },
    hookup: {
      done: facts.hookupCopied || facts.sessions > 0,
      status:
        facts.sessions > 0
          ? 'An agent is connected.'
          : facts.hookupCopied
            ? 'Hookup line copied: paste it into your MCP client.'
            : 'Not copied yet.',
    },
    first_call: {
      done: action !== null,
      status: action === null ? "Waiting for your agent's first call…" : `First call: ${describeAction(action)}.`,
    },
  };
}

export function firstRun(facts: FirstRunFacts): FirstRun {
  const known = stepFacts(facts);
  const skipped = new Set(facts.skipped);
  let current: FirstRunStepId | null = null;
  const steps = firstRunStepIds.map((id): FirstRunStep => {
    const { done, status } = known[id];
    let state: FirstRunStepState = done ? 'done' : skipped.has(id) ? 'skipped' : 'todo';
    if (state === 'todo' && current === null) {
      current = id;
      state = 'current';
    }
    return { id, title: titles[id], state, status };
  });
  const after = current === null ? -1 : firstRunStepIds.indexOf(current) + 1;
  const following = steps.slice(after).find((step) => step.state === 'todo');
  const next =
    current === null
      ? steps.some((step) => step.state === 'skipped')
        ? 'Every step is done or skipped; skipped ones can be taken here at any time.'
        : 'All done: your agent reaches the route through Postern, and every call shows on Approvals and Activity.'
      : following === undefined
        ? 'Next: nothing more after this one.'
        : `Next: ${following.title.toLowerCase()}.`;
  return { steps, current, next };
}

/**
 * Whether the shell offers the first run by itself: the data directory is fresh (no vault, no
 * credential, or no route or host yet). null while that is not known (nothing shown on a guess).
 */
export function isFreshDataDir(facts: Pick<FirstRunFacts, 'vault' | 'config'>): boolean | null {
  if (facts.vault === null) return null;
  if (facts.vault.state === 'uninitialized' || facts.vault.credentials === 0) return true;
  if (facts.config === null) return null;
  return facts.config.routes.length + facts.config.ssh_hosts.length === 0;
}

/** "POST docs/v1/items (ticket #3, waiting for approval)": the action as the guide names it. */
export function describeAction(action: ActionListRow): string {
  const what =
    action.channel === 'http'
      ? `${action.method ?? ''} ${action.target}${action.request}`.trim()
      : `${action.target}: ${action.request}`;
  const ticket = action.ticket === null ? '' : `ticket #${action.ticket}, `;
  const where =
    action.outcome !== null
      ? `${action.outcome}${action.code === null ? '' : ` ${action.code}`}`
      : action.decision === null && action.dispatched_at_ms === null
        ? 'waiting for approval'
        : 'in progress';
  return `${what} (${ticket}${where})`;
}

export type PassphraseStrength = 'empty' | 'too_short' | 'weak' | 'fair' | 'strong';

/** The vault's rule (broker/vault passphraseBytesMin): at least 8 bytes of UTF-8. */
export const passphraseBytesMin = 8;

/**
 * Pure: a hint while a new passphrase is typed. Only the length in bytes and the number of words count
 * (no dictionary: the hint must not pretend to more); the vault itself enforces the minimum.
 */
export function passphraseStrength(passphrase: string): { strength: PassphraseStrength; hint: string } {
  const bytes = new TextEncoder().encode(passphrase).length;
  const words = passphrase
    .trim()
    .split(/\s+/)
    .filter((w) => w.length >= 3).length;
  if (bytes === 0)
    return {
      strength: 'empty',
      hint: `At least ${passphraseBytesMin} characters; a few unrelated words are easiest to type.`,
    };
  if (bytes < passphraseBytesMin)
    return { strength: 'too_short', hint: `Too short: at least ${passphraseBytesMin} bytes (${bytes} now).` };
  if (bytes >= 20 || words >= 4) return { strength: 'strong', hint: 'Strong enough for a local vault.' };
  if (bytes >= 14 || words >= 3)
    return { strength: 'fair', hint: 'Fair: a longer one (four words, or 20 characters) is better.' };
  return { strength: 'weak', hint: 'Weak: accepted, but four unrelated words are better.' };
}

/** The page's own part of the first run; the rest is read from the broker's views. */
export interface FirstRunView {
  /** The vault creation in flight. */
  creating: boolean;
  created: { ok: true } | { ok: false; error: ReplyError } | null;
  hookup: AgentHookup | null;
  hookupError: ReplyError | null;
  firstAction: ActionListRow | null;
  hookupCopied: boolean;
  skipped: FirstRunStepId[];
}

export type FirstRunEvent =
  | { type: 'create_started' }
  | { type: 'create_finished'; reply: Reply<unknown> }
  | { type: 'hookup_received'; reply: Reply<AgentHookup> }
  | { type: 'actions_received'; reply: Reply<BrokerApi['actions.list']['output']> }
  | { type: 'hookup_copied' }
  | { type: 'skipped'; step: FirstRunStepId }
  | { type: 'unskipped'; step: FirstRunStepId };

export const initialFirstRunView: FirstRunView = {
  creating: false,
  created: null,
  hookup: null,
  hookupError: null,
  firstAction: null,
  hookupCopied: false,
  skipped: [],
};

/** Pure: the next view from the current one and one event. */
export function firstRunReducer(view: FirstRunView, event: FirstRunEvent): FirstRunView {
  switch (event.type) {
    case 'create_started':
      return { ...view, creating: true, created: null };
    case 'create_finished':
      return {
        ...view,
        creating: false,
        created: event.reply.ok ? { ok: true } : { ok: false, error: event.reply.error },
      };
    case 'hookup_received':
      return event.reply.ok
        ? { ...view, hookup: event.reply.value, hookupError: null }
        : { ...view, hookupError: event.reply.error };
    case 'actions_received':
      // A failed read keeps what was known: the guide's last step never goes back to "waiting".
      if (!event.reply.ok) return view;
      return { ...view, firstAction: event.reply.value.actions[0] ?? view.firstAction };
    case 'hookup_copied':
      return { ...view, hookupCopied: true };
    case 'skipped':
      return view.skipped.includes(event.step) ? view : { ...view, skipped: [...view.skipped, event.step] };
    case 'unskipped':
      return { ...view, skipped: view.skipped.filter((step) => step !== event.step) };
  }
}
