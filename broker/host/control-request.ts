import { z } from 'zod';
import { brokerApiMethods } from '../contract/operator-methods.js';

const proofSchema = z.strictObject({ passphrase: z.string().min(1).max(1_024) });
/** The control socket's request shapes: the server (control-socket.ts) parses every line with them. */
export const requestSchema = z.discriminatedUnion('op', [
  // `source: 'file'`: the client read the passphrase from a file (--passphrase-file, POSTERN_PASSPHRASE_FILE); the
  // broker then takes no passphrase as a person's proof for the rest of its run (control-proof.ts).
  z.strictObject({
    op: z.literal('unlock'),
    passphrase: z.string().min(1).max(1_024),
    source: z.literal('file').optional(),
  }),
  // Locking is a decision too (an agent must not stop every dispatch at will): it carries a proof.
  z.strictObject({ op: z.literal('lock'), proof: proofSchema.optional() }),
  z.strictObject({ op: z.literal('vault_status') }),
  // The operator API (approvals, sessions, actions, activity) for the CLI; the handler parses input.
  // A decision (contract operatorMethodClass) carries the person's proof: the vault passphrase typed on a terminal.
  z.strictObject({
    op: z.literal('api'),
    method: z.enum(brokerApiMethods),
    input: z.unknown().optional(),
    proof: proofSchema.optional(),
  }),
]);
export type ControlRequest = z.infer<typeof requestSchema>;
