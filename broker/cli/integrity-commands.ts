import type { Command } from 'commander';
import type { AnchorFailureCode, IntegrityAnchorReport } from '../contract/index.js';
import { CodedError } from '../contract/coded-error.js';
import { anchorFailureCodes } from '../contract/anchor-failure-codes.js';
import {
  brokerDataDir,
  defaultSubcommand,
  withDataDir,
  type CommandContext,
  type CommonOptions,
} from './command-context.js';
import { callOperator, printable } from './operator-commands.js';

interface JsonOptions extends CommonOptions {
  json?: boolean;
}

/**
 * `postern integrity [status] | readopt <code>`: the signed integrity anchor as the running broker's start found it
 * (docs/audit.md "Integrity anchor"), and a person's re-adoption of a quarantined journal (asks for the passphrase).
 */
export function registerIntegrityCommands(program: Command, context: CommandContext): void {
  const { env } = context;
  const out = (line: string): void => context.io.out(printable(line));
  const integrity = program
    .command('integrity')
    .description("The journal's signed integrity anchor: whether the start found the journal rolled back or forged.");
  withDataDir(defaultSubcommand(integrity, 'status').description('What the start found, and why.'))
    .option('--json', 'print one JSON object')
    .action(async (options: JsonOptions) => {
      const report = await callOperator(brokerDataDir(options, env), 'integrity.anchor', {});
      if (options.json === true) return out(JSON.stringify(report));
      for (const line of reportLines(report)) out(line);
      context.setResult(report.state === 'quarantined' ? 1 : 0);
    });
  withDataDir(
    integrity
      .command('readopt')
      .argument('<code>', `the failure the start found (${anchorFailureCodes.join(', ')})`)
      .description('Adopt the journal as it is now: sign a new anchor over it and serve agents again (a decision).'),
  ).action(async (code: string, options: CommonOptions) => {
    const report = await callOperator(
      brokerDataDir(options, env),
      'integrity.readopt',
      { code: failureCode(code) },
      { proveOnTerminal: true },
    );
    out(`Journal re-adopted after ${code}: ${report.detail}.`);
  });
}

function failureCode(code: string): AnchorFailureCode {
  const known = anchorFailureCodes.find((c) => c === code);
  if (known === undefined)
    throw new CodedError('INVALID_ARGUMENT', `not an anchor failure code (${anchorFailureCodes.join(', ')})`, {
      field: 'code',
    });
  return known;
}

export function reportLines(report: IntegrityAnchorReport): string[] {
  const head =
    report.state === 'quarantined'
      ? `QUARANTINED (${report.code ?? 'unknown'}): every action tool is refused until a person re-adopts the journal`
      : report.state === 'first_use'
        ? 'first use: no anchor yet; the next checkpoint writes one'
        : 'ok: the journal matches its signed anchor';
  const found = report.found;
  return [
    `Integrity anchor: ${head}`,
    `  ${report.detail}`,
    `  anchor file: ${report.anchor_file}`,
    found === null
      ? '  anchor: none read'
      : `  anchor: counter ${found.counter}, head seq ${found.head_seq}, key ${found.key_id}, written ${new Date(found.written_at_ms).toISOString()}`,
    `  journal: ${report.journal.events} events, last seq ${report.journal.last_seq}, recorded anchor ${report.journal.recorded_counter ?? 'none'}`,
    ...(report.readopted === null
      ? []
      : [`  re-adopted by ${report.readopted.by} at ${new Date(report.readopted.at_ms).toISOString()}`]),
    ...(report.state === 'quarantined' ? [`  next: postern integrity readopt ${report.code ?? ''}`] : []),
  ];
}
