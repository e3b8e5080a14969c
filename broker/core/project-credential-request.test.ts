import { describe, expect, it } from 'vitest';
import type { EventKind } from '../contract/index.js';
import {
  applyCredentialRequestEvent,
  foldCredentialRequestEvent,
  projectCredentialRequests,
  type CredentialRequestEventHeader,
} from './project-credential-request.js';

const id = 'crq_FOLDTEST0001';
const header = (seq: number, kind: EventKind, subject = id): CredentialRequestEventHeader => ({
  seq,
  at_ms: 1_000 * seq,
  kind,
  action_id: subject,
  session_id: 'ses_folder000001',
});

describe('a credential request folded from its event headers', () => {
  it.each([
    ['CREDENTIAL_PROVISIONED', 'provisioned'],
    ['CREDENTIAL_REQUEST_DECLINED', 'declined'],
    ['CREDENTIAL_REQUEST_EXPIRED', 'expired'],
  ] as const)('is pending, then %s ends it as %s', (kind, status) => {
    const asked = applyCredentialRequestEvent(undefined, header(1, 'CREDENTIAL_REQUESTED'));
    expect(asked).toMatchObject({ status: 'pending', session_id: 'ses_folder000001', requested_at_ms: 1_000 });
    expect(applyCredentialRequestEvent(asked, header(2, kind))).toMatchObject({ status, decided_at_ms: 2_000 });
  });

  it.each(['CREDENTIAL_PROVISIONED', 'CREDENTIAL_REQUEST_DECLINED', 'CREDENTIAL_REQUEST_EXPIRED'] as const)(
    'refuses %s after an answer as a lost race (already_decided), not a bug',
    (kind) => {
      const states = projectCredentialRequests([
        header(1, 'CREDENTIAL_REQUESTED'),
        header(2, 'CREDENTIAL_REQUEST_EXPIRED'),
      ]);
      const folded = foldCredentialRequestEvent(states.get(id), header(3, kind));
      expect(folded).toMatchObject({ ok: false, refusal: { kind: 'already_decided', code: 'IMPOSSIBLE_TRANSITION' } });
    },
  );

  it.each([
    ['an answer with no request', undefined, header(1, 'CREDENTIAL_PROVISIONED')],
    ['a second request', 'asked', header(2, 'CREDENTIAL_REQUESTED')],
    ['an action event', 'asked', header(2, 'APPROVED')],
    ['another subject', 'asked', header(2, 'CREDENTIAL_REQUEST_EXPIRED', 'crq_SOMEONEELSE1')],
    ['an out-of-order seq', 'asked', header(1, 'CREDENTIAL_REQUEST_EXPIRED')],
  ] as const)('throws IMPOSSIBLE_TRANSITION for %s', (_what, before, event) => {
    const state =
      before === undefined ? undefined : applyCredentialRequestEvent(undefined, header(1, 'CREDENTIAL_REQUESTED'));
    expect(() => foldCredentialRequestEvent(state, event)).toThrow(
      expect.objectContaining({ code: 'IMPOSSIBLE_TRANSITION' }),
    );
  });

  it('skips every other subject when projecting a mixed log', () => {
    const states = projectCredentialRequests([
      header(1, 'SESSION_STARTED', 'ses_folder000001'),
      header(2, 'CREDENTIAL_REQUESTED'),
      header(3, 'ACTION_ACCEPTED', 'act_FOLDTEST0001'),
    ]);
    expect([...states.keys()]).toEqual([id]);
  });
});
