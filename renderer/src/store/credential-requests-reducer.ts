import type { BrokerApi, CredentialRequestCard, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';
import { credentialInput, emptyCredentialDraft, formCredentialKind, type CredentialDraft } from './credential-draft.js';
import { callFinished, callStarted, emptyCallBook, type CallBook } from './operator-call.js';

/**
 * Agents' credential requests (request_credential) as cards in the Approvals view. The events carry request ids,
 * call names and replies — never a secret: the pasted value goes from its secret field straight into the
 * provision call (credential-requests-slice.ts) and no event, reply or state here holds it.
 */
export interface CredentialRequestsView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  /** As the broker lists them: pending first (oldest first), then recent answered ones. */
  requests: CredentialRequestCard[];
  error: ReplyError | null;
  replies: number;
  calls: CallBook<string>;
}

export type CredentialRequestsEvent =
  | { type: 'requested' }
  | { type: 'received'; reply: Reply<BrokerApi['credential_requests.list']['output']> }
  | { type: 'call_started'; requestId: string; call: string }
  | { type: 'call_finished'; requestId: string; call: string; reply: Reply<unknown>; message: string };

export const initialCredentialRequestsView: CredentialRequestsView = {
  phase: 'idle',
  requests: [],
  error: null,
  replies: 0,
  calls: emptyCallBook(),
};

/** Pure: the next view from the current one and one event. */
export function credentialRequestsReducer(
  view: CredentialRequestsView,
  event: CredentialRequestsEvent,
): CredentialRequestsView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok
        ? { ...view, phase: 'ready', requests: event.reply.value.requests, error: null, replies: view.replies + 1 }
        : { ...view, phase: 'error', error: event.reply.error, replies: view.replies + 1 };
    case 'call_started':
      return { ...view, calls: callStarted(view.calls, event.requestId, event.call) };
    case 'call_finished':
      return {
        ...view,
        calls: callFinished(view.calls, event.requestId, event.call, event.reply, event.message),
      };
  }
}

/** How much of an agent's text a card shows before an ellipsis (the contract allows a 500-character purpose). */
export const cardTextCharsMax = { purpose: 500, short: 120, url: 200 } as const;

/** `text` cut to `max` characters (by code point, so no surrogate half is shown) with an ellipsis when cut. */
export function boundedText(text: string, max: number): string {
  const points = Array.from(text);
  return points.length <= max ? text : `${points.slice(0, Math.max(0, max - 1)).join('')}…`;
}

/** What the request is for, in words: "route docs" or "host *.example.com". */
export function requestTarget(card: CredentialRequestCard): string {
  if (card.for === null) return '(sealed until the vault is unlocked)';
  return 'route' in card.for ? `route ${card.for.route}` : `host ${card.for.host}`;
}

/** The status line of a request that no longer waits, e.g. "Provisioned: tracker-token (added) by alice". */
export function requestStatusLine(card: CredentialRequestCard): string {
  const by = card.decided_by === null ? '' : ` by ${card.decided_by}`;
  switch (card.status) {
    case 'pending':
      return 'Waiting for a person';
    case 'provisioned': {
      const how = card.how === 'bound_existing' ? 'an existing credential' : 'added';
      return `Provisioned: ${card.credential ?? '(name unknown)'} (${how})${by}`;
    }
    case 'declined':
      return `Declined${by}${card.reason === null ? '' : `: ${card.reason}`}`;
    case 'expired':
      return 'Expired: nobody answered in time';
  }
}

/** A request's provision form prefilled from the broker's suggestion; the person may change every field. */
export function provisionDraftOf(card: CredentialRequestCard): CredentialDraft {
  return {
    ...emptyCredentialDraft,
    name: card.suggested.name ?? '',
    kind: formCredentialKind(card.suggested.kind ?? card.kind) ?? 'bearer',
    header: card.suggested.header ?? card.header ?? '',
    bindings: card.suggested.bindings.join(', '),
  };
}

export type ProvisionNew = Extract<BrokerApi['credential_requests.provision']['input'], { credential: unknown }>;

/** The provision call's input: the request answered with the credential the draft and the secret make. */
export function provisionInput(requestId: string, draft: CredentialDraft, secret: string): ProvisionNew {
  return { request_id: requestId, credential: credentialInput(draft, secret) };
}

/**
 * The href a "Show link" click may open: only an https URL (the broker already refuses anything else; this keeps a
 * javascript: or data: URL from ever becoming a link should that check regress). Null: shown as text only.
 */
export function docsHref(url: string | null): string | null {
  if (url === null) return null;
  try {
    return new URL(url).protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}
