import { once } from 'node:events';
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestBrowser } from '../../testing/test-browser.js';
import { listenForCallback, type LoopbackCallback } from './oauth-callback.js';

/**
 * The loopback listener on its own: the "authorization server" is a plain URL that /start redirects to; a browser
 * goes through /start (getting the session cookie) and then calls /callback itself, as the AS's redirect would.
 */
const state = 'state-9d1c';
const providerUrl = 'http://127.0.0.1:9/authorize?state=state-9d1c';
let open: LoopbackCallback | undefined;
afterEach(() => open?.close());

async function listener(codes: string[] = []): Promise<LoopbackCallback> {
  open = await listenForCallback({
    state,
    timeoutMs: 30_000,
    complete: (code) => {
      codes.push(code);
      return Promise.resolve(true);
    },
  });
  open.arm(providerUrl);
  return open;
}

async function portIsTaken(port: number): Promise<boolean> {
  const probe = createServer();
  probe.listen(port, '127.0.0.1');
  const [event] = await Promise.race([once(probe, 'listening').then(() => ['listening']), once(probe, 'error')]);
  probe.close();
  return (event as NodeJS.ErrnoException | string) !== 'listening';
}

describe('the loopback OAuth callback', () => {
  it('answers any number of bad requests 400 and still accepts the person’s callback after them', async () => {
    const codes: string[] = [];
    const callback = await listener(codes);
    const person = createTestBrowser('person');
    const start = await person.get(callback.startUrl);
    expect(start.status).toBe(302);
    expect(start.location).toBe(providerUrl);
    // More than the old limit of 32: a local process probing the port must not close it on the person.
    for (let i = 0; i < 40; i++) {
      const bad = await fetch(`${callback.redirectUri}?state=wrong-${i}&code=x`);
      expect(bad.status).toBe(400);
      await bad.text();
    }
    const good = await person.get(`${callback.redirectUri}?state=${state}&code=the-code`);
    expect(good.status).toBe(200);
    expect(await callback.done).toBe('authorized');
    expect(codes).toEqual(['the-code']);
  });

  it('sets a session cookie on /start: HttpOnly, SameSite=Lax, Path=/, no expiry', async () => {
    const callback = await listener();
    const response = await fetch(callback.startUrl, { redirect: 'manual' });
    const [cookie] = response.headers.getSetCookie();
    expect(cookie).toMatch(/^postern_oauth_\d+=[\w-]{43}; HttpOnly; SameSite=Lax; Path=\/$/);
    expect(response.headers.get('cache-control')).toBe('no-store');
  });

  it('a start link with the wrong nonce is refused and changes nothing', async () => {
    const callback = await listener();
    const wrong = await fetch(callback.startUrl.replace(/n=.*/, `n=${'A'.repeat(43)}`), { redirect: 'manual' });
    expect(wrong.status).toBe(400);
    expect(wrong.headers.getSetCookie()).toEqual([]);
    expect((await createTestBrowser('person').get(callback.startUrl)).status).toBe(302);
  });
});

describe('when an agent knows the state but not the person’s cookie', () => {
  it('its callback with a code is refused, nothing is redeemed, and the port stays held', async () => {
    const codes: string[] = [];
    const callback = await listener(codes);
    const person = createTestBrowser('person');
    await person.get(callback.startUrl);
    const agent = createTestBrowser('attacker');
    const injected = await agent.get(`${callback.redirectUri}?state=${state}&code=attacker-code`);
    expect(injected.status).toBe(400);
    // A cookie of another listener's name (cookies are not scoped by port) or with a made-up value is not ours.
    const port = new URL(callback.redirectUri).port;
    for (const cookie of [`postern_oauth_1=x`, `postern_oauth_${port}=${'B'.repeat(43)}`]) {
      const forged = await fetch(`${callback.redirectUri}?state=${state}&code=attacker-code`, { headers: { cookie } });
      expect(forged.status).toBe(400);
    }
    expect(codes).toEqual([]);
    expect(await portIsTaken(Number(port))).toBe(true);
    expect((await person.get(`${callback.redirectUri}?state=${state}&code=person-code`)).status).toBe(200);
    expect(await callback.done).toBe('authorized');
    expect(codes).toEqual(['person-code']);
    // Still held after the authorization: no other process can answer a browser on it in Postern's name.
    expect(await portIsTaken(Number(port))).toBe(true);
  });

  it('its error= callback does not end the authorization; the person’s error= does', async () => {
    const callback = await listener();
    const person = createTestBrowser('person');
    await person.get(callback.startUrl);
    const agent = await fetch(`${callback.redirectUri}?state=${state}&error=access_denied`);
    expect(agent.status).toBe(400);
    const settled = await Promise.race([callback.done, new Promise((r) => setTimeout(() => r('pending'), 100))]);
    expect(settled).toBe('pending');
    expect((await person.get(`${callback.redirectUri}?state=${state}&error=access_denied`)).status).toBe(400);
    expect(await callback.done).toBe('refused');
  });
});

describe('when the start link is opened twice', () => {
  it('the second opening is told the link was used, and the authorization is abandoned', async () => {
    const codes: string[] = [];
    const callback = await listener(codes);
    const agent = createTestBrowser('attacker');
    expect((await agent.get(callback.startUrl)).status).toBe(302);
    const person = await createTestBrowser('person').get(callback.startUrl);
    expect(person.status).toBe(409);
    expect(person.location).toBeUndefined();
    expect(person.text).toMatch(/already used.*someone else did/s);
    expect(await callback.done).toBe('link_reused');
    // The first opener's cookie no longer completes anything.
    expect((await agent.get(`${callback.redirectUri}?state=${state}&code=attacker-code`)).status).toBe(400);
    expect(codes).toEqual([]);
  });

  it('after a callback was accepted, the owner is told (the grant cannot be trusted)', async () => {
    let reused = 0;
    open = await listenForCallback({
      state,
      timeoutMs: 30_000,
      complete: () => Promise.resolve(true),
      reusedAfterCallback: () => {
        reused += 1;
      },
    });
    open.arm(providerUrl);
    const agent = createTestBrowser('attacker');
    await agent.get(open.startUrl);
    expect((await agent.get(`${open.redirectUri}?state=${state}&code=attacker-code`)).status).toBe(200);
    expect(reused).toBe(0);
    expect((await createTestBrowser('person').get(open.startUrl)).status).toBe(409);
    expect(reused).toBe(1);
  });
});
