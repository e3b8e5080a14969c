import { describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../../broker/contract/index.js';
import { describeDecision } from './decision-dialog.js';

const card: ApprovalCard = {
  ticket: 12,
  action_id: 'act_12',
  lane: 'route:docs',
  channel: 'http',
  approval: 'per_call',
  state: 'pending',
  waiting_for_ticket: null,
  text: 'waiting for approval',
  session: {
    session_id: 'ses_1',
    status: 'approved',
    pid: 4242,
    exe: '/usr/bin/node',
    cwd: null,
    parent_exe: null,
    client_name: 'claude-code',
  },
  target: 'route:docs',
  method: 'POST',
  path: '/documents/7/publish',
  query: [],
  headers: [],
  command: null,
  body_preview: null,
  body_bytes: 0,
  credential: 'docs-token',
  request_fingerprint: 'sha256:x',
  accepted_at_ms: 0,
  expires_at_ms: null,
  retry_of: null,
};

describe('describeDecision', () => {
  it("names the ticket and what main's own queue says it does, not what the renderer says", () => {
    const words = describeDecision('approvals.approve', { ticket: 12 }, card);
    expect(words.message).toBe('Approve ticket #12?');
    expect(words.detail).toContain('route:docs: POST /documents/7/publish');
    expect(words.detail).toContain('Credential: docs-token');
    expect(words.detail).toContain('claude-code (pid 4242)');
    expect(words.confirmLabel).toBe('Approve');
  });

  it('never shows a credential value from the input', () => {
    const words = describeDecision(
      'credentials.add',
      { name: 'api', kind: 'bearer', secret: 'canary-value-123' },
      undefined,
    );
    expect(JSON.stringify(words)).not.toContain('canary-value-123');
    expect(words.message).toBe('Add a credential “api”?');
  });

  it('words creating the vault without ever showing the new passphrase', () => {
    const words = describeDecision('vault.init', { passphrase: 'canary-new-passphrase' }, undefined);
    expect(words.message).toBe('Create the vault?');
    expect(JSON.stringify(words)).not.toContain('canary-new-passphrase');
  });

  it('neutralises control and bidi characters an agent put in a reason or a path', () => {
    const words = describeDecision(
      'approvals.reject',
      { ticket: 12, reason: 'ok\u202eevil\u0007' },
      { ...card, path: '/a\nb' },
    );
    expect(words.detail.includes('\u202e') || words.detail.includes('\u0007')).toBe(false);
    expect(words.detail).toContain('/a?b');
  });
});
