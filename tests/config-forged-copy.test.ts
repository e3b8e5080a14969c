import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { acceptConfigAsPerson } from './support/accepted-config.js';
import { runOnTerminal } from './support/operator-terminal.js';
import { unlockAsPerson } from './support/person-decision.js';
import { runPostern, startDaemon } from './support/postern-process.js';

/**
 * THREAT-MODEL 3: an agent forges config/accepted.json so that the card a person reads shows a harmless difference,
 * hoping the person's acceptance of the WHOLE file is sealed as theirs. Its copy's text is its own postern.yaml minus
 * one harmless route, under a person's name, with the old key and MAC kept (it cannot make a new MAC). The card
 * computed without the vault key must show the whole file and say the copy is unverified; an acceptance with the key
 * must check the copy's seal and seal nothing over a forged one. Real files, a real vault, the built CLI, a real
 * pseudo-terminal for the passphrase.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pocfc-'));
const dataDir = path.join(scratch, 'data');
const passphrase = 'config forged copy passphrase (test only)';
const passphraseFile = path.join(scratch, 'pass');
const acceptedFile = path.join(dataDir, 'config', 'accepted.json');
const configFile = path.join(dataDir, 'postern.yaml');

const personYaml = [
  'version: 1',
  'routes:',
  '  - name: api',
  '    base_url: http://127.0.0.1:4101',
  '    credential: api-token',
  '    injection: bearer',
  '    approval: per_call',
  '',
].join('\n');
const statusRoute = [
  '  - name: status',
  '    base_url: http://127.0.0.1:4102',
  '    credential: api-token',
  '    injection: bearer',
  '    approval: per_call',
  '',
];
const agentYaml = (withStatus: boolean): string =>
  [
    'version: 1',
    'operator:',
    '  unattended_decisions: true',
    'routes:',
    '  - name: api',
    '    base_url: http://127.0.0.1:4101',
    '    credential: api-token',
    '    injection: bearer',
    '    approval: none',
    ...(withStatus ? statusRoute : ['']),
  ].join('\n');

/** The agent's forgery: the person's record with its text swapped for the agent's file minus the status route. */
function forgeAcceptedCopy(): string {
  const record = JSON.parse(readFileSync(acceptedFile, 'utf8')) as Record<string, unknown>;
  const forged = JSON.stringify({
    ...record,
    text: agentYaml(false),
    accepted_by: 'person:root (cli, passphrase on tty)',
  });
  writeFileSync(acceptedFile, forged);
  return forged;
}

beforeAll(async () => {
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({ name: 'api-token', kind: 'bearer', secret: Buffer.from('CANARY-forged-copy'), bindings: ['api'] });
  await vault.close();
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  writeFileSync(configFile, personYaml);
  await acceptConfigAsPerson(dataDir, passphraseFile);
  // The agent: its own file (the opt-out, no approval on api, a new route), and the copy forged to hide all but one line.
  writeFileSync(configFile, agentYaml(true));
}, 60_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a forged accepted copy with no broker running', () => {
  it('the card says the copy is unverified and shows the whole file, every risky setting in it', async () => {
    forgeAcceptedCopy();
    const text = await runPostern(['config', 'pending', '--data-dir', dataDir]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('The last accepted copy is UNVERIFIED');
    expect(text.stdout).toContain('Claimed by the unverified copy: last accepted');
    expect(text.stdout).toContain('the whole file');
    expect(text.stdout).toContain('added route api');
    expect(text.stdout).toContain('approval: - → none');
    expect(text.stdout).toContain('added route status');
    // The opt-out, from its default (a setting the file leaves at its default is no change and is not listed).
    expect(text.stdout).toContain('unattended_decisions: false → true');
    // No broker: an acceptance is read at the next start, and the line says so.
    expect(text.stdout).toMatch(
      /Accept it with: postern config accept sha256:[0-9a-f]{64} {2}\(it applies at the next start\)/,
    );
  });

  it("the person's acceptance checks the copy's seal with the key and seals nothing over a forged one", async () => {
    const forged = forgeAcceptedCopy();
    const json = JSON.parse((await runPostern(['config', 'pending', '--json', '--data-dir', dataDir])).stdout) as {
      change: { digest: string };
    };
    const run = await runOnTerminal(['config', 'accept', json.change.digest, '--data-dir', dataDir], passphrase);
    expect(run.prompted).toBe(true);
    expect(run.code, run.screen).toBe(1);
    expect(run.screen).toContain('CONFIG_UNTRUSTED');
    expect(run.screen).toContain('review the whole file');
    expect(readFileSync(acceptedFile, 'utf8')).toBe(forged);
  }, 60_000);
});

describe('a forged accepted copy with a broker running', () => {
  it('the card before the unlock is the whole file, and after the unlock the copy is untrusted; an acceptance is of the whole file, by a person', async () => {
    forgeAcceptedCopy();
    const daemon = await startDaemon(dataDir);
    try {
      const locked = await callOperator(dataDir, 'config.pending', {});
      expect(locked.trust).toBe('unverified');
      expect(locked.change?.routes.map((r) => `${r.change} ${r.name}`)).toEqual(['added api', 'added status']);
      expect(locked.change?.settings).toContainEqual(expect.objectContaining({ name: 'operator' }));
      const digest = locked.change?.digest ?? '';

      // Unlocked as a person does (typed; an unlock read from a file would make the broker refuse passphrase proofs).
      await unlockAsPerson(dataDir, passphrase);
      const unlocked = await callOperator(dataDir, 'config.pending', {});
      expect(unlocked).toMatchObject({ trust: 'untrusted', accepted: null, change: { digest } });
      expect(unlocked.change?.routes.map((r) => `${r.change} ${r.name}`)).toEqual(['added api', 'added status']);
      // The opt-out in the file is no person: the agent cannot accept it.
      const agent = await runPostern(['config', 'accept', digest, '--data-dir', dataDir]);
      expect(agent.code).toBe(1);
      expect(agent.stderr).toContain('OPERATOR_PROOF_REQUIRED');
      // A person who read the whole-file card accepts it: sealed as theirs, over the whole file they saw.
      const person = await runOnTerminal(['config', 'accept', digest, '--data-dir', dataDir], passphrase);
      expect(person.code, person.screen).toBe(0);
      expect(person.screen).toContain('it applies when the broker is restarted');
      expect(JSON.parse(readFileSync(acceptedFile, 'utf8'))).toMatchObject({
        text: agentYaml(true),
        how: 'accepted',
        accepted_by: expect.stringMatching(/^person:.+ \(cli, passphrase on tty\)$/),
      });
    } finally {
      await daemon.process.stop('SIGTERM');
    }
  }, 90_000);
});
