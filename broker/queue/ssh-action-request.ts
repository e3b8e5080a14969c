import { z } from 'zod';
import { sha256Hex } from './http-action-request.js';

/** What an agent asks for: a host entry's name and a command. Never an address, a user or a key. */
export const sshActionRequestSchema = z.strictObject({
  host: z.string().min(1).max(64),
  /** Bounded by the channel's commandBytesMax (PAYLOAD_LIMIT); this cap only stops absurd input early. */
  command: z.string().min(1).max(1024 * 1024),
  timeout_ms: z.number().int().positive().optional(),
});
export type SshActionRequest = z.infer<typeof sshActionRequestSchema>;

/** sha256 over the host entry name and the command (canonical JSON) — never the key. */
export function sshRequestFingerprint(request: Pick<SshActionRequest, 'host' | 'command'>): string {
  return `sha256:${sha256Hex(Buffer.from(JSON.stringify({ channel: 'ssh', host: request.host, command: request.command })))}`;
}
