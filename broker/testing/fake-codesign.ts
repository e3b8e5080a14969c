import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DarwinTools } from '../actions/process-allowlist.js';

/**
 * SCRIPTED stand-ins for macOS's /usr/bin/codesign, /bin/ps and /usr/sbin/lsof, so tests on Linux run the allowlist's
 * darwin code path (ProcessAllowlist option `darwinTools`). Each is a small /bin/sh script that prints what the test
 * scripted (data files beside it, read on every run — never interpolated into the script) and logs its argv.
 * Production code never imports this (eslint layering); the real tools are never faked anywhere else.
 */
export interface FakeDarwinScript {
  /** `codesign --verify --strict FILE`: exit 0 (`pass`) or 1 (`fail`: unsigned, tampered). */
  readonly verify: 'pass' | 'fail';
  /** What `codesign -d --verbose=2 FILE` prints on stderr (see codesignDetails), and its exit code. */
  readonly details?: string;
  readonly detailsExit?: number;
  /** Successive `ps -o lstart= -p PID` outputs, one per run (the last repeats); '' prints nothing (no process). */
  readonly psStarts: readonly string[];
  /** What `lsof … -F n` prints (see lsofText). */
  readonly lsof: string;
}

export interface FakeDarwinTools {
  readonly tools: DarwinTools;
  /** Replaces what the tools print from their next run on. */
  script(script: FakeDarwinScript): void;
  /** The argv of each run of a tool so far, space-joined. */
  calls(tool: keyof DarwinTools): string[];
}

const shebang = '#!/bin/sh\n# Scripted stand-in for a macOS tool (broker/testing/fake-codesign.ts); tests only.\n';
const logArgs = 'here=$(dirname "$0")\nprintf "%s\\n" "$*" >> "$here/$(basename "$0").calls"\n';

const scripts: Record<keyof DarwinTools, string> = {
  codesign: [
    'case "$1" in',
    '  --verify) exit "$(cat "$here/verify-exit")" ;;',
    '  -d) cat "$here/details" >&2; exit "$(cat "$here/details-exit")" ;;',
    'esac',
    'exit 64',
  ].join('\n'),
  ps: [
    'n=$(( $(cat "$here/ps-count") + 1 )); echo "$n" > "$here/ps-count"',
    'total=$(wc -l < "$here/ps-starts")',
    'if [ "$n" -gt "$total" ]; then n=$total; fi',
    'line=$(sed -n "${n}p" "$here/ps-starts")',
    'if [ -z "$line" ]; then exit 1; fi',
    'printf "%s\\n" "$line"',
  ].join('\n'),
  lsof: 'cat "$here/lsof-out"',
};

export function createFakeDarwinTools(dir: string): FakeDarwinTools {
  const bin = join(dir, 'fake-darwin-bin');
  mkdirSync(bin, { recursive: true });
  const tools = { codesign: join(bin, 'codesign'), ps: join(bin, 'ps'), lsof: join(bin, 'lsof') };
  for (const [name, body] of Object.entries(scripts)) {
    writeFileSync(join(bin, name), `${shebang}${logArgs}${body}\n`);
    chmodSync(join(bin, name), 0o755);
  }
  const data = (name: string, text: string): void => writeFileSync(join(bin, name), text);
  return {
    tools,
    script(script) {
      data('verify-exit', script.verify === 'pass' ? '0' : '1');
      data('details', script.details ?? '');
      data('details-exit', String(script.detailsExit ?? 0));
      data('ps-count', '0');
      data('ps-starts', `${script.psStarts.join('\n')}\n`);
      data('lsof-out', script.lsof);
    },
    calls(tool) {
      try {
        return readFileSync(`${tools[tool]}.calls`, 'utf8').split('\n').slice(0, -1);
      } catch {
        return [];
      }
    },
  };
}

/** `codesign -d --verbose=2` as a Developer ID signature prints it (team `null`: `not set`; `adhoc`: ad-hoc). */
export function codesignDetails(file: string, identifier: string, team: string | null, adhoc = false): string {
  const authority = team === null || adhoc ? [] : [`Authority=Developer ID Application: Example Corp (${team})`];
  return [
    `Executable=${file}`,
    `Identifier=${identifier}`,
    'Format=Mach-O thin (arm64)',
    `CodeDirectory v=20500 size=1234 flags=0x${adhoc ? '20002(adhoc,linker-signed)' : '10000(runtime)'} hashes=30+7`,
    adhoc ? 'Signature=adhoc' : 'Signature size=9000',
    ...authority,
    `TeamIdentifier=${team ?? 'not set'}`,
    'Runtime Version=14.0.0',
    'Sealed Resources=none',
    'Internal requirements count=1 size=180',
    '',
  ].join('\n');
}

/** `lsof -n -P -w -a -p PID -d txt -F n`: the process, then its text files in mapping order. */
export function lsofText(pid: number, files: readonly string[]): string {
  return [`p${pid}`, ...files.flatMap((f) => ['ftxt', `n${f}`]), ''].join('\n');
}

/** A `ps -o lstart=` line in the C locale. */
export const psStart = (second: number): string => `Mon Jan  6 10:00:${String(second).padStart(2, '0')} 2025`;
