import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { activityPageMax, brokerApiSchemas, ErrorCode } from '../broker/contract/index.js';
import { lockDataDir } from '../broker/host/data-dir-lock.js';
import { PosternProcess, posternBin, repoRoot, startDaemon } from './support/postern-process.js';

/** The operator's everyday edges of `postern`, each run as a real subprocess. */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-cli-polish-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const actionListMax = brokerApiSchemas['actions.list'].input.shape.limit.unwrap().maxValue ?? 0;
let dirs = 0;
const freshDir = (): string => path.join(scratch, `data-${(dirs += 1)}`);
const existingDir = (): string => {
  const dir = freshDir();
  mkdirSync(dir, { mode: 0o700 });
  return dir;
};

async function run(args: readonly string[]) {
  const proc = new PosternProcess(args);
  const exit = await proc.exitWithin();
  return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
}

/** Help text with commander's column wrapping undone, so a phrase can be matched whole. */
async function helpOf(args: readonly string[]): Promise<string> {
  const result = await run([...args, '--help']);
  expect(result.code).toBe(0);
  return result.stdout.replace(/\s+/g, ' ');
}

const stackTrace = /\n\s+at .+:\d+:\d+/;
/** A daemon and several CLI runs, one after another, on a shared 2-core machine. */
const daemonTestMs = 90_000;

describe.concurrent('stdout closed early (postern … | head -1)', () => {
  it.each<[string, string[]]>([
    ['help', ['--help']],
    ['status', ['status', '--data-dir', path.join(scratch, 'never-made')]],
  ])('exits 0 with nothing on stderr for %s', async (_what, args) => {
    // The read end is closed before the child writes, so its first write fails with EPIPE every time.
    const child = spawn(process.execPath, [posternBin, ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

describe.concurrent('postern with no command', () => {
  it('lists every command, then one coded line, and no stack trace', async () => {
    const result = await run([]);
    expect(result.code).toBe(2);
    for (const command of [
      'start',
      'daemon',
      'status',
      'vault',
      'audit',
      'mcp',
      'approvals',
      'actions',
      'sessions',
      'activity',
      'metrics',
    ]) {
      expect(result.stderr).toMatch(new RegExp(`^  ${command} `, 'm'));
    }
    expect(result.stderr).toContain(
      'postern: INVALID_ARGUMENT command: a command is required (the commands are listed above)',
    );
    expect(result.stderr).not.toMatch(stackTrace);
  });
});

describe.concurrent('a word a command group does not know', () => {
  // The groups with a default subcommand (commander hands it the stray word) and one without, alike.
  it.each<[string, string[], string]>([
    [
      'integrity',
      ['integrity', 'anchor'],
      "unknown command 'anchor' for 'postern integrity' (its commands: status, readopt)",
    ],
    [
      'sessions',
      ['sessions', 'frobnicate'],
      "unknown command 'frobnicate' for 'postern sessions' (its commands: list, approve, revoke)",
    ],
    ['approvals', ['approvals', 'frobnicate'], "unknown command 'frobnicate'"],
  ])('postern %s <unknown> names the word as an unknown command, asking no broker', async (_group, args, message) => {
    const dir = freshDir();
    const result = await run([...args, '--data-dir', dir]);
    expect(result).toMatchObject({ code: 2, stdout: '' });
    expect(result.stderr).toContain(`postern: INVALID_ARGUMENT command: ${message}`);
    expect(result.stderr).not.toContain('too many arguments');
    expect(() => statSync(dir)).toThrow();
  });

  it.each<[string, string[]]>([
    ['integrity status', ['integrity', 'status', 'foo']],
    ['sessions list', ['sessions', 'list', 'foo']],
  ])('postern %s <extra>, the default named, is an extra argument, not an unknown command', async (_what, args) => {
    const result = await run([...args, '--data-dir', freshDir()]);
    expect(result).toMatchObject({ code: 2, stdout: '' });
    expect(result.stderr).toContain(`postern: INVALID_ARGUMENT arguments: too many arguments for '${args[1]}'`);
    expect(result.stderr).not.toContain('unknown command');
  });
});

describe.concurrent('--data-dir anywhere on the command line', () => {
  it.each<[string, (dir: string) => string[]]>([
    ['before the command', (dir) => ['--data-dir', dir, 'status', '--json']],
    ['after the command', (dir) => ['status', '--json', '--data-dir', dir]],
  ])('status reads the same directory with it %s', async (_where, args) => {
    const dir = existingDir();
    const result = await run(args(dir));
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ data_dir: dir, exists: true });
  });

  it.each<[string, (dir: string) => string[]]>([
    ['before the group', (dir) => ['--data-dir', dir, 'vault', 'list']],
    ['between the group and its command', (dir) => ['vault', '--data-dir', dir, 'list']],
    ['after the command', (dir) => ['vault', 'list', '--data-dir', dir]],
  ])('vault list uses it %s', async (_where, args) => {
    const dir = freshDir();
    const result = await run(args(dir));
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`postern: INVALID_ARGUMENT --data-dir: no data directory at ${dir}`);
  });
});

describe.concurrent('help says what the command does, as docs/operator.md and docs/audit.md do', () => {
  const operatorDoc = readFileSync(path.join(repoRoot, 'docs/operator.md'), 'utf8');

  it('sessions list: the newest 1,000, oldest first, as the doc says (not "every session")', async () => {
    const help = await helpOf(['sessions', 'list']);
    expect(help).toContain('The newest 1,000 sessions, oldest first');
    expect(operatorDoc).toContain('The newest 1,000 sessions, oldest first.');
    for (const command of ['approve', 'revoke'])
      expect(await helpOf(['sessions', command])).toContain('Arguments: session_id the session (ses_…)');
  });

  it('audit checkpoint says it verifies and signs, and marks --export required', async () => {
    const help = await helpOf(['audit', 'checkpoint']);
    expect(help).toContain(
      "Verify the journal under the vault's audit key, sign the events after its newest checkpoint",
    );
    expect(help).toContain('--export <file> (required)');
  });

  it('audit verify reads --passphrase-file only with --check-key', async () => {
    expect(await helpOf(['audit', 'verify'])).toContain(
      '--passphrase-file <file> with --check-key: read the vault passphrase from this file',
    );
  });

  it('actions attest and reconcile take an unknown outcome recorded by a quarantined recovery too, as the doc says', async () => {
    for (const command of ['attest', 'reconcile'])
      expect(await helpOf(['actions', command])).toContain(
        "an action whose recorded outcome is unknown (dispatched, or recorded unknown by a quarantined journal's recovery)",
      );
    expect(await helpOf(['actions', 'reconcile'])).toContain("through the route's lookup or its bounded read-back");
  });

  it('start says which options the desktop app refuses; the doc names them too', async () => {
    const help = await helpOf(['start']);
    for (const option of ['--port <port>', '--passphrase-file <file>', '--config <file>'])
      expect(help).toMatch(new RegExp(`${option} [^-]*\\(headless only: refused when the desktop app opens\\)`));
    expect(await helpOf(['daemon'])).not.toContain('headless only');
    expect(operatorDoc).toContain(
      '`postern start [--data-dir DIR] [--port N] [--passphrase-file FILE] [--config FILE]`',
    );
  });
});

describe.concurrent('required texts: help and validation agree', () => {
  const reasonMax = brokerApiSchemas['approvals.reject'].input.shape.reason.maxLength;
  const basisMax = brokerApiSchemas['actions.attest'].input.shape.basis.maxLength;

  it.each([
    ['approvals', 'reject'],
    ['approvals', 'abandon'],
    ['sessions', 'revoke'],
  ])('%s %s marks --reason required with the schema limit', async (...command) => {
    expect(await helpOf(command)).toContain(`--reason <text> (required) why, 1 to ${reasonMax} characters`);
  });

  it('approvals cancel offers --reason without marking it required', async () => {
    const help = await helpOf(['approvals', 'cancel']);
    expect(help).toContain(`--reason <text> why, 1 to ${reasonMax} characters`);
  });

  it('actions attest marks --outcome, --effect and --basis required, with the basis limit', async () => {
    const help = await helpOf(['actions', 'attest']);
    expect(help).toContain('--outcome <outcome> (required)');
    expect(help).toContain('--effect <effect> (required)');
    expect(help).toContain(`--basis <text> (required) how you know, 1 to ${basisMax} characters`);
  });

  it.each<[string, string[]]>([
    ['a blank reason', ['approvals', 'reject', '1', '--reason', '   ']],
    ['a reason one over the limit', ['sessions', 'revoke', 's-1', '--reason', 'r'.repeat((reasonMax ?? 0) + 1)]],
  ])('refuses %s naming --reason, before asking any broker', async (_what, args) => {
    const dir = freshDir();
    const result = await run([...args, '--data-dir', dir]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`postern: INVALID_ARGUMENT --reason: must be 1 to ${reasonMax} characters`);
    expect(() => statSync(dir)).toThrow();
  });

  it('refuses a missing --reason naming it', async () => {
    const result = await run(['approvals', 'abandon', '1']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('postern: INVALID_ARGUMENT --reason:');
  });
});

describe.concurrent('postern status says whether a broker is running', () => {
  it('says not running for a directory with no broker, and that no journal file is there yet', async () => {
    const dir = existingDir();
    const before = readdirSync(dir);
    const text = await run(['status', '--data-dir', dir]);
    expect(text.stdout).toContain('Broker: not running for this data directory');
    // Not "closed … read from the file": there is no file to have read.
    expect(text.stdout).toMatch(/^Journal: none yet \(no broker has opened this directory: no journal file; 0 events/m);
    const json = await run(['status', '--data-dir', dir, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({
      broker_running: false,
      journal_file: false,
      journal: { state: 'closed' },
    });
    expect(readdirSync(dir)).toEqual(before);
  });

  it('says the journal is missing, not "none yet", where a broker left its lock file but no journal is there', async () => {
    const dir = existingDir();
    // What a broker leaves (it never removes broker.lock); the journal moved or deleted by someone since.
    lockDataDir(dir).release();
    const text = await run(['status', '--data-dir', dir]);
    expect(text.stdout).toMatch(
      /^Journal: missing: no journal file, yet broker\.lock shows a broker used this directory \(moved or deleted\?\); 0 events/m,
    );
    expect(text.stdout).not.toContain('none yet');
    const json = await run(['status', '--data-dir', dir, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({
      journal_file: false,
      used_by: 'broker.lock',
      journal: { state: 'closed' },
    });
  });

  it('says the directory does not exist, and creates nothing', async () => {
    const dir = path.join(freshDir(), 'nested');
    const text = await run(['status', '--data-dir', dir]);
    expect(text).toMatchObject({
      code: 0,
      stdout: `Data directory: ${dir} (does not exist: nothing has run here yet)`,
    });
    const json = await run(['status', '--json', '--data-dir', dir]);
    expect(JSON.parse(json.stdout)).toEqual({ data_dir: dir, exists: false });
    expect(() => statSync(path.dirname(dir))).toThrow();
  });

  // A broker holds the data directory's lock from before its journal opens (recovery, then the vault's unlock) until
  // after it has drained in-flight calls at stop, while its control socket is not yet (or no longer) listening. The
  // lock is taken here as a broker takes it (the same kernel flock); status must not call that "no broker".
  it('says who holds the lock, and not "closed", while the lock is held and no control socket answers', async () => {
    const dir = existingDir();
    const lock = lockDataDir(dir);
    try {
      const text = await run(['status', '--data-dir', dir]);
      expect(text.code).toBe(0);
      expect(text.stdout).toContain(
        `Broker: not answering for this data directory: pid ${process.pid} holds its lock but its control socket does not answer`,
      );
      expect(text.stdout).toMatch(
        new RegExp(`^Journal: unknown: pid ${process.pid} holds the data directory's lock and may have it open; `, 'm'),
      );
      expect(text.stdout).not.toContain('closed');
      expect(text.stdout).not.toContain('not running');
      const json = await run(['status', '--json', '--data-dir', dir]);
      expect(JSON.parse(json.stdout)).toMatchObject({
        broker_running: false,
        lock_held_by_pid: process.pid,
        journal: { state: 'unknown' },
        journal_read_from: 'file',
      });
    } finally {
      lock.release();
    }
    expect((await run(['status', '--data-dir', dir])).stdout).toContain('Broker: not running for this data directory');
  });

  it(
    'says running while a daemon serves the directory, and not running after it stops',
    async () => {
      const dir = freshDir();
      const daemon = await startDaemon(dir);
      try {
        const text = await run(['status', '--data-dir', dir]);
        expect(text.stdout).toContain('Broker: running for this data directory');
        // The broker's own word for its journal, not this process's unopened handle.
        expect(text.stdout).toMatch(/^Journal: open in the running broker \(\d+ events, last seq \d+, schema v\d+\)$/m);
        expect(text.stdout).not.toContain('closed');
        const json = await run(['status', '--json', '--data-dir', dir]);
        expect(JSON.parse(json.stdout)).toMatchObject({
          broker_running: true,
          journal: { state: 'open' },
          journal_read_from: 'broker',
        });
      } finally {
        expect(await daemon.process.stop()).toEqual({ code: 0, signal: null });
      }
      expect(JSON.parse((await run(['status', '--json', '--data-dir', dir])).stdout)).toMatchObject({
        broker_running: false,
        journal: { state: 'closed' },
        journal_read_from: 'file',
        journal_file: true,
      });
      expect((await run(['status', '--data-dir', dir])).stdout).toMatch(
        /^Journal: closed \(no broker has it open; read from the file: \d+ events, last seq \d+, schema v\d+\)$/m,
      );
    },
    daemonTestMs,
  );
});

describe.concurrent('vault commands on a data directory that does not exist', () => {
  it.each<[string, string[]]>([
    ['list', ['vault', 'list']],
    ['remove', ['vault', 'remove', 'github']],
  ])('vault %s says so naming --data-dir and creates nothing', async (_what, args) => {
    const dir = freshDir();
    const result = await run([...args, '--data-dir', dir]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`postern: INVALID_ARGUMENT --data-dir: no data directory at ${dir}`);
    expect(result.stdout).toBe('');
    expect(() => statSync(dir)).toThrow();
  });
});

describe.concurrent('commands that only ask a broker, on a data directory that does not exist', () => {
  it.each<[string, string[]]>([
    ['approvals list', ['approvals', 'list']],
    ['approvals approve', ['approvals', 'approve', '1']],
    ['actions list', ['actions', 'list']],
    ['actions show', ['actions', 'show', 'act_nope']],
    ['sessions', ['sessions']],
    ['activity', ['activity']],
    ['metrics', ['metrics']],
    ['integrity', ['integrity']],
    ['mcp-servers authorize', ['mcp-servers', 'authorize', 'docs']],
  ])('%s says no data directory (so no broker) is there, and creates nothing', async (_what, args) => {
    const dir = path.join(freshDir(), 'nested');
    const result = await run([...args, '--data-dir', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `postern: NOT_FOUND --data-dir: no data directory at ${dir}, so no broker is running for it (start one with: postern daemon --data-dir ${dir})`,
    );
    expect(() => statSync(path.dirname(dir))).toThrow();
  });

  it.each<[string, string[]]>([
    ['vault lock', ['vault', 'lock']],
    ['vault unlock', ['vault', 'unlock', '--passphrase-file', '/dev/null']],
  ])('%s says so naming --data-dir and creates nothing', async (_what, args) => {
    const dir = path.join(freshDir(), 'nested');
    const result = await run([...args, '--data-dir', dir]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`postern: INVALID_ARGUMENT --data-dir: no data directory at ${dir}`);
    expect(() => statSync(path.dirname(dir))).toThrow();
  });
});

describe.concurrent('page sizes: help and validation agree', () => {
  it.each<[string, string[], number]>([
    ['activity', ['activity'], activityPageMax],
    ['actions list', ['actions', 'list'], actionListMax],
  ])('%s --help gives the default and the bound that is enforced', async (_what, command, max) => {
    expect(await helpOf(command)).toContain(`--limit <n> rows (default 100, at most ${max})`);
  });

  it.each<[string, string, string[], number]>([
    ['activity', '0', ['activity'], activityPageMax],
    ['activity', '-1', ['activity'], activityPageMax],
    ['activity', 'abc', ['activity'], activityPageMax],
    ['activity', '1e9', ['activity'], activityPageMax],
    ['activity', String(activityPageMax + 1), ['activity'], activityPageMax],
    ['actions list', '1e9', ['actions', 'list'], actionListMax],
    ['actions list', String(actionListMax + 1), ['actions', 'list'], actionListMax],
  ])('%s refuses --limit %s naming --limit, before asking any broker', async (_what, raw, command, max) => {
    const dir = freshDir();
    const result = await run([...command, '--limit', raw, '--data-dir', dir]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `postern: INVALID_ARGUMENT --limit: must be an integer from 1 to ${max} (got ${JSON.stringify(raw)})`,
    );
    expect(() => statSync(dir)).toThrow();
  });
});

describe.concurrent('--code takes only an error code', () => {
  it.each<[string, string[]]>([
    ['actions list', ['actions', 'list']],
    ['activity', ['activity']],
  ])('%s refuses an unknown code naming --code and where the codes are listed', async (_what, command) => {
    const result = await run([...command, '--code', 'X', '--data-dir', freshDir()]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('postern: INVALID_ARGUMENT --code: not an error code (got "X");');
    expect(result.stderr).toContain('docs/error-codes.md');
    expect(result.stderr).toContain('broker/contract/error-codes.ts');
    expect(result.stderr).not.toMatch(stackTrace);
  });

  it('suggests the code a lower-case spelling means', async () => {
    const result = await run(['actions', 'list', '--code', 'approval_denied', '--data-dir', freshDir()]);
    expect(result.stderr).toContain('did you mean APPROVAL_DENIED?');
  });

  it('lets a code of the closed set through to the broker', async () => {
    const dir = freshDir();
    const result = await run(['actions', 'list', '--code', ErrorCode.APPROVAL_DENIED, '--data-dir', dir]);
    expect(result.stderr).not.toContain('--code');
    expect(result.stderr).toContain(`--data-dir: no data directory at ${dir}`);
  });
});

describe.concurrent('a blank --session or --action', () => {
  it.each<[string, string[], string, string]>([
    ['activity --session=', ['activity', '--session='], '--session', 'postern sessions'],
    ['activity --action ""', ['activity', '--action', ''], '--action', 'postern actions list'],
    ['actions list --session " "', ['actions', 'list', '--session', ' '], '--session', 'postern sessions'],
  ])('%s is refused naming the option, before any broker is asked', async (_what, args, field, lister) => {
    const dir = freshDir();
    const result = await run([...args, '--data-dir', dir]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`postern: INVALID_ARGUMENT ${field}: must be an id as \`${lister}\` shows one`);
    expect(() => statSync(dir)).toThrow();
  });
});

describe('ids the journal does not hold, against a running daemon', () => {
  it(
    'activity and actions list refuse an unknown --session or --action as actions show refuses an unknown id',
    async () => {
      const dir = freshDir();
      const daemon = await startDaemon(dir);
      try {
        for (const [args, field, what] of [
          [['activity', '--session', 'nope'], '--session', 'session nope'],
          [['activity', '--session', 'nope', '--lane', 'docs', '--newest'], '--session', 'session nope'],
          [['activity', '--action', 'nope', '--json'], '--action', 'action nope'],
          [['actions', 'list', '--session', 'nope'], '--session', 'session nope'],
        ] as const) {
          const result = await run([...args, '--data-dir', dir]);
          expect(result.code).toBe(1);
          expect(result.stdout).toBe('');
          expect(result.stderr).toContain(`postern: NOT_FOUND ${field}: no ${what} in this journal`);
        }
        const shown = await run(['actions', 'show', 'act_nope', '--data-dir', dir]);
        expect(shown.code).toBe(1);
        expect(shown.stderr).toContain('postern: NOT_FOUND action_id: no action act_nope');
        // An empty page with no id filter is an answer, said as actions list says one.
        const empty = await run(['activity', '--lane', 'nowhere', '--data-dir', dir]);
        expect(empty).toMatchObject({ code: 0, stdout: 'No events match.' });
      } finally {
        expect(await daemon.process.stop()).toEqual({ code: 0, signal: null });
      }
    },
    daemonTestMs,
  );
});
