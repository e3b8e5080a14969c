import { createElement } from 'react';
import { describe, expect, it } from 'vitest';
import { cardOf } from '../store/test-cards.js';
import { dateTime } from '../store/time-words.js';
import { ApprovalCardView } from './approval-card.js';
import { renderView, textOf } from './render-test-support.js';

const cardText = (card: ReturnType<typeof cardOf>): string =>
  textOf(renderView(createElement(ApprovalCardView, { card, blockedBy: null })));

describe('an approval card', () => {
  it('an SSH card rebuilt after a restart (no command kept) says so as postern approvals list does, never a blank', () => {
    const card = cardOf(7, {
      channel: 'ssh',
      lane: 'host:lab',
      target: 'host:lab',
      method: null,
      path: null,
      command: null,
      body_preview: null,
      body_bytes: 0,
      state: 'blocked_head',
      request_fingerprint: `sha256:${'ab'.repeat(32)}`,
    });
    const text = cardText(card);
    expect(text).toContain(
      `Command | command not kept: the journal holds only its digest sha256:${'ab'.repeat(32)}; action ${card.action_id}, accepted ${dateTime(card.accepted_at_ms)}`,
    );
    expect(text).not.toContain('(not shown)');
  });
});
