import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import type { Journal, UnitRows } from '../journal/index.js';
import type { DispatchGate } from '../ports/index.js';
import { AdversarialHttpServer } from '../testing/adversarial-http-server.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';

let h: HttpActionHarness;
beforeAll(async () => {
  h = await openHttpActionHarness();
});
afterAll(async () => {
  await h.dispose();
});

/**
 * The journal as the executor sees it, whose CREDENTIAL_AUTHORIZED append is written at once (its place in the FIFO
 * is kept) but reported durable only once the channel began its dispatch: the group commit's worst case, where
 * that row becomes durable only with the DISPATCH_STARTED after it.
 */
function heldAuthorization(journal: Journal, dispatchBegun: Promise<void>): Journal {
  return new Proxy(journal, {
    get(target, key) {
      if (key === 'append' || key === 'appendLater') {
        return (event: NewEvent, rows?: UnitRows) => {
          const appended = key === 'append' ? target.append(event, rows) : target.appendLater(event);
          if (event.kind !== 'CREDENTIAL_AUTHORIZED') return appended;
          return Promise.all([appended, dispatchBegun]).then(([a]) => a);
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('CREDENTIAL_AUTHORIZED and the channel (FIFO commit order, authorize-credential.ts)', () => {
  it('the channel runs before CREDENTIAL_AUTHORIZED is awaited: an action completes though that row is reported durable only after dispatch began', async () => {
    // Awaiting CREDENTIAL_AUTHORIZED before channel.perform would never call beginDispatch: this run would hang
    // and the test fail on its timeout.
    const server = await AdversarialHttpServer.start({
      journalPath: h.temp.path,
      script: () => ({ kind: 'respond', status: 200, body: '{"id":7}', applyEffect: true }),
    });
    const journal = h.temp.journal;
    let begin = (): void => undefined;
    const dispatchBegun = new Promise<void>((resolve) => {
      begin = resolve;
    });
    const gate: DispatchGate = {
      beginDispatch: (id, attempt, c) => {
        begin();
        return journal.beginDispatch(id, attempt, c);
      },
      append: (e) => journal.append(e),
    };
    h.channel.close();
    h.channel = h.newChannel({ gate });
    try {
      const { envelope } = await h.run(
        localRouteConfig(server.port),
        { route: 'docs', method: 'POST', path: '/documents/7', body: '{"title":"x"}' },
        { journal: heldAuthorization(journal, dispatchBegun) },
      );
      expect(envelope.error).toBeUndefined();
      expect(envelope.effect).toBe('succeeded');
      const kinds = h.events(envelope.invocation_id).map((e) => e.kind);
      expect(kinds.indexOf('CREDENTIAL_AUTHORIZED')).toBeGreaterThan(-1);
      expect(kinds.indexOf('CREDENTIAL_AUTHORIZED')).toBeLessThan(kinds.indexOf('DISPATCH_STARTED'));
      expect(server.log.filter((e) => e.event === 'effect_applied')).toHaveLength(1);
    } finally {
      await server.stop();
    }
  }, 10_000);
});
