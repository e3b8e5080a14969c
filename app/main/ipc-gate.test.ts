import { describe, expect, it, vi } from 'vitest';
import { brokerApiMethods, type BrokerApiMethod, type Reply } from '../../broker/contract/index.js';
import { createIpcGate, isOperatorMethod, isOurPage, parseIpcInput, senderAllowed, type IpcHandlers, type IpcSenderFacts } from './ipc-gate.js';

const pageUrl = 'file:///opt/Postern/resources/app.asar/dist/renderer/index.html';
const ourFrame: IpcSenderFacts = { frameUrl: pageUrl, isMainFrame: true, fromOurWindow: true };

function fakeHandlers(): IpcHandlers & { calls: Array<[BrokerApiMethod, unknown]> } {
  const calls: Array<[BrokerApiMethod, unknown]> = [];
  const handlers = Object.fromEntries(
    brokerApiMethods.map((method) => [method, (input: unknown): Promise<Reply<unknown>> => {
      calls.push([method, input]);
      return Promise.resolve({ ok: true, value: { method } });
    }]),
  ) as unknown as IpcHandlers;
  return Object.assign(handlers, { calls });
}

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
    expect(parseIpcInput('approvals.approve', { ticket: -1 })).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENT', field: 'ticket' } });
    expect(parseIpcInput('approvals.approve', { ticket: 7, extra: true })).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENT' } });
    expect(parseIpcInput('approvals.reject', { ticket: 7, reason: '   ' })).toMatchObject({ ok: false, error: { field: 'reason' } });
    expect(parseIpcInput('status', undefined)).toEqual({ ok: true, value: {} });
    expect(parseIpcInput('status', 'a string')).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENT' } });
  });
});

describe('the IPC gate', () => {
  it('when our page calls with a valid input, the method’s handler answers with the parsed input', async () => {
    const handlers = fakeHandlers();
    const gate = createIpcGate({ pageUrl, handlers });
    await expect(gate.handle('approvals.reject', ourFrame, { ticket: 3, reason: ' no ' })).resolves.toEqual({ ok: true, value: { method: 'approvals.reject' } });
    expect(handlers.calls).toEqual([['approvals.reject', { ticket: 3, reason: 'no' }]]);
  });

  it('when another page calls, nothing reaches the broker', async () => {
    const handlers = fakeHandlers();
    const gate = createIpcGate({ pageUrl, handlers });
    const reply = await gate.handle('approvals.approve', { ...ourFrame, frameUrl: 'https://example.com/' }, { ticket: 1 });
    expect(reply).toMatchObject({ ok: false, error: { code: 'UNAUTHENTICATED' } });
    expect(handlers.calls).toEqual([]);
  });

  it('when the channel is not an operator method, nothing reaches the broker', async () => {
    const handlers = fakeHandlers();
    await expect(createIpcGate({ pageUrl, handlers }).handle('shell.openExternal', ourFrame, {})).resolves.toMatchObject({ ok: false });
    expect(handlers.calls).toEqual([]);
  });

  it('when the input is malformed, nothing reaches the broker', async () => {
    const handlers = fakeHandlers();
    const reply = await createIpcGate({ pageUrl, handlers }).handle('actions.attest', ourFrame, { action_id: 'act_1', outcome: 'not_attempted', effect: 'no_effect', basis: 'x' });
    expect(reply).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENT', field: 'outcome' } });
    expect(handlers.calls).toEqual([]);
  });

  it('when the app is shutting down, every call answers SHUTTING_DOWN', async () => {
    const handlers = fakeHandlers();
    const gate = createIpcGate({ pageUrl, handlers });
    gate.close();
    expect(gate.accepting).toBe(false);
    await expect(gate.handle('status', ourFrame, {})).resolves.toMatchObject({ ok: false, error: { code: 'SHUTTING_DOWN' } });
    expect(handlers.calls).toEqual([]);
  });

  it('has a handler for every method (a missing one would not compile; this checks the runtime map)', async () => {
    const handle = vi.fn((): Promise<Reply<unknown>> => Promise.resolve({ ok: true, value: null }));
    const handlers = Object.fromEntries(brokerApiMethods.map((m) => [m, handle])) as unknown as IpcHandlers;
    const gate = createIpcGate({ pageUrl, handlers });
    await gate.handle('metrics', ourFrame, {});
    expect(handle).toHaveBeenCalledOnce();
  });
});
