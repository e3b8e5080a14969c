import { agentToolInputSchemas, type AgentToolInput } from '../contract/index.js';
import { sha256Hex } from './http-action-request.js';

/**
 * What an agent may send is the ssh_exec tool's schema in broker/contract, nothing else (strict). Its `timeout_ms`
 * is the caller's wait, which the executor never reads: the host entry's timeout_ms is the operation deadline.
 */
export const sshActionRequestSchema = agentToolInputSchemas.ssh_exec;
export type SshActionRequest = AgentToolInput<'ssh_exec'>;

/** sha256 over the host entry name and the command (canonical JSON) — never the key. */
export function sshRequestFingerprint(request: Pick<SshActionRequest, 'host' | 'command'>): string {
  return `sha256:${sha256Hex(Buffer.from(JSON.stringify({ channel: 'ssh', host: request.host, command: request.command })))}`;
}
