import { describe, expect, it } from 'vitest';
import { listenForCallback, type CallbackAnswer } from './oauth-callback.js';

describe('the loopback OAuth callback', () => {
  it('answers any number of bad requests 400 and still accepts the real callback after them', async () => {
    const answers: CallbackAnswer[] = [];
    const callback = await listenForCallback({
      state: 'state-9d1c',
      timeoutMs: 30_000,
      complete: (answer) => {
        answers.push(answer);
        return Promise.resolve(true);
      },
    });
    try {
      // More than the old limit of 32: a local process probing the port must not close it on the person.
      for (let i = 0; i < 40; i++) {
        const bad = await fetch(`${callback.redirectUri}?state=wrong-${i}&code=x`);
        expect(bad.status).toBe(400);
        await bad.text();
      }
      const good = await fetch(`${callback.redirectUri}?state=state-9d1c&code=the-code`);
      expect(good.status).toBe(200);
      await good.text();
      expect(await callback.done).toBe('authorized');
      expect(answers).toEqual([{ code: 'the-code' }]);
    } finally {
      callback.close();
    }
  });
});
