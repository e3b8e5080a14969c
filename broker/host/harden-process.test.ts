import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeHardening, hardenWith } from './harden-process.js';

const linux = process.platform === 'linux';
const wrapper = path.join(import.meta.dirname, 'harden-process.ts');

function coded(code: string): Error {
  return Object.assign(new Error('from the addon'), { code });
}

describe('hardenWith', () => {
  it.each<[string, Parameters<typeof hardenWith>[0], RegExp]>([
    ['the addon did not load', coded('MODULE_NOT_FOUND'), /did not load \(MODULE_NOT_FOUND\)/],
    [
      'the addon is older and has no hardenProcess',
      { peerCredentials: () => undefined } as never,
      /has no hardenProcess \(rebuild it\)/,
    ],
    [
      'the platform is not supported',
      {
        hardenProcess: () => {
          throw coded('PEERCRED_UNSUPPORTED');
        },
      },
      /^PEERCRED_UNSUPPORTED$/,
    ],
    ['the answer is not the documented shape', { hardenProcess: () => ({ dumpable: 'no' }) }, /unusable answer/],
    ['the kernel still says dumpable', { hardenProcess: () => ({ dumpable: true, coreLimit: 0 }) }, /still reports/],
    ['core dumps are still on', { hardenProcess: () => ({ dumpable: false, coreLimit: Infinity }) }, /still reports/],
  ])('when %s, it is not hardened and says why (and does not throw)', (_when, addon, reason) => {
    const result = hardenWith(addon);
    expect(result.hardened).toBe(false);
    expect(result.reason).toMatch(reason);
    expect(describeHardening(result)).toMatch(
      /^warning: the broker could not protect its memory \(.+\); another process of this user/,
    );
  });

  it('is hardened only when the kernel reports non-dumpable and a zero core limit', () => {
    const result = hardenWith({ hardenProcess: () => ({ dumpable: false, coreLimit: 0 }) });
    expect(result).toEqual({ hardened: true, dumpable: false, coreLimit: 0 });
    expect(describeHardening(result)).toBe(
      'Process memory: not readable by other processes of this user (non-dumpable, core dumps off).',
    );
  });
});

describe.skipIf(!linux)('hardenProcess with the real addon', () => {
  if (!linux) console.log(`harden-process.test.ts: the real-addon case is Linux-only (this is ${process.platform})`);

  // In a child process: hardening is one-way, and this worker must stay an ordinary process.
  it('leaves the process non-dumpable with core dumps off, once, and answers the same on a second call', () => {
    const script = [
      `const { hardenProcess } = await import(${JSON.stringify(wrapper)});`,
      'const first = hardenProcess();',
      'const second = hardenProcess();',
      "const limits = (await import('node:fs')).readFileSync('/proc/self/limits', 'utf8');",
      'const core = /^Max core file size\\s+(\\S+)\\s+(\\S+)/m.exec(limits).slice(1);',
      'console.log(JSON.stringify({ first, same: first === second, core }));',
    ].join('\n');
    const args = ['--import', 'tsx', '--input-type=module', '-e', script];
    const output = execFileSync(process.execPath, args, { encoding: 'utf8', timeout: 30_000 });
    expect(JSON.parse(output)).toEqual({
      first: { hardened: true, dumpable: false, coreLimit: 0 },
      same: true,
      core: ['0', '0'],
    });
  });
});
