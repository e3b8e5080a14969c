import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { startDaemon } from './support/postern-process.js';

/** A real `postern daemon` on a data directory whose postern.yaml names one credential the vault lacks. */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-summary-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const canary = 'CANARY-summary-61d2a7';

describe('postern daemon at start', () => {
  it('prints one summary line of routes and SSH hosts loaded, naming those whose credential the vault does not hold, and that none is in force while postern.yaml is not accepted', async () => {
    const dataDir = mkdtempSync(path.join(scratch, 'data-'));
    const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await vault.init(Buffer.from('summary vault passphrase'));
    await vault.add({
      name: 'docs-token',
      kind: 'bearer',
      secret: Buffer.from(canary),
      bindings: ['docs.example.test'],
    });
    await vault.add({ name: 'build-key', kind: 'bearer', secret: Buffer.from(canary), bindings: ['build'] });
    await vault.close();
    writeFileSync(
      path.join(dataDir, 'postern.yaml'),
      [
        'version: 1',
        'routes:',
        '  - { name: docs, base_url: "https://docs.example.test", credential: docs-token, injection: bearer }',
        '  - { name: api, base_url: "https://api.example.test", credential: api-token, injection: header, approval: none }',
        'ssh_hosts:',
        '  - { name: build, host: 10.0.0.5, user: deploy, credential: build-key, host_key: accept_new, approval: session }',
        '',
      ].join('\n'),
    );

    const daemon = await startDaemon(dataDir);
    try {
      // The summary is printed before the ready event startDaemon waited for. The vault was made outside the broker
      // and no person accepted this postern.yaml: nothing listed is in force, and the line says so.
      expect(daemon.process.stdoutLines.filter((line) => line.startsWith('Routes:'))).toEqual([
        'Routes: docs (bearer, per_call), api (header, none); SSH hosts: build (session); missing credential: api' +
          ' — none in force: every route and host is refused until a person accepts postern.yaml' +
          ' (operator UI, Routes & hosts; or postern config pending, then postern config accept)',
      ]);
      // The daemon's own warning for the same route, on stderr as a structured line (names only).
      expect(daemon.process.stderr).toContain('"route":"api"');
    } finally {
      await daemon.process.stop();
    }
    expect(`${daemon.process.stdout}${daemon.process.stderr}`).not.toContain(canary);
  });

  it('says none when postern.yaml is absent', async () => {
    const dataDir = mkdtempSync(path.join(scratch, 'data-'));
    const daemon = await startDaemon(dataDir);
    try {
      expect(daemon.process.stdoutLines).toContain('Routes: none; SSH hosts: none');
      // Everything stdout says before the ready event, in the order docs/operator.md "What the daemon prints" shows.
      const memory = 'Process memory: not readable by other processes of this user (non-dumpable, core dumps off).';
      const hardened = !daemon.process.stderr.includes('warning: the broker could not protect its memory');
      const lines = daemon.process.stdoutLines.filter((line) => !line.startsWith('{'));
      expect(lines.map((line) => line.replace(/\?token=.*/, '?token=…'))).toEqual([
        expect.stringMatching(
          new RegExp(`^Postern \\S+ is running headless\\. Data directory: ${escaped(dataDir)}$`),
        ) as string,
        ...(hardened ? [memory] : []),
        expect.stringMatching(/^Vault: /) as string,
        'Routes: none; SSH hosts: none',
        expect.stringMatching(/^Operator UI: http:\/\/127\.0\.0\.1:\d+\/\?token=…$/) as string,
        expect.stringMatching(/^Sign-in code: \d{4}-\d{4} \(type it on the page, do not copy it: /) as string,
      ]);
    } finally {
      await daemon.process.stop();
    }
  });
});

function escaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
