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
 * themselves to sh, bash, zsh, fish and csh, but for `=` first in a word: zsh expands it to a command's path (`=ls` is
 * `/bin/ls`) and tcsh to a directory of its stack (`=1`), so a strict run never begins a word with it, nor with `-` or
 * `+`, which the program reads as an option (globMatches). The command is run by the remote user's shell, so a
 * wildcard that matched shell syntax would let the agent widen a rule into any command: never whitespace (a new
 * argument, or a new command after a newline), never `; & | < > ( ) $` or a backquote (another command, a
 * substitution, a redirection), never `\ ' "` (an escape or quote that changes how the pattern's own text reads),
 * never `# ~ * ? [ ] { } ! ^ %` (a comment that drops the pattern's tail, an expansion), never a control or non-ASCII
 * character. A command that needs any of them matches no wildcard, so it falls back to the host's own approval and
 * lane (docs/ssh-channel.md, "Command rules").
 */
const wildcardChar = /^[A-Za-z0-9_\-./:,@+=]$/;
/**
 * A character that continues a name, so `..` followed by it is not a path segment (`x..y`, `..x`). `/` and every
 * other character end a segment, `=` `:` `,` `@` too: `if=../etc/shadow`, `host:../x` and `a,../b` hold one. Before
 * the dots only a third dot matters (`...` is a name): a `..` that ends a name after a letter is the parent
 * directory once a program splits an option from its value (`-C..` is `-C ..` to make and git).
 */
const segmentChar = /^[A-Za-z0-9_\-.+]$/;

/**
 * `*` is a run of wildcard characters, strict (the default) or loose (a rule with rules_may_loosen: true);
 * everything else is literal, and the pattern covers the whole text. Pure.
 *
 * The strict run neither begins a word with `-` or `+` (an option the rule did not write: `tar -czf /backup/app.tgz
 * --checkpoint-action=exec=sh`, `find /var/log -name -delete`, `vim +terminal`, `less +F`) or `=` (to zsh a
 * command's path, `=ls` read as `/bin/ls`: a word the rule did not write either) nor takes a character of
 * a `..` path segment or the `/` right next to one (`cat /var/log/app/../../../etc/shadow`). A run begins a word when
 * the character before it is not a wildcard character (the text's start, a space, a quote); after the rule's own
 * `-`, `+`, `=` or a letter it does not (`--level=*`, `-*`, `tail -n +*` are the author's choice), and an empty run
 * adds nothing (`*-v` matching `-v`: the dash is the rule's). The loose run is any run of wildcard characters,
 * options and `..` included.
 *
 * One pass per `*` over the set of positions the pattern so far can end at, never backtracking: time is bounded by
 * the pattern's length times the command's (1 KiB by 32 KiB), whatever an agent puts in the command.
 */
export function globMatches(pattern: string, text: string, star: 'strict' | 'loose' = 'strict'): boolean {
  const [head = '', ...rest] = pattern.split('*');
  const n = text.length;
  const takes = runCharacters(text, star);
  let ends = new Uint8Array(n + 1);
  if (text.startsWith(head)) ends[head.length] = 1;
  for (const literal of rest) {
    // After the run: every position a run (possibly empty) from a reached position can end at.
    const afterRun = new Uint8Array(n + 1);
    let extending = false;
    for (let q = 0; q <= n; q++) {
      if (q > 0) {
        const p = q - 1;
        const starts =
          ends[p] === 1 && (star === 'loose' || !notFirstInWord(text[p]) || wildcardChar.test(text[p - 1] ?? ''));
        extending = takes[p] === 1 && (extending || starts);
      }
      afterRun[q] = ends[q] === 1 || extending ? 1 : 0;
    }
    const afterLiteral = new Uint8Array(n + 1);
    for (let q = 0; q + literal.length <= n; q++)
      if (afterRun[q] === 1 && text.startsWith(literal, q)) afterLiteral[q + literal.length] = 1;
    ends = afterLiteral;
    if (!ends.includes(1)) return false;
  }
  return ends[n] === 1;
}

/**
 * Whether a character, first in a word, makes the word other than what it reads as: an option, `-` for nearly every
 * program, `+` for many (`less +F`, `vim +terminal`, `tail +5`, `sort +1`, `date +%s`, `set +o`); or `=`, which zsh
 * expands to a command's path (`=ls` is `/bin/ls`; an unknown name fails the command) and tcsh to a directory of its
 * stack (`=1`, `=-`). Inside a word all three mean themselves (`--level=x`, `a+b`, `x-y`).
 */
function notFirstInWord(c: string | undefined): boolean {
  return c === '-' || c === '+' || c === '=';
}

/** Per position of the text: 1 when a run may take that character. */
function runCharacters(text: string, star: 'strict' | 'loose'): Uint8Array {
  const takes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++)
    takes[i] = wildcardChar.test(text[i] ?? '') && (star === 'loose' || !inDotDotSegment(text, i)) ? 1 : 0;
  return takes;
}

/** Whether text[i] is a dot of a `..` that ends a name (a path segment), or the `/` right before or after one. */
function inDotDotSegment(text: string, i: number): boolean {
  const at = (k: number): string => text[k] ?? '';
  const bound = (k: number): boolean => !segmentChar.test(at(k));
  const dotDotAt = (k: number): boolean => at(k - 1) !== '.' && at(k) === '.' && at(k + 1) === '.' && bound(k + 2);
  if (at(i) === '.') return dotDotAt(i) || dotDotAt(i - 1);
  return at(i) === '/' && (dotDotAt(i + 1) || dotDotAt(i - 2));
}
