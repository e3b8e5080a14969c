import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Refusals are values (issue #17, STYLE.md habit 4): a caller switches on a typed refusal
 * (broker/contract transition-refusal.ts) or a code, never on an error's message text, and
 * IMPOSSIBLE_TRANSITION means only a bug. This reads every broker source file (tests excluded) and
 * fails on a line that matches on an error message, or that treats IMPOSSIBLE_TRANSITION as
 * anything but a bug outside the files named below.
 */
const root = path.resolve(import.meta.dirname, '..');

/** Ways of deciding something from a message's text. */
const messageMatchers: readonly RegExp[] = [
  /\.message\??\.(includes|startsWith|endsWith|match|matchAll|indexOf|lastIndexOf|search)\(/,
  /\.(test|exec)\([^)]*\.message\b/,
  /(?<!typeof\s+[\w.?]*)\.message\s*[!=]==?\s*['"`]/,
  /['"`]\s*[!=]==?\s*[\w.?]+\.message\b/,
  /switch\s*\([\w.?]+\.message\)/,
];

/**
 * Third-party errors that carry what we need only in their text; each is read once, at the edge
 * where the library answers, and turned into our own code. Ours never need this.
 */
const thirdPartyMessageReads: Readonly<Record<string, string>> = {
  'broker/vault/ssh-key-import.ts': "ssh2's parseKey reports an encrypted key only in its message (no code)",
  'broker/cli/cli-program.ts':
    'commander names the offending option only in its message (its code says the kind, not the option)',
};

/** Where IMPOSSIBLE_TRANSITION may be named: where it is thrown, registered, and recognised as a bug. */
const impossibleTransitionNamedIn: Readonly<Record<string, string>> = {
  'broker/contract/error-codes.ts': 'the registry',
  'broker/contract/transition-refusal.ts': 'the code a refusal has always answered with',
  'broker/core/project.ts': 'thrown for a bug; the code of a refusal',
  'broker/core/project-session.ts': 'thrown for a bug; the code of a refusal',
  'broker/core/project-credential-request.ts': 'thrown for a bug; the code of a refusal',
  'broker/core/lane-release.ts': 'thrown for a history that contradicts invariant 7',
  'broker/journal/journal.ts': "a bug in one unit's events rejects that unit only, not the batch",
  'broker/journal/plan-unit.ts': 'documents what planUnit throws',
  'broker/actions/journal-failure.ts': 'a bug is rethrown, never answered as a failed journal',
};

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts'))
      out.push(rel);
  }
  return out;
}

function messageMatches(source: string): string[] {
  return source.split('\n').filter((line) => !/^\s*(\/\/|\*)/.test(line) && messageMatchers.some((m) => m.test(line)));
}

describe('no broker code matches on an error message', () => {
  const files = sourceFiles('broker');

  it('when the broker sources are read, there are files to read', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files).toContain('broker/core/project.ts');
  });

  it('when any broker file decides on a message text, it is named here with why', () => {
    const found: Record<string, string[]> = {};
    for (const file of files) {
      if (thirdPartyMessageReads[file] !== undefined) continue;
      const lines = messageMatches(readFileSync(path.join(root, file), 'utf8'));
      if (lines.length > 0) found[file] = lines.map((l) => l.trim());
    }
    expect(found).toEqual({});
  });

  it('when a named exception no longer reads a message, it is dropped from the list', () => {
    const reads = (file: string): boolean => messageMatches(readFileSync(path.join(root, file), 'utf8')).length > 0;
    const stale = Object.keys(thirdPartyMessageReads).filter((file) => !reads(file));
    expect(stale).toEqual([]);
  });

  it('when IMPOSSIBLE_TRANSITION is named outside the files that throw or recognise a bug, it fails', () => {
    const names = (file: string): boolean =>
      readFileSync(path.join(root, file), 'utf8').includes('IMPOSSIBLE_TRANSITION');
    const found = files.filter((file) => impossibleTransitionNamedIn[file] === undefined && names(file));
    expect(found).toEqual([]);
  });

  it.each([
    ["if (error.message.includes('already decided')) return;", true],
    ['if (/lease/.test(error.message)) retry();', true],
    ['const m = /seq (\\d+)/.exec(err.message);', true],
    ["if (e.message === 'closed') return;", true],
    ["if ('closed' !== e?.message) throw e;", true],
    ['switch (error.message) {', true],
    ['if (e.message?.startsWith("seq")) {}', true],
    ["if (refusal.kind === 'lease_held') return held;", false],
    ["if (isCodedError(error) && error.code === 'VAULT_LOCKED') throw error;", false],
    ["this.refusal = { code, message: typeof error.message === 'string' ? error.message : code };", false],
    ['// a comment may say error.message.includes(x) is not how we decide', false],
  ])('when a line reads %s, the guard says %s', (line, flagged) => {
    expect(messageMatches(line).length > 0).toBe(flagged);
  });
});
