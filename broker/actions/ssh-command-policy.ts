import type { SshHostSettings } from '../config/index.js';
import type { ApprovalMode } from '../contract/index.js';

/** Lane and approval for one command on a host: the first matching `commands[]` rule, else the host's. */
export function sshCommandPolicy(host: SshHostSettings, command: string): { lane: string; approval: ApprovalMode } {
  const rule = host.commands.find((r) => globMatches(r.command, command));
  return { lane: rule?.lane ?? host.lane ?? `host:${host.name}`, approval: rule?.approval ?? host.approval };
}

/** `*` matches any run of characters (including none); everything else is literal. Whole string. */
export function globMatches(pattern: string, text: string): boolean {
  const source = pattern
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[\\s\\S]*');
  return new RegExp(`^${source}$`).test(text);
}
