import type { SshHostSettings } from '../config/index.js';
import type { ApprovalMode } from '../contract/index.js';

/** Lane and approval for one command on a host: the first matching `commands[]` rule, else the host's. */
export function sshCommandPolicy(host: SshHostSettings, command: string): { lane: string; approval: ApprovalMode } {
  const rule = host.commands.find((r) =>
    globMatches(r.command, command, r.rules_may_loosen === true ? 'loose' : 'strict'),
  );
  return { lane: rule?.lane ?? host.lane ?? `host:${host.name}`, approval: rule?.approval ?? host.approval };
}

/**
 * The characters a rule's `*` may stand for: ASCII letters, digits and `_ - . / : , @ + =`, characters that mean
 * themselves to sh, bash, zsh, fish and csh. The command is run by the remote user's shell, so a wildcard that
 * matched shell syntax would let the agent widen a rule into any command: never whitespace (a new argument, or a
 * new command after a newline), never `; & | < > ( ) $` or a backquote (another command, a substitution, a
 * redirection), never `\ ' "` (an escape or quote that changes how the pattern's own text reads), never
 * `# ~ * ? [ ] { } ! ^ %` (a comment that drops the pattern's tail, an expansion), never a control or non-ASCII
 * character. A command that needs any of them matches no wildcard, so it falls back to the host's own approval
 * and lane (docs/ssh-channel.md, "Command rules").
 */
const wildcardChar = '[A-Za-z0-9_\\-./:,@+=]';
/**
 * A character that continues a name, so `..` next to it is not a path segment (`x..y`, `...`). `/` and every
 * other character end a segment, `=` `:` `,` `@` too: `if=../etc/shadow`, `host:../x` and `a,../b` hold one.
 */
const segmentChar = '[A-Za-z0-9_\\-.+]';
/**
 * At the position of a character `*` would take: that character is part of a `..` path segment (the segment's
 * first or second dot) or the `/` right before or after one. A segment is `..` between a start (the text's, or a
 * `/`, `=`, a space: anything not a segmentChar) and an end of the same kind.
 */
const dotDotHere = [
  `(?<!${segmentChar})\\.\\.(?!${segmentChar})`,
  `(?<=(?<!${segmentChar})\\.)\\.(?!${segmentChar})`,
  `\\/\\.\\.(?!${segmentChar})`,
  `(?<=(?<!${segmentChar})\\.\\.)\\/`,
].join('|');
/**
 * The strict `*`: a run of wildcard characters that neither begins a word with `-` (an option the rule did not
 * write: `tar -czf /backup/app.tgz --checkpoint-action=exec=sh`, `find /var/log -name x -delete`) nor puts a
 * character into a `..` path segment (`cat /var/log/app/../../../etc/shadow`). A run begins a word when the
 * character before it is not a wildcard character (the text's start, a space, a quote); after the rule's own
 * `-`, `=` or a letter it does not (`--level=*`, `-*` are the author's choice), and an empty run adds nothing
 * (`*-v` matching `-v`: the dash is the rule's).
 */
const strictChar = `(?:(?!${dotDotHere})${wildcardChar})`;
const strictRun = `(?:(?<=${wildcardChar})${strictChar}*|(?:(?!-)${strictChar}+)?)`;
/** The loose `*` (a rule with rules_may_loosen: true): any run of wildcard characters, options and `..` included. */
const looseRun = `${wildcardChar}*`;

/**
 * `*` is a strict (default) or loose run; everything else is literal. Whole string. Pure.
 */
export function globMatches(pattern: string, text: string, star: 'strict' | 'loose' = 'strict'): boolean {
  const source = pattern
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join(star === 'strict' ? strictRun : looseRun);
  return new RegExp(`^${source}$`).test(text);
}
