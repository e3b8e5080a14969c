import { describe, expect, it } from 'vitest';
import type { ActionState, JournalEvent, NewEvent } from '../contract/index.js';
import { classifyRestart, project } from '../core/index.js';
import { buildCard } from './build-card.js';

const fp = `sha256:${'d'.repeat(64)}`;
const id = 'act_buildcard0001';

/** An action dispatched and then recorded unknown (a restart after DISPATCH_STARTED), on `channel`, with or without a key. */
function dispatchedUnknown(channel: 'http' | 'ssh', keyed: boolean): ActionState {
  const events: NewEvent[] = [
    {
      kind: 'ACTION_ACCEPTED',
      action_id: id,
      payload: {
        channel,
        target: 'route:docs POST /documents/7',
        request_fingerprint: fp,
        approval: 'none',
        idempotent: false,
      },
    },
    {
      kind: 'PREFLIGHT_VALIDATED',
      action_id: id,
      payload: keyed
        ? {
            idempotency: { route: 'docs', scope: 'docs.account', key: 'key-1', fingerprint: fp, expires_at_ms: 10_000 },
          }
        : {},
    },
    {
      kind: 'CREDENTIAL_AUTHORIZED',
      action_id: id,
      payload: {
        credential_id: 'c',
        version_tag: 'v',
        injection_mode: channel === 'ssh' ? 'ssh_key' : 'bearer',
        request_fingerprint: fp,
      },
    },
    { kind: 'DISPATCH_STARTED', action_id: id, payload: { attempt: 1, connection: 'fresh' } },
  ];
  const at = (i: number) => ({ session_id: null, ticket: 1, lane: 'document-7', seq: i + 1, at_ms: i });
  const dispatched = project(events.map((e, i) => ({ ...at(i), ...e }) as JournalEvent)).get(id);
  if (dispatched === undefined) throw new Error('fixture');
  const recorded = {
    kind: 'OUTCOME_RECORDED',
    action_id: id,
    payload: {},
    classification: classifyRestart(dispatched, 0),
  };
  const state = project([...events, recorded].map((e, i) => ({ ...at(i), ...e }) as JournalEvent)).get(id);
  if (state?.outcome !== 'unknown') throw new Error('fixture: not unknown');
  return state;
}

const card = (state: ActionState) =>
  buildCard({
    state,
    wait: {
      action_id: id,
      ticket: 1,
      waiting: 'blocked_head',
      allowed: true,
      waiting_for_ticket: null,
      text: 'blocked',
    },
    preview: undefined,
    session: undefined,
    sessionRecord: 'confirmed',
    expiresAtMs: null,
    credentialOf: () => '(unknown)',
  });

describe('a blocked head card offers a retry only where a person could resend something', () => {
  it.each([
    ['an HTTP call under a bound idempotency key (its request was kept)', 'http', true, true],
    ['an HTTP call without a key (nothing kept to resend)', 'http', false, false],
    ['an SSH command (a person resends no command)', 'ssh', true, false],
  ] as const)('%s: retry_possible %s', (_what, channel, keyed, possible) => {
    expect(card(dispatchedUnknown(channel, keyed))).toMatchObject({
      dispatch_recorded: true,
      retry_possible: possible,
      // The key's window end (its recorded expiry) where a retry is offered; null where none is.
      retry_until_ms: possible ? 10_000 : null,
    });
  });
});
