import { createElement } from 'react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ActionState, ActivityEvent, AttemptState } from '../../../broker/contract/index.js';
import { dateTime } from '../../../broker/contract/time-words.js';
import type { OperatorApi } from '../api/operator-api.js';
import type { ActionDetail } from '../store/action-detail.js';
import { createAppStore } from '../store/app-store.js';
import { activityRowsOf, shownAction } from '../store/test-cards.js';
import { ActionDetailView, Chronology } from './action-detail-view.js';
import { refusingApi, renderView, textOf } from './render-test-support.js';

const id = 'act_ssh_running1';

const row = activityRowsOf(id, { ticket: null, lane: 'host:box' });

const attempt: AttemptState = {
  n: 1,
  state: 'dispatched',
  setup_stage: null,
  connection: 'fresh',
  connection_id: 'conn-1',
  dispatch_seq: 4,
  request_complete: true,
  response_started: true,
  response_complete: false,
  response_status: null,
  connection_lost: false,
  exit_status: null,
  exit_signal: null,
  channel_closed: false,
  output_bytes: { stdout: 0, stderr: 0, body: 0 },
};

/** An SSH command still running, as actions.show answers it: open, so no outcome or effect yet. */
function running(over: Partial<ActionState> = {}): ActionDetail {
  const detail = shownAction(
    {
      action_id: id,
      channel: 'ssh',
      target: `host:box exec sha256:${'a'.repeat(64)}`,
      lane: 'host:box',
      session_id: 'ses_1',
      approval: 'none',
      idempotent: false,
      first_seq: 1,
      dispatch_seq: 4,
      stage: 'response_started',
      dispatch_evidence: 'started_locally',
      attempts: [attempt],
      outcome: null,
      effect: null,
      phase: 'remote_execution',
      retry: null,
      code: null,
      outcome_basis: 'dispatch_started_no_result_recorded',
      source: null,
      recorded: false,
      abandoned: false,
      ...over,
    },
    [
      row(1, 'ACTION_ACCEPTED', 'ssh host:box (approval none)'),
      row(2, 'PREFLIGHT_VALIDATED'),
      row(3, 'CREDENTIAL_AUTHORIZED'),
      row(4, 'DISPATCH_STARTED', 'attempt 1 on a fresh connection'),
      row(5, 'REQUEST_SENT'),
    ],
  );
  return { ...detail, released_by: null, waited_for: [] };
}

/** The detail view as a person reads it, after the store read `detail` from the broker (actions.show). */
async function rendered(detail: ActionDetail): Promise<{ html: string; text: string }> {
  return renderedOver({ ...refusingApi(), 'actions.show': () => Promise.resolve({ ok: true, value: detail }) });
}

/** The detail view as a person reads it, after the store opened it over `api`. */
async function renderedOver(api: OperatorApi): Promise<{ html: string; text: string }> {
  const store = createAppStore(api);
  await store.getState().openActionDetail(id);
  // A server render reads a zustand store's initial state: this one's is the state after the read.
  const read = { ...store, getInitialState: store.getState };
  const html = renderView(
    createElement(ActionDetailView, { actionId: id, backHref: '#/activity', backLabel: 'Activity' }),
    read,
  );
  return { html, text: textOf(html) };
}

describe('the action detail of an SSH command still running', () => {
  it('says it is open — no outcome, no effect, not complete — and that its recording is sealed when it ends', async () => {
    const { html, text } = await rendered(running());
    expect(text).toContain('Outcome | open (not classified yet)');
    expect(text).toContain('Effect | —');
    expect(text).toContain('Outcome basis | dispatch_started_no_result_recorded');
    expect(text).toContain('Completion order | not complete');
    expect(text).toContain('Furthest stage | response_started');
    expect(text).not.toMatch(/unknown/);
    // No player while it runs (a read would only say RECORDING_IN_PROGRESS): it says when there will be one.
    expect(html).toContain('data-testid="recording-open"');
    expect(text).toContain(
      'Session recording | Still running: the recording is sealed when the command ends, and replayed here once its outcome is recorded.',
    );
    expect(html).not.toContain('data-testid="recording-player"');
  });

  it('once an outcome is recorded, shows it and the recording in place of the running note', async () => {
    const { html, text } = await rendered(
      running({ outcome: 'committed', effect: 'succeeded', recorded: true, stage: 'response_complete' }),
    );
    expect(text).toContain('Outcome | committed');
    expect(text).toContain('Effect | succeeded');
    expect(html).not.toContain('data-testid="recording-open"');
    // The player's first render (it reads the recording once mounted).
    expect(text).toContain('Session recording | loading recording…');
  });
});

describe("the action detail's status line", () => {
  const line = 'data-testid="action-detail-running"';

  it('says a running action is dispatched and waits for its outcome, in the words a closed card uses', async () => {
    const { html, text } = await rendered(running());
    expect(html).toContain(line);
    expect(text).toContain('dispatched: sent; waiting for its outcome');
  });

  it('is not there once an outcome is recorded', async () => {
    const { html, text } = await rendered(
      running({ outcome: 'committed', effect: 'succeeded', recorded: true, stage: 'response_complete' }),
    );
    expect(html).not.toContain(line);
    expect(text).not.toContain('waiting for its outcome');
  });

  it('is not there before dispatch: an approved action not yet sent is not running', async () => {
    const approved = running({
      dispatch_seq: null,
      attempts: [],
      stage: 'credential_authorized',
      dispatch_evidence: 'never_started',
      phase: null,
      outcome_basis: null,
    });
    // Its events end before DISPATCH_STARTED.
    const { html, text } = await rendered({ ...approved, events: approved.events.filter((e) => e.seq < 4) });
    expect(text).toContain('Dispatch order | never dispatched');
    expect(text).toContain('Outcome | open (not classified yet)');
    expect(html).not.toContain(line);
    expect(text).not.toContain('waiting for its outcome');
  });
});

const at = Date.UTC(2026, 11, 3, 10, 56, 2, 45);
const accepted: ActivityEvent = {
  seq: 10,
  at_ms: at,
  kind: 'ACTION_ACCEPTED',
  action_id: 'act_time_000001',
  session_id: 'ses_1',
  ticket: 4,
  lane: 'doc-7',
  outcome: null,
  code: null,
  summary: 'http route:docs (approval per_call)',
  expires_at_ms: null,
};

describe("the action detail's chronology", () => {
  it('writes each wall time as every other console time is written: local, 24-hour, its zone named', () => {
    const detail = shownAction({ ticket: 4, first_seq: 10 }, [accepted]);
    const html = renderView(createElement(Chronology, { detail }));
    expect(html).toContain('<th scope="col">Wall time</th>');
    expect(html).toContain(`>${dateTime(at, { ms: true })}</time>`);
    expect(dateTime(at, { ms: true })).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.045 \S+$/);
    expect(html).not.toContain('(UTC)');
  });
});

describe("the action detail's chronology: a time the broker's summary names", () => {
  const expires = Date.UTC(2026, 11, 3, 17, 28, 33, 825);
  const card: ActivityEvent = {
    ...accepted,
    seq: 11,
    kind: 'CARD_SHOWN',
    summary: 'expires at 2026-12-03T17:28:33.825Z',
    expires_at_ms: expires,
  };
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("writes a card's expiry in the viewer's zone with the zone named, as its wall time, not the summary's ISO UTC", () => {
    // The page's zone (the person's), not the daemon's: Node reads TZ again when it is set.
    vi.stubEnv('TZ', 'Europe/Berlin');
    const detail = shownAction({ ticket: 4, first_seq: 10 }, [accepted, card]);
    const html = renderView(createElement(Chronology, { detail }));
    expect(html).toContain('<td class="kind">CARD_SHOWN</td><td>expires at 2026-12-03 18:28:33 CET</td>');
    expect(html).toContain('>2026-12-03 11:56:02.045 CET</time>');
    expect(textOf(html)).not.toContain('17:28:33');
  });
});

describe('the action detail of an action whose events are sealed', () => {
  const locked = {
    code: 'AUDIT_KEY_UNAVAILABLE',
    message: 'events of run 2 (an earlier broker run) need the unlocked vault',
  };
  const plain = {
    action_id: id,
    ticket: 4,
    channel: 'http',
    target: 'docs',
    method: 'POST',
    request: '/documents/{id}',
    outcome: 'not_attempted',
    code: 'BROKER_RESTARTED',
    stage: 'closed',
  };

  /** The page as a person reads it once actions.show refused with `error` and actions.list found the plaintext row. */
  async function sealedPage(
    error: typeof locked & { sealed_for_good?: true },
  ): Promise<{ html: string; text: string }> {
    const api: OperatorApi = {
      ...refusingApi(),
      'actions.show': () => Promise.resolve({ ok: false, error }),
      'actions.list': () => Promise.resolve({ ok: true, value: { actions: [plain] } }),
    } as unknown as OperatorApi;
    return renderedOver(api);
  }

  it('while an unlock opens them (an earlier keyed run): the plaintext outcome, and the link to unlock', async () => {
    const { html, text } = await sealedPage(locked);
    expect(text).toContain('Outcome not_attempted (BROKER_RESTARTED)');
    expect(text).toContain('Its events are sealed while the vault is locked: unlock to read its events');
    expect(html).toContain('href="#/vault"');
  });

  it('sealed for good (a run that never had a key): says no unlock opens them, and links none', async () => {
    const { html, text } = await sealedPage({ ...locked, sealed_for_good: true });
    expect(text).toContain('Outcome not_attempted (BROKER_RESTARTED)');
    expect(text).toContain(
      'Its events are sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them (the chronology, attempts and evidence). (AUDIT_KEY_UNAVAILABLE)',
    );
    expect(text).not.toContain('unlock to read');
    expect(html).not.toContain('href="#/vault"');
  });
});
