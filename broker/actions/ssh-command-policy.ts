import type { SshHostSettings } from '../config/index.js';
import type { ApprovalMode } from '../contract/index.js';

/** Lane and approval for one command on a host: the first matching `commands[]` rule, else the host's. */
export function sshCommandPolicy(host: SshHostSettings, command: string): { lane: string; approval: ApprovalMode } {
  const rule = host.commands.find((r) => globMatches(r.command, command));
  return { lane: rule?.lane ?? host.lane ?? `host:${host.name}`, approval: rule?.approval ?? host.approval };
}

/**
 * What a rule's `*` may stand for: a run (possibly empty) of ASCII letters, digits and `_ - . / : , @ + =`,
 * characters that mean themselves to sh, bash, zsh, fish and csh. The command is run by the remote user's shell,
 * so a wildcard that matched shell syntax would let the agent widen a rule into any command: never whitespace (a
 * new argument, or a new command after a newline), never `; & | < > ( ) $` or a backquote (another command, a
 * substitution, a redirection), never `\ ' "` (an escape or quote that changes how the pattern's own text
 * reads), never `# ~ * ? [ ] { } ! ^ %` (a comment that drops the pattern's tail, an expansion), never a control
 * or non-ASCII character. A command that needs any of them matches no wildcard, so it falls back to the host's
 * own approval and lane (docs/ssh-channel.md, "Command rules").
 */
const wildcardRun = '[A-Za-z0-9_\\-./:,@+=]*';

/** `*` is a wildcardRun; everything else is literal. Whole string. */
export function globMatches(pattern: string, text: string): boolean {
  const source = pattern
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join(wildcardRun);
  return new RegExp(`^${source}$`).test(text);
}
