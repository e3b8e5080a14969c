import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentSocket, type AgentSocket } from '../broker/agent/index.js';
import { ScriptedAgentBackend } from '../broker/testing/scripted-agent-backend.js';
import { createTempDir, type TempDir } from '../broker/testing/temp-dir.js';
import { repoRoot } from './support/postern-process.js';

const run = promisify(execFile);

/** npm's own steps are bounded: an offline install that cannot resolve fails in about a second. */
const npmStepMs = 240_000;

/**
 * Issue 15, "install and hook up from anywhere": the package as npm packs it, installed globally
 * into a temp prefix, then `postern` run by name from a directory outside the checkout (holding a
 * tsconfig.json of its own, as a user's project would): --help, `agent-config claude-code` printing
 * absolute paths that exist, and that very line's command reaching a broker through `postern mcp`.
 *
 * Installing the packed tarball needs every dependency's registry metadata (npm resolves the
 * ranges in package.json, and ignores a lockfile inside a tarball for a global install); `npm ci`
 * caches tarballs, not that metadata, so offline it fails with ENOTCACHED. The test then installs
 * the checkout itself (`npm install -g <folder>`, which is what `npm link` does: a link, resolved
 * with the checkout's node_modules) and says so; what the tarball holds is checked from its listing.
 */
let tmp: TempDir;
let prefix: string;
let outside: string;
let installedFrom: 'tarball' | 'checkout link';
let tarballFiles: string[] = [];

beforeAll(
  async () => {
    tmp = createTempDir('postern-install-');
    prefix = path.join(tmp.path, 'prefix');
    outside = path.join(tmp.path, 'some-project');
    mkdirSync(outside);
    writeFileSync(
      path.join(outside, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { experimentalDecorators: true, useDefineForClassFields: false, jsx: 'preserve' },
      }),
    );
    const packed = await run('npm', ['pack', '--json', '--pack-destination', tmp.path], {
      cwd: repoRoot,
      timeout: npmStepMs,
      maxBuffer: 16 * 1024 * 1024,
    });
    const [manifest] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    if (manifest === undefined) throw new Error('npm pack printed no manifest');
    tarballFiles = manifest.files.map((f) => f.path);
    const tarball = path.join(tmp.path, manifest.filename);
    try {
      await run('npm', ['install', '--global', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, tarball], {
        cwd: tmp.path,
        timeout: npmStepMs,
      });
      installedFrom = 'tarball';
    } catch (error) {
      const why =
        String((error as { stderr?: unknown }).stderr ?? error)
          .split('\n')
          .find((line) => line.includes('npm error code')) ?? 'npm could not install it';
      console.log(
        `install.test: the packed tarball cannot be installed offline here (${why.trim()}); installing the checkout as a link (npm install -g <folder>, as npm link does) instead`,
      );
      await run('npm', ['install', '--global', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, repoRoot], {
        cwd: tmp.path,
        timeout: npmStepMs,
      });
      installedFrom = 'checkout link';
    }
  },
  2 * npmStepMs + 60_000,
);

afterAll(() => tmp.remove());

/** `postern ARGS` by name, from outside the checkout, with only the temp prefix's bin added to PATH. */
function postern(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string }> {
  return run('postern', args, {
    cwd: outside,
    timeout: 60_000,
    env: { ...process.env, ...env, PATH: `${path.join(prefix, 'bin')}${path.delimiter}${process.env['PATH'] ?? ''}` },
  });
}

describe('when postern is installed globally', () => {
  it('packs only what runs: the bin, the broker without its tests, the addon sources and the tsconfig tsx uses', () => {
    for (const needed of [
      'package.json',
      'bin/postern.mjs',
      'broker/cli/main.ts',
      'broker/cli/agent-config.ts',
      'native/peercred/src/peercred.c',
      'native/peercred/binding.gyp',
      'tsconfig.base.json',
    ]) {
      expect(tarballFiles).toContain(needed);
    }
    // The bundle's classic scripts (zod and yaml, commander: every command imports one) and the code cache the build
    // wrote for each (scripts/vendor-script-plugin.mjs): an install whose package the user cannot write writes none.
    for (const group of ['schemas', 'commander']) {
      const script = tarballFiles.find((f) =>
        new RegExp(`^dist/cli/chunks/vendor-${group}-[0-9a-f]{16}\\.js$`).test(f),
      );
      expect(script, `the ${group} script`).toBeDefined();
      expect(tarballFiles.some((f) => f.startsWith(`${script}.`) && f.endsWith('.cache'))).toBe(true);
    }
    expect(
      tarballFiles.filter(
        (f) =>
          f.endsWith('.test.ts') || f.startsWith('broker/testing/') || f.startsWith('tests/') || f.startsWith('e2e/'),
      ),
    ).toEqual([]);
  });

  it('runs from another directory: --help lists agent-config', async () => {
    expect(['tarball', 'checkout link']).toContain(installedFrom);
    const { stdout, stderr } = await postern(['--help'], { POSTERN_LAUNCH_TRACE: '1' });
    expect(stdout).toContain('agent-config');
    expect(stdout).toContain('mcp');
    // From the bundle, its commander from the classic script with the cache the build wrote (packed with it).
    expect(stderr).toContain('postern: running the bundle ');
    expect(stderr).toMatch(/postern: vendor-commander-[0-9a-f]{16}\.js: code cache accepted\n/);
  }, 60_000);

  describe('and an MCP client is hooked up with what agent-config printed', () => {
    let dataDir: TempDir;
    let socket: AgentSocket;
    beforeAll(async () => {
      dataDir = createTempDir('postern-install-data-');
      socket = await startAgentSocket({ dataDir: dataDir.path, backend: new ScriptedAgentBackend() });
    });
    afterAll(async () => {
      await socket.close();
      dataDir.remove();
    });

    it('prints a claude mcp add line with absolute paths that exist, and that command reaches the broker', async () => {
      const { stdout, stderr } = await postern(['agent-config', 'claude-code', '--data-dir', dataDir.path]);
      expect(stderr).toContain('# claude-code:');
      const words = stdout.trim().split(' ');
      expect(words.slice(0, 5)).toEqual(['claude', 'mcp', 'add', 'postern', '--']);
      const [node, parked, bin, ...args] = words.slice(5);
      expect(node).toBe(process.execPath);
      expect(parked).toBe('--inspect-port=192.0.2.1:9229');
      expect(path.isAbsolute(bin ?? '')).toBe(true);
      expect(existsSync(bin ?? '')).toBe(true);
      // The installed package's own bin (for the link, the checkout it points at).
      expect(realpathSync(bin ?? '')).toBe(
        realpathSync(path.join(prefix, 'lib', 'node_modules', 'postern', 'bin', 'postern.mjs')),
      );
      expect(args).toEqual(['mcp', '--data-dir', dataDir.path]);

      const client = new Client({ name: 'install-test', version: '1' });
      await client.connect(
        new StdioClientTransport({
          command: node ?? '',
          args: [parked ?? '', bin ?? '', ...args],
          cwd: outside,
          stderr: 'pipe',
        }),
      );
      try {
        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name)).toContain('http_request');
      } finally {
        await client.close();
      }
    }, 60_000);

    it.each(['claude-desktop', 'cursor', 'vscode'])(
      'prints a %s JSON snippet naming the same command',
      async (client) => {
        const { stdout } = await postern(['agent-config', client, '--data-dir', dataDir.path]);
        const snippet = JSON.parse(stdout) as {
          mcpServers?: Record<string, unknown>;
          servers?: Record<string, unknown>;
        };
        const server = (client === 'vscode' ? snippet.servers : snippet.mcpServers)?.['postern'] as {
          command: string;
          args: string[];
        };
        expect(server.command).toBe(process.execPath);
        expect(server.args[0]).toBe('--inspect-port=192.0.2.1:9229');
        expect(existsSync(server.args[1] ?? '')).toBe(true);
        expect(server.args.slice(2)).toEqual(['mcp', '--data-dir', dataDir.path]);
      },
      60_000,
    );
  });
});
