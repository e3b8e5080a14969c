import { describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../../broker/contract/index.js';
import { dateTime } from '../../broker/contract/time-words.js';
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
    record: 'confirmed',
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
  dispatch_recorded: false,
  retry_possible: false,
  retry_until_ms: null,
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

  it('names an HTTP request’s query, agent-set headers and body as the card does, marked', () => {
    const words = describeDecision(
      'approvals.approve',
      { ticket: 12 },
      {
        ...card,
        query: [['draft', 'false']],
        headers: [['x-audience', 'everyone\u202e']],
        body_preview: '{"visibility":"public"}',
        body_bytes: 23,
      },
    );
    const lines = words.detail.split('\n');
    expect(lines.slice(0, 4)).toEqual([
      'route:docs: POST /documents/7/publish',
      'Query: draft=false',
      'Headers: x-audience: "everyone\\u{202e}"',
      'Body (23 bytes): {"visibility":"public"}',
    ]);
    expect(words.confirmId).toBe(1);
  });

  it('says how many query parameters and headers the card did not show, and what a cut side hides, as the card does', () => {
    const words = describeDecision(
      'approvals.approve',
      { ticket: 12 },
      {
        ...card,
        query: [
          ['big', 'Q'.repeat(20), { name_hidden: 0, value_hidden: 1988 }],
          ['…', '2 more not shown', { pairs_hidden: 2 }],
        ],
        headers: [
          ['x-a', '1'],
          ['…', '1 more not shown', { pairs_hidden: 1 }],
        ],
      },
    );
    const lines = words.detail.split('\n');
    expect(lines).toContain(`Query: big=${'Q'.repeat(20)} [cut: 1,988 more characters not shown]`);
    expect(lines).toContain('Headers: x-a: "1"');
    expect(lines).toContain('2 more query parameters and 1 more header not shown');
  });

  it('an agent\'s own pair named "…" is shown as its pair, never as the broker\'s count', () => {
    const words = describeDecision(
      'approvals.approve',
      { ticket: 12 },
      { ...card, query: [['…', '6 more not shown']] },
    );
    const lines = words.detail.split('\n');
    expect(lines).toContain('Query: %E2%80%A6=6%20more%20not%20shown');
    expect(words.detail).not.toMatch(/more query parameters? not shown/);
  });

  it('an agent’s query or header value cannot fake the dialog’s cut note or another pair', () => {
    const fake = '1 [cut: 9 more characters not shown]';
    const words = describeDecision(
      'approvals.approve',
      { ticket: 12 },
      {
        ...card,
        query: [
          ['a', fake],
          ['b', '1&c=2'],
        ],
        headers: [
          ['x-a', fake],
          ['x-b', '1; x-c: 2'],
          ['x-q', 'say "hi"'],
        ],
      },
    );
    const lines = words.detail.split('\n');
    expect(lines).toContain('Query: a=1%20%5Bcut%3A%209%20more%20characters%20not%20shown%5D&b=1%26c%3D2');
    expect(lines).toContain(
      'Headers: x-a: "1 [cut: 9 more characters not shown]"; x-b: "1; x-c: 2"; x-q: "say \\"hi\\""',
    );
    // Outside the agent's quotes and encodings, no cut note and no pair but the three the card holds.
    const headersLine = lines.find((line) => line.startsWith('Headers: ')) ?? '';
    const outside = headersLine.replace(/"(?:[^"\\]|\\.)*"/g, '""');
    expect(outside).toBe('Headers: x-a: ""; x-b: ""; x-q: ""');
  });

  it('says so when a card rebuilt from the journal cannot show its query (the vault locked), never an empty one', () => {
    const blocked = { ...card, state: 'blocked_head' as const, dispatch_recorded: true };
    const words = describeDecision(
      'approvals.abandon',
      { ticket: 12, reason: 'checked' },
      { ...blocked, request_details: 'sealed' },
    );
    expect(words.detail).toContain('Query and headers: sealed in the journal while the vault is locked');
    const shown = describeDecision('approvals.abandon', { ticket: 12, reason: 'checked' }, blocked);
    expect(shown.detail).not.toContain('Query and headers');
    // Sealed by a broker run that never had a key: no unlock opens it, so the dialog asks for none.
    const lost = describeDecision(
      'approvals.abandon',
      { ticket: 12, reason: 'checked' },
      { ...blocked, request_details: 'sealed_for_good' },
    );
    expect(lost.detail).toContain(
      'Query and headers: sealed in the journal for good (the broker run that recorded them ended before any audit key existed; no unlock opens them)',
    );
    expect(lost.detail).not.toContain('unlock to see');
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
    expect(words.detail).toContain('/a\\nb');
    expect(words.detail).toContain('ok\\u{202e}evil\\x07');
    expect(words.detail.split('\n')).toHaveLength(4);
  });
});

const sshCard: ApprovalCard = {
  ...card,
  lane: 'host:web',
  channel: 'ssh',
  target: 'host:web',
  method: null,
  path: null,
  command: 'uptime',
  credential: 'web-key',
};
const hidden = `uptime${' '.repeat(4000)}; rm -rf /`;

describe('when the command of a ticket to approve is longer than the dialog shows', () => {
  it('a command that fits is shown whole, marked, with Approve', () => {
    const words = describeDecision(
      'approvals.approve',
      { ticket: 12 },
      { ...sshCard, command: 'systemctl status nginx' },
    );
    expect(words.detail).toContain('host:web: systemctl status nginx');
    expect(words.buttons).toEqual(['Cancel', 'Approve']);
    expect(words.confirmId).toBe(1);
    const spaced = describeDecision(
      'approvals.approve',
      { ticket: 12 },
      { ...sshCard, command: `uptime${' '.repeat(500)}; rm -rf /\nreboot` },
    );
    expect(spaced.detail).toContain('host:web: uptime[500 spaces]; rm -rf /\\nreboot');
    expect(spaced.confirmId).toBe(1);
    // 4000 spaces that once pushed the tail past the cut: marked, the tail is in the dialog.
    const pushed = describeDecision('approvals.approve', { ticket: 12 }, { ...sshCard, command: hidden });
    expect(pushed.detail.split('\n')[0]).toBe('host:web: uptime[4000 spaces]; rm -rf /');
    expect(pushed.confirmId).toBe(1);
  });

  it.each([
    ['4000 characters and a tail', `uptime${'#'.repeat(4000)}; rm -rf /`],
    ['a long first line', `echo ${'a'.repeat(700)}`],
    ['many short lines', Array.from({ length: 200 }, (_, i) => `true ${i}`).join('\n')],
    ['escapes that grow when marked', `uptime${'\u0007'.repeat(150)}; reboot`],
    ['blank-drawn fillers that grow when marked', `uptime${'\u3164'.repeat(500)}; rm -rf ~`],
  ])('%s: no Approve button, the dialog says it is too long and where to read it whole', (_label, command) => {
    const words = describeDecision('approvals.approve', { ticket: 12 }, { ...sshCard, command });
    expect(words.buttons).toEqual(['Cancel']);
    expect(words.confirmId).toBeNull();
    expect(words.message).toBe('Ticket #12 cannot be approved in this dialog');
    expect(words.detail).toContain(`the command is ${command.length.toLocaleString('en-US')} characters`);
    expect(words.detail).toContain('too long to show whole in this dialog');
    expect(words.detail).toContain("ticket #12's card in the Postern window");
    expect(words.detail).toContain('postern approvals approve 12');
    expect(words.detail).toContain('Credential: web-key');
    // No part of the command is offered as if it were the whole.
    expect(words.detail).not.toContain('uptime');
    expect(words.detail).not.toContain('echo a');
    expect(words.detail).not.toContain('true 1');
  });

  it('an SSH card rebuilt from the journal (no command kept) names its digest, action and acceptance, never a blank', () => {
    const rebuilt: ApprovalCard = {
      ...sshCard,
      command: null,
      state: 'blocked_head',
      action_id: 'act_ssh0001',
      request_fingerprint: `sha256:${'ab'.repeat(32)}`,
      accepted_at_ms: Date.UTC(2026, 11, 3, 11, 56, 2),
    };
    // The acceptance time as the card writes it (local, 24-hour, the zone named), never the terminal's ISO UTC.
    const accepted = dateTime(rebuilt.accepted_at_ms);
    expect(accepted).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:02 \S+$/);
    const said = `host:web: (command not kept: the journal holds only its digest sha256:${'ab'.repeat(32)}; action act_ssh0001, accepted ${accepted})`;
    const abandon = describeDecision('approvals.abandon', { ticket: 12, reason: 'checked by hand' }, rebuilt);
    expect(abandon.detail.split('\n')[0]).toBe(said);
    expect(abandon.confirmId).toBe(1);
    // Nothing on the dialog would say what runs: it is never approved here.
    const approve = describeDecision('approvals.approve', { ticket: 12 }, { ...rebuilt, state: 'pending' });
    expect(approve.confirmId).toBeNull();
    expect(approve.detail.split('\n')[0]).toBe(said);
  });

  it('a long HTTP path is treated the same: no Approve on a cut path', () => {
    const words = describeDecision('approvals.approve', { ticket: 12 }, { ...card, path: `/a/${'x'.repeat(800)}` });
    expect(words.confirmId).toBeNull();
    expect(words.detail).toContain('the path of POST is 803 characters');
  });

  it('a ticket main cannot read is not approved blind', () => {
    const words = describeDecision('approvals.approve', { ticket: 12 }, undefined);
    expect(words.confirmId).toBeNull();
    expect(words.detail).toContain('could not read ticket #12');
  });

  it.each(['approvals.reject', 'approvals.cancel', 'approvals.abandon'] as const)(
    '%s stays available on a cut command that says it is cut and where the whole is',
    (method) => {
      const words = describeDecision(
        method,
        { ticket: 12, reason: 'no' },
        { ...sshCard, command: `x${'a'.repeat(1000)}` },
      );
      expect(words.confirmId).toBe(1);
      expect(words.buttons[1]).toBe(words.confirmLabel);
      expect(words.detail).toMatch(/… \[cut: [\d,]+ more characters not shown here; the whole of it is on the card/);
    },
  );

  it('an agent name longer than a line is cut saying so, and never pushes the command out', () => {
    const words = describeDecision(
      'approvals.approve',
      { ticket: 12 },
      { ...sshCard, session: { ...card.session!, client_name: 'n'.repeat(900) } },
    );
    expect(words.detail.split('\n')[0]).toBe('host:web: uptime');
    expect(words.detail).toContain('… [cut]');
    expect(words.confirmId).toBe(1);
  });
});

describe('when a person accepts a configuration change', () => {
  const digest = `sha256:${'ab'.repeat(32)}`;
  const change = {
    file: '/home/u/.config/postern/postern.yaml',
    digest,
    routes: [],
    ssh_hosts: [
      {
        name: 'web',
        change: 'changed' as const,
        fields: [{ field: 'commands[12]', before: null, after: '{"command":"*","approval":"none"}' }],
      },
    ],
    mcp_servers: [],
    settings: [],
    invalid: null,
  };

  it("names the file and every entry and field that differs, from main's own read, and where the values are whole", () => {
    const words = describeDecision('config.accept', { digest }, undefined, change);
    expect(words.message).toBe('Accept the configuration change?');
    expect(words.detail).toContain('/home/u/.config/postern/postern.yaml (sha256:abababababababab…)');
    expect(words.detail).toContain('SSH host web changed: commands[12]');
    expect(words.detail).toContain('`postern config pending`');
    expect(words.confirmId).toBe(1);
  });

  it('a list longer than the dialog is cut saying so; a digest other than the file’s is called out', () => {
    const many = Array.from({ length: 80 }, (_, i) => ({ field: `commands[${i}]`, before: null, after: '{}' }));
    const words = describeDecision('config.accept', { digest: `sha256:${'cd'.repeat(32)}` }, undefined, {
      ...change,
      ssh_hosts: [{ name: 'web', change: 'added' as const, fields: many }],
    });
    expect(words.detail).toMatch(/… \[cut: [\d,]+ more characters of this list not shown\]/);
    expect(words.detail).toContain('The file changed since the card was drawn');
  });
});
