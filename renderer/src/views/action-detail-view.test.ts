import { createElement } from 'react';
import { describe, expect, it } from 'vitest';
import type { ActivityEvent } from '../../../broker/contract/index.js';
import { dateTime } from '../../../broker/contract/time-words.js';
import { shownAction } from '../store/test-cards.js';
import { Chronology } from './action-detail-view.js';
import { renderView } from './render-test-support.js';

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
