import { describe, expect, it } from 'vitest';
import { allowlistSubjectId, type JournalEvent } from '../contract/index.js';
import {
  actionScopeOf,
  darwinToolOutputBytesMax,
  foldAllowlist,
  matchesExecutable,
  parseCodesignDetails,
  parseLsofExecutable,
  parsePsStart,
  scopedMatch,
  unscopedMatch,
} from './process-allowlist.js';

const hashA = `sha256:${'a'.repeat(64)}`;
const hashB = `sha256:${'b'.repeat(64)}`;
const person = { kind: 'person', id: 'alice', surface: 'cli', auth: 'vault_passphrase_tty' } as const;
let seq = 0;

function added(entryId: string, path: string, sha256: string, scope: { routes?: string[]; hosts?: string[] } = {}) {
  seq += 1;
  return {
    kind: 'ALLOWLIST_ENTRY_ADDED',
    action_id: allowlistSubjectId,
    seq,
    at_ms: 1_000 + seq,
    session_id: null,
    ticket: null,
    lane: null,
    payload: { entry_id: entryId, path, sha256, routes: scope.routes ?? [], hosts: scope.hosts ?? [], actor: person },
  } as JournalEvent;
}

function removed(entryId: string): JournalEvent {
  seq += 1;
  return {
    kind: 'ALLOWLIST_ENTRY_REMOVED',
    action_id: allowlistSubjectId,
    seq,
    at_ms: 1_000 + seq,
    session_id: null,
    ticket: null,
    lane: null,
    payload: { entry_id: entryId, actor: person },
  };
}

const unscoped = 'alw_0000000000000001';
const scoped = 'alw_0000000000000002';

describe('when the allowlist folds its events', () => {
  it('keeps adds in order, drops removed entries, and skips a second removal', () => {
    const entries = foldAllowlist([
      added(unscoped, '/opt/agent', hashA),
      added(scoped, '/opt/agent', hashA, { routes: ['docs'] }),
      removed(unscoped),
      removed(unscoped),
    ]);
    expect([...entries.keys()]).toEqual([scoped]);
    expect(entries.get(scoped)).toMatchObject({
      path: '/opt/agent',
      routes: ['docs'],
      hosts: [],
      added_by: 'person:alice (cli, passphrase on tty)',
      from_session: null,
    });
  });

  it('throws on an id added twice (a writer bug, never a race)', () => {
    expect(() => foldAllowlist([added(unscoped, '/a', hashA), added(unscoped, '/a', hashA)])).toThrow(/added twice/);
  });
});

describe('when an executable is matched', () => {
  const entries = [
    ...foldAllowlist([
      added(unscoped, '/opt/agent', hashA),
      added(scoped, '/usr/bin/node', hashA, { routes: ['docs'], hosts: ['build'] }),
    ]).values(),
  ];
  it.each([
    ['the same path and hash', { path: '/opt/agent', sha256: hashA }, unscoped],
    ['the same path, other bytes', { path: '/opt/agent', sha256: hashB }, undefined],
    ['the same bytes elsewhere', { path: '/tmp/agent', sha256: hashA }, undefined],
    ['a scoped entry only', { path: '/usr/bin/node', sha256: hashA }, undefined],
  ])('an unscoped entry approves the session for %s', (_name, exe, expected) => {
    expect(unscopedMatch(entries, exe)?.entry_id).toBe(expected);
  });

  it.each([
    ['a route it names', 'route:docs GET /v1/items', scoped],
    ['a host it names', 'host:build exec sha256:00', scoped],
    ['another route', 'route:billing POST /charge', undefined],
    ['a route named like its host', 'route:build GET /', undefined],
    ['an upstream MCP tool', 'mcp:files.read', undefined],
    ['a refused target', 'route:(invalid)', undefined],
  ])('a scoped entry covers %s', (_name, target, expected) => {
    const exe = { path: '/usr/bin/node', sha256: hashA };
    expect(scopedMatch(entries, exe, actionScopeOf(target))?.entry_id).toBe(expected);
    expect(scopedMatch(entries, { ...exe, sha256: hashB }, actionScopeOf(target))).toBeUndefined();
  });
});

describe('when an entry carries a macOS code-signing identity', () => {
  const signing = { identifier: 'com.example.agent', team_id: 'ABCDE12345' };
  const entry = { path: '/Applications/Agent', sha256: hashA, signing };
  const exe = { path: '/Applications/Agent', sha256: hashA };
  it.each([
    ['the same identity', { ...exe, signing }, true],
    ['another team', { ...exe, signing: { ...signing, team_id: 'ZZZZZ99999' } }, false],
    ['another identifier', { ...exe, signing: { ...signing, identifier: 'com.example.other' } }, false],
    ['no identity now (unsigned, ad-hoc, verify failed)', { ...exe, signing: null }, false],
    ['no identity read (Linux)', exe, false],
    ['the same identity, other bytes', { ...exe, sha256: hashB, signing }, false],
  ])('an executable with %s matches: %s', (_name, candidate, expected) => {
    expect(matchesExecutable(entry, candidate)).toBe(expected);
  });

  it('an entry without one matches by path + sha256 whatever identity the executable has', () => {
    const plain = { ...entry, signing: null };
    expect(matchesExecutable(plain, { ...exe, signing })).toBe(true);
    expect(matchesExecutable(plain, { ...exe, signing: null })).toBe(true);
    expect(matchesExecutable(plain, exe)).toBe(true);
  });

  it('folds the identity from the event, and null when the event has none', () => {
    const withSigning = added('alw_00000000000000a1', '/a', hashA);
    const payload = { ...(withSigning.payload as object), signing };
    const entries = foldAllowlist([
      { ...withSigning, payload } as JournalEvent,
      added('alw_00000000000000a2', '/b', hashA),
    ]);
    expect(entries.get('alw_00000000000000a1')?.signing).toEqual(signing);
    expect(entries.get('alw_00000000000000a2')?.signing).toBeNull();
  });
});

describe('when codesign -d --verbose=2 output is parsed', () => {
  const lines = (...l: string[]): string => `Executable=/A\n${l.join('\n')}\nRuntime Version=14.0.0\n`;
  it.each([
    [
      'a Developer ID signature',
      lines('Identifier=com.example.agent', 'Signature size=9000', 'TeamIdentifier=ABCDE12345'),
      { identifier: 'com.example.agent', team_id: 'ABCDE12345' },
    ],
    ['no team (not set)', lines('Identifier=com.example.agent', 'TeamIdentifier=not set'), null],
    ['no TeamIdentifier line', lines('Identifier=com.example.agent'), null],
    [
      'an ad-hoc signature naming a team',
      lines('Identifier=a.b', 'Signature=adhoc', 'TeamIdentifier=ABCDE12345'),
      null,
    ],
  ])('%s gives its identity', (_name, text, expected) => {
    expect(parseCodesignDetails(text)).toEqual({ ok: true, value: expected });
  });

  it.each([
    ['no Identifier', lines('TeamIdentifier=ABCDE12345')],
    ['two Identifiers', lines('Identifier=a.b', 'Identifier=c.d', 'TeamIdentifier=ABCDE12345')],
    ['two TeamIdentifiers', lines('Identifier=a.b', 'TeamIdentifier=ABCDE12345', 'TeamIdentifier=ZZZZZ99999')],
    ['a lower-case team', lines('Identifier=a.b', 'TeamIdentifier=abcde12345')],
    ['a team of nine characters', lines('Identifier=a.b', 'TeamIdentifier=ABCDE1234')],
    ['an identifier with a space', lines('Identifier=a b', 'TeamIdentifier=ABCDE12345')],
    ['an empty identifier', lines('Identifier=', 'TeamIdentifier=ABCDE12345')],
    ['an identifier past 255 characters', lines(`Identifier=${'a'.repeat(256)}`, 'TeamIdentifier=ABCDE12345')],
    ['a NUL', lines('Identifier=a.b\u0000', 'TeamIdentifier=ABCDE12345')],
    ['a carriage return', lines('Identifier=a.b\r', 'TeamIdentifier=ABCDE12345')],
    [
      'output past the bound',
      lines('Identifier=a.b', 'TeamIdentifier=ABCDE12345', 'x'.repeat(darwinToolOutputBytesMax)),
    ],
    ['nothing', ''],
  ])('output with %s is refused', (_name, text) => {
    expect(parseCodesignDetails(text).ok).toBe(false);
  });
});

describe('when lsof and ps output is parsed', () => {
  it.each([
    [
      'the first text file',
      'p42\nftxt\nn/Applications/Agent\nftxt\nn/usr/lib/dyld\n',
      { ok: true, value: '/Applications/Agent' },
    ],
    [
      'a path with spaces',
      'p42\nftxt\nn/Applications/My Agent.app/Contents/MacOS/My Agent\n',
      { ok: true, value: '/Applications/My Agent.app/Contents/MacOS/My Agent' },
    ],
    ['another pid', 'p43\nftxt\nn/a\n', { ok: false }],
    ['two processes', 'p42\nfcwd\nn/\np43\nftxt\nn/a\n', { ok: false }],
    ['a relative path', 'p42\nftxt\nnAgent\n', { ok: false }],
    ['a name outside txt only', 'p42\nfcwd\nn/tmp\n', { ok: false }],
    ['nothing', '', { ok: false }],
  ])('lsof output with %s', (_name, text, expected) => {
    expect(parseLsofExecutable(text, 42)).toMatchObject(expected);
  });

  it.each([
    ['a C-locale start', 'Mon Jan  6 10:00:01 2025\n', { ok: true, value: 'Mon Jan  6 10:00:01 2025' }],
    ['a two-digit day', 'Tue Feb 11 09:08:07 2025\n', { ok: true, value: 'Tue Feb 11 09:08:07 2025' }],
    ['nothing (no such process)', '', { ok: true, value: undefined }],
    ['another locale', 'lun. 6 janv. 10:00:01 2025\n', { ok: false }],
    ['two lines', 'Mon Jan  6 10:00:01 2025\nMon Jan  6 10:00:02 2025\n', { ok: false }],
  ])('ps output with %s', (_name, text, expected) => {
    expect(parsePsStart(text)).toMatchObject(expected);
  });
});
