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
 * adds nothing (`*-v` matching `-v`: the dash is the rule's). Nor does the strict run take the `=` that makes a word
 * an assignment where the shell reads one, before the command word (`* /opt/app/run` never matches
 * `LD_PRELOAD=/x.so /opt/app/run`: the agent's word would be the command's environment, not the command;
 * assignmentSigns). The loose run is any run of wildcard characters, options, `..` and such an `=` included.
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
  const assignments = star === 'strict' ? assignmentSigns(text) : new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++)
    takes[i] =
      wildcardChar.test(text[i] ?? '') && (star === 'loose' || (!inDotDotSegment(text, i) && assignments[i] !== 1))
        ? 1
        : 0;
  return takes;
}

/**
 * Words after which a shell still reads a command's assignments: `if A=1 cmd`, `time A=1 cmd`, `! A=1 cmd`; zsh's
 * precommand modifiers `nocorrect` and `noglob`; fish's `and`, `or`, `not`, `begin` (fish 3.1 reads `A=1 cmd` too).
 */
const commandStartWords: ReadonlySet<string> = new Set([
  'if',
  'then',
  'else',
  'elif',
  'do',
  'while',
  'until',
  'time',
  'coproc',
  'nocorrect',
  'noglob',
  'and',
  'or',
  'not',
  'begin',
]);
/** Words whose next word is their argument, after which the shell still reads assignments: zsh's `repeat 3 A=1 cmd`. */
const argumentThenCommandWords: ReadonlySet<string> = new Set(['repeat']);
/** A character that ends a command, so the next word may be an assignment again: `x; A=1 cmd`, `x && A=1 cmd`. */
const commandEnd = /^[;&|()\n]$/;

/**
 * Per position of the text: 1 for an `=` that makes its word an assignment the shell applies to the command: the first
 * `=` of a word that begins, unquoted, with a name (`[A-Za-z_][A-Za-z0-9_]*`, then optionally a `[subscript]` and a
 * `+`), read where the shell reads assignments: before the command word, so `LD_PRELOAD=/x.so /opt/app/run` runs
 * /opt/app/run with a library the agent chose. A strict run never takes that `=` (globMatches), so it never turns a
 * word into an assignment; one the rule writes itself (`FOO=* cmd`, `*=1 cmd`) is its author's choice, and after the
 * command word `a=b` is an argument (`echo *` matches `echo a=b`).
 *
 * The shell reads assignments at the text's start, after `; & | ( )` or a newline, after a word that begins a command
 * (`if`, `then`, `do`, `time` and its options, ...) and after words that are assignments or redirections themselves
 * (`A=1 B=2 cmd`, `>out A=1 cmd`). A conservative reading of sh, bash, zsh and fish, never looser than the words,
 * redirections and quotes it knows (zsh's modifiers, `repeat N`, `>!`, `<<-`; fish's `and`/`or`/`not`/`begin` and its
 * `\'` inside '…', both readings of which are taken): only a word of wildcard characters alone, outside any quote,
 * `{ }` or `[ ]`, ends the assignments (a word holding a quote, `$` or a bracket might hide a blank:
 * `A="x y" B=1 cmd`), and a quote, a backslash, `$'…'` and a comment are skipped as sh skips them. Pure, two passes.
 */
function assignmentSigns(text: string): Uint8Array {
  // sh and fish read a backslash inside '…' differently (fish: \' escapes the quote); an `=` either reading makes an
  // assignment is marked, so neither shell's reading is looser than this.
  const sh = assignmentSignsAs(text, false);
  const fish = assignmentSignsAs(text, true);
  for (let i = 0; i < sh.length; i++) sh[i] = (sh[i] ?? 0) | (fish[i] ?? 0);
  return sh;
}

/** assignmentSigns under one reading of a backslash inside single quotes (`singleQuoteEscapes`: fish's). */
function assignmentSignsAs(text: string, singleQuoteEscapes: boolean): Uint8Array {
  const marks = new Uint8Array(text.length);
  let assigning = true; // the next word may still be an assignment
  let depth = 0; // open { or [ outside quotes
  let word = ''; // the current word's characters as written ('' between words)
  let plain = true; // the word holds wildcard characters only, none quoted
  let assignment = false; // the word is NAME=value
  let name: 'start' | 'name' | 'subscript' | 'after' | 'plus' | 'no' = 'start';
  let redirectNext = false; // the previous word ended with < or >: this one is its target
  let afterTime = false; // time's options (time -p A=1 cmd) keep the assignments
  let argumentNext = false; // the previous word was `repeat`: this one is its count
  const endWord = (): void => {
    if (word === '') return;
    const keeps =
      !plain ||
      assignment ||
      depth > 0 ||
      redirectNext ||
      argumentNext ||
      commandStartWords.has(word) ||
      argumentThenCommandWords.has(word) ||
      (afterTime && word.startsWith('-'));
    if (!keeps) assigning = false;
    afterTime = word === 'time' || (afterTime && word.startsWith('-'));
    argumentNext = argumentThenCommandWords.has(word);
    // A redirection's operator ends the word (`>out`, `2>&1`, zsh's `>!` and `>>!`, a heredoc's `<<-`): its target next.
    redirectNext = /(<<-|[<>][&|!]?)$/.test(word.slice(-3));
    word = '';
    plain = true;
    assignment = false;
    name = 'start';
  };
  for (let i = 0; i < text.length;) {
    const c = text[i] ?? '';
    if (c === ' ' || c === '\t') {
      endWord();
      i += 1;
      continue;
    }
    // & or | right after < or > is part of the redirection (2>&1, >|), not a command's end.
    if (commandEnd.test(c) && !((c === '&' || c === '|') && /[<>]$/.test(word.slice(-1)))) {
      endWord();
      assigning = true;
      redirectNext = false;
      afterTime = false;
      argumentNext = false;
      i += 1;
      continue;
    }
    if (c === '#' && word === '') {
      while (i < text.length && text[i] !== '\n') i += 1;
      continue;
    }
    if (c === '\\' && text[i + 1] === '\n') {
      i += 2; // a line continuation: removed before the word is read
      continue;
    }
    const next = tokenEnd(text, i, singleQuoteEscapes);
    if (c === '{' || c === '[') depth += 1;
    else if ((c === '}' || c === ']') && depth > 0) depth -= 1;
    word += text.slice(i, next);
    if (!wildcardChar.test(c)) plain = false;
    if (name === 'subscript') {
      if (c === ']') name = 'after';
    } else if (c === '=' && (name === 'name' || name === 'after' || name === 'plus')) {
      if (assigning) marks[i] = 1;
      assignment = true;
      name = 'no';
    } else if (/^[A-Za-z_]$/.test(c) && name === 'start') name = 'name';
    else if (/^[A-Za-z0-9_]$/.test(c) && name === 'name') name = 'name';
    else if (c === '[' && name === 'name') name = 'subscript';
    else if (c === '+' && (name === 'name' || name === 'after')) name = 'plus';
    else name = 'no';
    i = next;
  }
  return marks;
}

/** The index after what starts at text[i]: a quoted run (`'…'`, `"…"`, backquotes, `$'…'`), `\x`, or one character. */
function tokenEnd(text: string, i: number, singleQuoteEscapes: boolean): number {
  const c = text[i];
  if (c === '\\') return i + 2;
  if (c === '$' && text[i + 1] === "'") return quoteEnd(text, i + 1, "'", true);
  if (c === "'" || c === '"' || c === '`') return quoteEnd(text, i, c, c !== "'" || singleQuoteEscapes);
  return i + 1;
}

/** The index after the quote that opens at text[i] (its end, or the text's); `escapes`: a backslash escapes in it. */
function quoteEnd(text: string, i: number, close: string, escapes: boolean): number {
  let j = i + 1;
  while (j < text.length && text[j] !== close) j += escapes && text[j] === '\\' ? 2 : 1;
  return Math.min(j + 1, text.length);
}

/** Whether text[i] is a dot of a `..` that ends a name (a path segment), or the `/` right before or after one. */
function inDotDotSegment(text: string, i: number): boolean {
  const at = (k: number): string => text[k] ?? '';
  const bound = (k: number): boolean => !segmentChar.test(at(k));
  const dotDotAt = (k: number): boolean => at(k - 1) !== '.' && at(k) === '.' && at(k + 1) === '.' && bound(k + 2);
  if (at(i) === '.') return dotDotAt(i) || dotDotAt(i - 1);
  return at(i) === '/' && (dotDotAt(i + 1) || dotDotAt(i - 2));
}
