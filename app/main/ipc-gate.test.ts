import { describe, expect, it, vi } from 'vitest';
import { brokerApiMethods, type BrokerApiMethod, type Reply } from '../../broker/contract/index.js';
import {
  createIpcGate,
  isOperatorMethod,
  isOurPage,
  needsConfirmation,
  parseIpcInput,
  senderAllowed,
  type ConfirmDecision,
  type DesktopCaller,
  type IpcHandlers,
  type IpcSenderFacts,
} from './ipc-gate.js';

const pageUrl = 'file:///opt/Postern/resources/app.asar/dist/renderer/index.html';
const ourFrame: IpcSenderFacts = { frameUrl: pageUrl, isMainFrame: true, fromOurWindow: true };

function fakeHandlers(): IpcHandlers & { calls: Array<[BrokerApiMethod, unknown]>; callers: unknown[] } {
  const calls: Array<[BrokerApiMethod, unknown]> = [];
  const callers: unknown[] = [];
  const handlers = Object.fromEntries(
    brokerApiMethods.map((method) => [
      method,
      (input: unknown, caller: unknown): Promise<Reply<unknown>> => {
        calls.push([method, input]);
        callers.push(caller);
        return Promise.resolve({ ok: true, value: { method } });
      },
    ]),
  ) as unknown as IpcHandlers;
  return Object.assign(handlers, { calls, callers });
}

/** The person's answer in main's dialog, scripted: what each test says they clicked. */
function answers(confirmed: boolean): ConfirmDecision & { asked: BrokerApiMethod[] } {
  const asked: BrokerApiMethod[] = [];
  return Object.assign(
    (method: BrokerApiMethod) => {
      asked.push(method);
      return Promise.resolve(confirmed);
    },
    { asked },
  );
}
const yes = answers(true);

describe('the IPC sender check', () => {
  it.each([
    ['our page', pageUrl, true],
    ['our page with a fragment', `${pageUrl}#/actions/act_1`, true],
    ['our page with a query', `${pageUrl}?x=1`, false],
    ['another file', 'file:///tmp/evil.html', false],
    ['a remote page', 'https://example.com/', false],
    ['a data URL', 'data:text/html,<script>', false],
    ['a gone frame', undefined, false],
  ])('when the frame shows %s it is %s', (_name, url, allowed) => {
    expect(isOurPage(url, pageUrl)).toBe(allowed);
    expect(senderAllowed({ ...ourFrame, frameUrl: url }, pageUrl)).toBe(allowed);
  });

  it('refuses a sub-frame even when it shows our page', () => {
    expect(senderAllowed({ ...ourFrame, isMainFrame: false }, pageUrl)).toBe(false);
  });

  it('refuses another web contents (devtools, a second window) even when it shows our page', () => {
    expect(senderAllowed({ ...ourFrame, fromOurWindow: false }, pageUrl)).toBe(false);
  });
});

describe('the IPC input check', () => {
  it('knows exactly the operator methods as channels', () => {
    for (const method of brokerApiMethods) expect(isOperatorMethod(method)).toBe(true);
    expect(isOperatorMethod('shell.openExternal')).toBe(false);
    expect(isOperatorMethod('__proto__')).toBe(false);
  });

  it('parses with the contract schema and names the bad field', () => {
    expect(parseIpcInput('approvals.approve', { ticket: 7 })).toEqual({ ok: true, value: { ticket: 7 } });
    expect(parseIpcInput('approvals.approve', { ticket: -1 })).toMatchObject({
      ok: false,
      error: { code: 'INVALID_ARGUMENT', field: 'ticket' },
    });
    expect(parseIpcInput('approvals.approve', { ticket: 7, extra: true })).toMatchObject({
      ok: false,
      error: { code: 'INVALID_ARGUMENT' },
    });
    expect(parseIpcInput('approvals.reject', { ticket: 7, reason: '   ' })).toMatchObject({
      ok: false,
      error: { field: 'reason' },
    });
    expect(parseIpcInput('status', undefined)).toEqual({ ok: true, value: {} });
    expect(parseIpcInput('status', 'a string')).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENT' } });
  });
});

describe('the IPC gate', () => {
  it('when our page calls with a valid input, the method’s handler answers with the parsed input', async () => {
    const handlers = fakeHandlers();
    const gate = createIpcGate({ pageUrl, handlers, confirm: yes });
    await expect(gate.handle('approvals.reject', ourFrame, { ticket: 3, reason: ' no ' })).resolves.toEqual({
      ok: true,
      value: { method: 'approvals.reject' },
    });
    expect(handlers.calls).toEqual([['approvals.reject', { ticket: 3, reason: 'no' }]]);
  });

  it('when another page calls, nothing reaches the broker', async () => {
    const handlers = fakeHandlers();
    const gate = createIpcGate({ pageUrl, handlers, confirm: yes });
    const reply = await gate.handle(
      'approvals.approve',
      { ...ourFrame, frameUrl: 'https://example.com/' },
      { ticket: 1 },
    );
    expect(reply).toMatchObject({ ok: false, error: { code: 'UNAUTHENTICATED' } });
    expect(handlers.calls).toEqual([]);
  });

  it('when the channel is not an operator method, nothing reaches the broker', async () => {
    const handlers = fakeHandlers();
    await expect(
      createIpcGate({ pageUrl, handlers, confirm: yes }).handle('shell.openExternal', ourFrame, {}),
    ).resolves.toMatchObject({ ok: false });
    expect(handlers.calls).toEqual([]);
  });

  it('when the input is malformed, nothing reaches the broker', async () => {
    const handlers = fakeHandlers();
    const reply = await createIpcGate({ pageUrl, handlers, confirm: yes }).handle('actions.attest', ourFrame, {
      action_id: 'act_1',
      outcome: 'not_attempted',
      effect: 'no_effect',
      basis: 'x',
    });
    expect(reply).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENT', field: 'outcome' } });
    expect(handlers.calls).toEqual([]);
  });

  it('when the app is shutting down, every call answers SHUTTING_DOWN', async () => {
    const handlers = fakeHandlers();
    const gate = createIpcGate({ pageUrl, handlers, confirm: yes });
    gate.close();
    expect(gate.accepting).toBe(false);
    await expect(gate.handle('status', ourFrame, {})).resolves.toMatchObject({
      ok: false,
      error: { code: 'SHUTTING_DOWN' },
    });
    expect(handlers.calls).toEqual([]);
  });

  it('has a handler for every method (a missing one would not compile; this checks the runtime map)', async () => {
    const handle = vi.fn((): Promise<Reply<unknown>> => Promise.resolve({ ok: true, value: null }));
    const handlers = Object.fromEntries(brokerApiMethods.map((m) => [m, handle])) as unknown as IpcHandlers;
    const gate = createIpcGate({ pageUrl, handlers, confirm: yes });
    await gate.handle('metrics', ourFrame, {});
    expect(handle).toHaveBeenCalledOnce();
  });
});

describe('when the window asks for a decision (a compromised renderer holds every channel)', () => {
  it("nothing is decided unless the person confirms it in main's own dialog", async () => {
    const handlers = fakeHandlers();
    const no = answers(false);
    const reply = await createIpcGate({ pageUrl, handlers, confirm: no }).handle('approvals.approve', ourFrame, {
      ticket: 4,
    });
    expect(reply).toMatchObject({ ok: false, error: { code: 'NOT_CONFIRMED' } });
    expect(no.asked).toEqual(['approvals.approve']);
    expect(handlers.calls).toEqual([]);
  });

  it('a dialog that fails to show decides nothing', async () => {
    const handlers = fakeHandlers();
    const broken: ConfirmDecision = () => Promise.reject(new Error('no display'));
    await expect(
      createIpcGate({ pageUrl, handlers, confirm: broken }).handle('vault.lock', ourFrame, {}),
    ).resolves.toMatchObject({ ok: false, error: { code: 'NOT_CONFIRMED' } });
    expect(handlers.calls).toEqual([]);
  });

  it('a confirmed decision is recorded as confirmed at the desktop; a read asks nothing', async () => {
    const handlers = fakeHandlers();
    const person = answers(true);
    const gate = createIpcGate({ pageUrl, handlers, confirm: person });
    await gate.handle('approvals.reject', ourFrame, { ticket: 5, reason: 'not now' });
    await gate.handle('approvals.list', ourFrame, {});
    expect(person.asked).toEqual(['approvals.reject']);
    expect(handlers.callers).toEqual([
      { surface: 'desktop', auth: 'desktop_confirmed' },
      { surface: 'desktop', auth: 'desktop_window' },
    ]);
  });

  it.each([
    ['actions.reconcile', 'reconcile', 'UNSUPPORTED_ACTION'],
    ['actions.retry', 'retry', 'NOT_FOUND'],
  ] as const)(
    '%s the broker would refuse is refused before the dialog (actions.precheck), and nothing is decided',
    async (method, operation, code) => {
      const handlers = fakeHandlers();
      const refused: Reply<unknown> = { ok: false, error: { code, message: 'cannot work for act_1' } };
      const precheck = handlers['actions.precheck'];
      Object.assign(handlers, {
        'actions.precheck': (input: unknown, caller: DesktopCaller) => precheck(input, caller).then(() => refused),
      });
      const person = answers(true);
      const reply = await createIpcGate({ pageUrl, handlers, confirm: person }).handle(method, ourFrame, {
        action_id: 'act_1',
      });
      expect(reply).toEqual(refused);
      expect(person.asked).toEqual([]);
      expect(handlers.calls).toEqual([['actions.precheck', { action_id: 'act_1', operation }]]);
      expect(handlers.callers).toEqual([{ surface: 'desktop', auth: 'desktop_window' }]);
    },
  );

  it('a reconcile or retry the broker can try is asked in the dialog, then decided as confirmed', async () => {
    const handlers = fakeHandlers();
    const person = answers(true);
    const gate = createIpcGate({ pageUrl, handlers, confirm: person });
    await gate.handle('actions.reconcile', ourFrame, { action_id: 'act_2' });
    await gate.handle('actions.retry', ourFrame, { action_id: 'act_2' });
    expect(person.asked).toEqual(['actions.reconcile', 'actions.retry']);
    expect(handlers.calls).toEqual([
      ['actions.precheck', { action_id: 'act_2', operation: 'reconcile' }],
      ['actions.reconcile', { action_id: 'act_2' }],
      ['actions.precheck', { action_id: 'act_2', operation: 'retry' }],
      ['actions.retry', { action_id: 'act_2' }],
    ]);
  });

  it.each<BrokerApiMethod>([
    'approvals.approve',
    'approvals.reject',
    'approvals.cancel',
    'approvals.abandon',
    'actions.attest',
    'actions.retry',
    'sessions.approve',
    'sessions.revoke',
    'vault.lock',
    'credentials.add',
    'credentials.remove',
    'config.edit',
  ])('%s needs the dialog', (method) => expect(needsConfirmation(method)).toBe(true));

  it.each<BrokerApiMethod>([
    'status',
    'approvals.list',
    'actions.show',
    'activity.list',
    'metrics',
    'vault.status',
    'config.show',
    'vault.unlock',
  ])('%s does not (a read, or the unlock whose passphrase is its own proof)', (method) =>
    expect(needsConfirmation(method)).toBe(false),
  );
});
