import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sshCommandStarNotes } from '../broker/config/index.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { runPostern, startDaemon } from './support/postern-process.js';

/**
 * `postern config pending` through a real subprocess, with no broker running and with one (the answer then crosses
 * the control socket and its schema): an SSH command rule with a `*` is followed by a note saying what that `*`
 * matches (strict, or loose with the rule's rules_may_loosen: true), so a person reading `echo *` knows it is one word
 * that crosses `/` and never `echo a; rm -rf /`; a rule without a `*` has no note.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pcpn-'));
const dataDir = path.join(scratch, 'data');

beforeAll(async () => {
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from('config pending note passphrase (test only)'));
  await vault.add({ name: 'docs-token', kind: 'bearer', secret: Buffer.from('CANARY-pcpn'), bindings: ['docs'] });
  await vault.close();
  writeFileSync(
    path.join(dataDir, 'postern.yaml'),
    [
      'version: 1',
      'ssh_hosts:',
      '  - name: web',
      '    host: 10.0.0.5',
      '    user: deploy',
      '    credential: web-key',
      '    host_key: accept_new',
      '    approval: per_call',
      '    rules_may_loosen: true',
      '    commands:',
      "      - { command: 'uptime', approval: none }",
      "      - { command: 'echo *', approval: none }",
      "      - { command: 'tar *', rules_may_loosen: true }",
      '',
    ].join('\n'),
  );
}, 60_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The card's lines from `commands[0]` on, and the JSON's ssh host fields. */
async function pending(): Promise<{ lines: string[]; fields: Array<{ field: string; note?: string }> }> {
  const text = await runPostern(['config', 'pending', '--data-dir', dataDir]);
  expect(text.code, text.stderr).toBe(0);
  const json = await runPostern(['config', 'pending', '--json', '--data-dir', dataDir]);
  expect(json.code, json.stderr).toBe(0);
  const parsed = JSON.parse(json.stdout) as { change: { ssh_hosts: Array<{ fields: [] }> } };
  const lines = text.stdout.split('\n');
  return {
    lines: lines.slice(lines.findIndex((l) => l.includes('commands[0]:'))),
    fields: parsed.change.ssh_hosts[0]?.fields ?? [],
  };
}

function expectNotes(card: Awaited<ReturnType<typeof pending>>): void {
  expect(card.lines.slice(0, 5)).toEqual([
    '    commands[0]: - → {"command":"uptime","approval":"none"}',
    '    commands[1]: - → {"command":"echo *","approval":"none"}',
    `      note: ${sshCommandStarNotes.strict}`,
    '    commands[2]: - → {"command":"tar *","rules_may_loosen":true}',
    `      note: ${sshCommandStarNotes.loose}`,
  ]);
  expect(card.fields.filter((f) => f.note !== undefined).map((f) => [f.field, f.note])).toEqual([
    ['commands[1]', sshCommandStarNotes.strict],
    ['commands[2]', sshCommandStarNotes.loose],
  ]);
}

describe('config pending shows what a command rule’s * matches', () => {
  it('with no broker running', async () => {
    expectNotes(await pending());
  });

  it('with a broker running (over its control socket)', async () => {
    const daemon = await startDaemon(dataDir);
    try {
      const card = await pending();
      expect((await runPostern(['config', 'pending', '--json', '--data-dir', dataDir])).stdout).toContain(
        '"broker_running":true',
      );
      expectNotes(card);
    } finally {
      await daemon.process.stop('SIGTERM');
    }
  }, 60_000);
});
