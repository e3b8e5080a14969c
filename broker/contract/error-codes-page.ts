import { codeSourceMeanings, errorCodeRegistry, hostHttpStatus, type PosternCode } from './error-codes.js';

/** A table cell: one line, and a `|` in the text must not open a new column. */
function cell(text: string): string {
  return text.replaceAll('\n', ' ').replaceAll('|', '\\|');
}

function statusOf(code: PosternCode): string {
  return Object.hasOwn(hostHttpStatus, code) ? String(hostHttpStatus[code as keyof typeof hostHttpStatus]) : '';
}

/**
 * docs/error-codes.md as a pure function of the registry, so the page cannot drift from the codes:
 * scripts/write-error-codes.mjs writes it, tests/error-codes-doc.test.ts compares it with the file.
 */
export function errorCodesPage(): string {
  const sources = Object.entries(codeSourceMeanings).map(([source, meaning]) => `| \`${source}\` | ${cell(meaning)} |`);
  const codes = (Object.keys(errorCodeRegistry) as PosternCode[]).map((code) => {
    const entry = errorCodeRegistry[code];
    return `| \`${code}\` | ${cell(entry.meaning)} | ${entry.from.join(', ')} | ${statusOf(code)} |`;
  });
  return [
    '# Error codes',
    '',
    '<!-- Generated from broker/contract/error-codes.ts by `node --import tsx scripts/write-error-codes.mjs`; do not edit by hand. -->',
    '',
    'Every stable machine code Postern answers with, on any surface, from one registry',
    '(`errorCodeRegistry` in `broker/contract/error-codes.ts`). Callers branch on `code` (and, in an envelope, on',
    '`phase`, `outcome` and `retry`); the message is for people and is never parsed. A code has one meaning',
    'wherever it appears; codes never change meaning; new codes may be added. Each surface answers with a',
    "subset of the registry (`CodesFrom<source>`: `ErrorCode` is the broker's, `HostErrorCode` the host's,",
    "`VerifyCode` in `broker/audit/verify-codes.ts` the verifier's).",
    '',
    '## Sources',
    '',
    'Where a caller can meet a code (the **from** column below).',
    '',
    '| source | who answers |',
    '| --- | --- |',
    ...sources,
    '',
    '## Codes',
    '',
    '**HTTP status** is the status the operator HTTP host answers with when it refuses with the code itself',
    '(`hostHttpStatus`); a broker Reply the host relays keeps its own mapping (`replyErrorStatus` in',
    '`broker/host/http-host.ts`).',
    '',
    '| code | meaning | from | HTTP status |',
    '| --- | --- | --- | --- |',
    ...codes,
    '',
  ].join('\n');
}
