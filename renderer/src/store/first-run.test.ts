import { describe, expect, it } from 'vitest';
import type { BrokerApi } from '../../../broker/contract/index.js';
import { rowOf } from './action-list-row.test-support.js';
import {
  describeAction,
  firstRun,
  firstRunReducer,
  initialFirstRunView,
  isFreshDataDir,
  passphraseStrength,
  type FirstRunFacts,
  type FirstRunStepState,
} from './first-run.js';

type Config = NonNullable<FirstRunFacts['config']>;
const route = { name: 'docs' } as Config['routes'][number];
const host = { name: 'web-1' } as Config['ssh_hosts'][number];
const noConfig: Config = { routes: [], ssh_hosts: [] };

const fresh: FirstRunFacts = {
  vault: { state: 'uninitialized', credentials: 0 },
  config: noConfig,
  writtenForNextStart: null,
  sessions: 0,
  firstAction: null,
  hookupCopied: false,
  skipped: [],
};

function states(facts: FirstRunFacts): Record<string, FirstRunStepState> {
  return Object.fromEntries(firstRun(facts).steps.map((step) => [step.id, step.state]));
}

describe('the first-run steps', () => {
  it.each<[string, Partial<FirstRunFacts>, string[], string | null]>([
    ['when the data directory is empty, the vault is the step and everything else waits', {}, [], 'vault'],
    [
      'when the vault exists (locked), the credential is next',
      { vault: { state: 'locked', credentials: 0 } },
      ['vault'],
      'credential',
    ],
    [
      'when a credential is in the vault, the route is next',
      { vault: { state: 'unlocked', credentials: 1 } },
      ['vault', 'credential'],
      'route',
    ],
    [
      'when a route is in force, the hookup is next',
      { vault: { state: 'unlocked', credentials: 1 }, config: { routes: [route], ssh_hosts: [] } },
      ['vault', 'credential', 'route'],
      'hookup',
    ],
    [
      'when only an SSH host is configured, the route step is done too',
      { vault: { state: 'unlocked', credentials: 1 }, config: { routes: [], ssh_hosts: [host] } },
      ['vault', 'credential', 'route'],
      'hookup',
    ],
    [
      'when a route was written but applies only at the next start, the route step is done',
      { vault: { state: 'locked', credentials: 1 }, writtenForNextStart: 1 },
      ['vault', 'credential', 'route'],
      'hookup',
    ],
    [
      'when the line was copied, the first call is awaited',
      { vault: { state: 'unlocked', credentials: 1 }, config: { routes: [route], ssh_hosts: [] }, hookupCopied: true },
      ['vault', 'credential', 'route', 'hookup'],
      'first_call',
    ],
    [
      'when an agent connected without the copy (hooked up from the CLI), the hookup counts as done',
      { vault: { state: 'unlocked', credentials: 1 }, config: { routes: [route], ssh_hosts: [] }, sessions: 1 },
      ['vault', 'credential', 'route', 'hookup'],
      'first_call',
    ],
    [
      'when the first action arrived, every step is done',
      {
        vault: { state: 'unlocked', credentials: 1 },
        config: { routes: [route], ssh_hosts: [] },
        sessions: 1,
        firstAction: rowOf(1),
      },
      ['vault', 'credential', 'route', 'hookup', 'first_call'],
      null,
    ],
  ])('%s', (_when, overrides, done, current) => {
    const run = firstRun({ ...fresh, ...overrides });
    expect(run.steps.filter((step) => step.state === 'done').map((step) => step.id)).toEqual(done);
    expect(run.current).toBe(current);
    // Exactly one step is "now" while any is left, and it is the first not done.
    expect(run.steps.filter((step) => step.state === 'current').map((step) => step.id)).toEqual(
      current === null ? [] : [current],
    );
  });

  it('says what is next after the step in progress, and what holds when all are done', () => {
    expect(firstRun(fresh).next).toBe('Next: add the first credential.');
    const done = firstRun({
      ...fresh,
      vault: { state: 'unlocked', credentials: 1 },
      config: { routes: [route], ssh_hosts: [] },
      sessions: 1,
      firstAction: rowOf(1),
    });
    expect(done.next).toMatch(/^All done/);
    expect(done.steps.find((step) => step.id === 'first_call')?.status).toBe(
      'First call: POST docs/docs/1 (ticket #1, committed).',
    );
  });

  it('when a step is skipped, the next one becomes current and the skip is shown; a skipped step that gets done shows done', () => {
    expect(states({ ...fresh, skipped: ['vault'] })).toEqual({
      vault: 'skipped',
      credential: 'current',
      route: 'todo',
      hookup: 'todo',
      first_call: 'todo',
    });
    expect(states({ ...fresh, skipped: ['vault', 'credential', 'route', 'hookup', 'first_call'] })).toEqual({
      vault: 'skipped',
      credential: 'skipped',
      route: 'skipped',
      hookup: 'skipped',
      first_call: 'skipped',
    });
    expect(firstRun({ ...fresh, skipped: ['vault', 'credential', 'route', 'hookup', 'first_call'] }).next).toMatch(
      /skipped ones can be taken/,
    );
    expect(states({ ...fresh, vault: { state: 'locked', credentials: 0 }, skipped: ['vault'] }).vault).toBe('done');
  });

  it('when nothing is known yet, no step is done and the words say it is reading', () => {
    const run = firstRun({ ...fresh, vault: null, config: null });
    expect(run.current).toBe('vault');
    expect(run.steps[0]?.status).toBe('Reading the vault…');
    expect(run.steps[2]?.status).toBe('Reading the configuration…');
  });

  it('names a locked vault that exists as something to unlock, not to create', () => {
    expect(firstRun({ ...fresh, vault: { state: 'locked', credentials: 0 } }).steps[0]?.status).toMatch(
      /exists and is locked/,
    );
  });
});

describe('whether the data directory is fresh', () => {
  it.each<[string, Pick<FirstRunFacts, 'vault' | 'config'>, boolean | null]>([
    ['unknown until the vault status arrived', { vault: null, config: noConfig }, null],
    ['fresh with no vault', { vault: { state: 'uninitialized', credentials: 0 }, config: null }, true],
    [
      'fresh with a vault but no credential',
      { vault: { state: 'unlocked', credentials: 0 }, config: { routes: [route], ssh_hosts: [] } },
      true,
    ],
    [
      'unknown with a credential until the config arrived',
      { vault: { state: 'locked', credentials: 2 }, config: null },
      null,
    ],
    [
      'fresh with a credential but no route or host',
      { vault: { state: 'locked', credentials: 2 }, config: noConfig },
      true,
    ],
    [
      'not fresh with a credential and a route',
      { vault: { state: 'locked', credentials: 2 }, config: { routes: [route], ssh_hosts: [] } },
      false,
    ],
    [
      'not fresh with a credential and an SSH host',
      { vault: { state: 'unlocked', credentials: 1 }, config: { routes: [], ssh_hosts: [host] } },
      false,
    ],
  ])('%s', (_when, facts, expected) => {
    expect(isFreshDataDir(facts)).toBe(expected);
  });
});

describe('the passphrase strength hint', () => {
  it.each<[string, string]>([
    ['', 'empty'],
    ['short', 'too_short'],
    ['ééé', 'too_short'],
    ['eightchr', 'weak'],
    ['ëëëë', 'weak'],
    ['fourteen chars', 'fair'],
    ['cat dog owl', 'fair'],
    ['correct horse battery staple', 'strong'],
    ['x'.repeat(20), 'strong'],
  ])('rates %j as %s (bytes and words only)', (passphrase, strength) => {
    expect(passphraseStrength(passphrase).strength).toBe(strength);
  });

  it('never repeats the passphrase in its hint', () => {
    for (const passphrase of ['abc', 'secretpass', 'correct horse battery staple'])
      expect(passphraseStrength(passphrase).hint).not.toContain(passphrase);
  });
});

describe('the first-run reducer', () => {
  const list = (actions: BrokerApi['actions.list']['output']['actions']) => ({
    ok: true as const,
    value: {
      actions,
      next_before: null,
      searched_before_seq: null,
      as_of_seq: Math.max(0, ...actions.map((a) => a.last_seq)),
    },
  });

  it('records a creation and its refusal, without any passphrase in the state', () => {
    let view = firstRunReducer(initialFirstRunView, { type: 'create_started' });
    expect(view.creating).toBe(true);
    view = firstRunReducer(view, {
      type: 'create_finished',
      reply: { ok: false, error: { code: 'VAULT_ALREADY_INITIALIZED', message: 'exists' } },
    });
    expect(view).toMatchObject({
      creating: false,
      created: { ok: false, error: { code: 'VAULT_ALREADY_INITIALIZED' } },
    });
    view = firstRunReducer(view, { type: 'create_finished', reply: { ok: true, value: { state: 'unlocked' } } });
    expect(view.created).toEqual({ ok: true });
  });

  it('keeps the newest action it saw when a later read fails or finds none', () => {
    let view = firstRunReducer(initialFirstRunView, { type: 'actions_received', reply: list([]) });
    expect(view.firstAction).toBeNull();
    view = firstRunReducer(view, { type: 'actions_received', reply: list([rowOf(1)]) });
    expect(view.firstAction?.action_id).toBe('act_row000001');
    view = firstRunReducer(view, {
      type: 'actions_received',
      reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'down' } },
    });
    expect(view.firstAction?.action_id).toBe('act_row000001');
  });

  it('skips a step once, and takes it back', () => {
    let view = firstRunReducer(initialFirstRunView, { type: 'skipped', step: 'hookup' });
    view = firstRunReducer(view, { type: 'skipped', step: 'hookup' });
    expect(view.skipped).toEqual(['hookup']);
    expect(firstRunReducer(view, { type: 'unskipped', step: 'hookup' }).skipped).toEqual([]);
  });

  it('keeps the hookup lines and a refusal beside them', () => {
    const hookup = {
      data_dir: '/d',
      clients: [{ client: 'claude-code' as const, text: 'claude mcp add postern -- node bin mcp', where: 'run it' }],
      note: null,
    };
    let view = firstRunReducer(initialFirstRunView, { type: 'hookup_received', reply: { ok: true, value: hookup } });
    view = firstRunReducer(view, {
      type: 'hookup_received',
      reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'down' } },
    });
    expect(view.hookup).toEqual(hookup);
    expect(view.hookupError?.code).toBe('BROKER_UNREACHABLE');
  });
});

describe('an action as the guide names it', () => {
  it.each<[string, Parameters<typeof describeAction>[0], string]>([
    [
      'an HTTP call waiting for approval',
      rowOf(3, {
        decision: null,
        outcome: null,
        effect: null,
        dispatched_at_ms: null,
        settled_at_ms: null,
        method: 'GET',
        request: '/v1/items',
      }),
      'GET docs/v1/items (ticket #3, waiting for approval)',
    ],
    ['an approved call in flight', rowOf(4, { outcome: null, request: '/x' }), 'POST docs/x (ticket #4, in progress)'],
    [
      'a call with no card still running (approval none: no decision; no outcome while open)',
      rowOf(7, { ticket: null, decision: null, outcome: null, effect: null, settled_at_ms: null, request: '/r' }),
      'POST docs/r (in progress)',
    ],
    [
      'an SSH command that failed',
      rowOf(5, {
        channel: 'ssh',
        target: 'web-1',
        method: null,
        request: 'uptime',
        outcome: 'rejected',
        code: 'COMMAND_FAILED',
      }),
      'web-1: uptime (ticket #5, rejected COMMAND_FAILED)',
    ],
    ['a call with no card (approval none)', rowOf(6, { ticket: null, request: '/' }), 'POST docs/ (committed)'],
  ])('%s', (_what, row, words) => {
    expect(describeAction(row)).toBe(words);
  });
});
