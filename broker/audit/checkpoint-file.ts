import { z } from 'zod';
import { VerifyFailure } from './verify-codes.js';

/**
 * The file `postern audit checkpoint --export` writes, to be kept somewhere the journal's owner
 * cannot rewrite. Its public key is the trust anchor for `postern audit verify --checkpoint`.
 */
export const checkpointFileFormat = 'postern-audit-checkpoint/1';
/** A checkpoint file is a few hundred bytes; anything far larger is not one. */
export const checkpointFileBytesMax = 64 * 1024;

const base64 = (bytes: number) =>
  z
    .string()
    .max(200)
    .regex(/^[A-Za-z0-9+/]+=*$/)
    .refine((s) => Buffer.from(s, 'base64').length === bytes, `must be ${bytes} bytes of base64`);

export const checkpointFileSchema = z.strictObject({
  format: z.literal(checkpointFileFormat),
  sign_public_key: base64(32),
  size: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  root: z.string().regex(/^[0-9a-f]{64}$/),
  at_ms: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  signature: base64(64),
  exported_at_ms: z.number().int().nonnegative().optional(),
});
export type CheckpointFile = z.infer<typeof checkpointFileSchema>;

export interface Checkpoint {
  readonly size: number;
  readonly root: Uint8Array;
  readonly at_ms: number;
  readonly signature: Uint8Array;
}

export interface TrustedCheckpoint extends Checkpoint {
  readonly signPublic: Uint8Array;
}

/** Parses hostile bytes into a checkpoint, or fails with CHECKPOINT_FILE_INVALID. */
export function parseCheckpointFile(bytes: Uint8Array): TrustedCheckpoint {
  if (bytes.length > checkpointFileBytesMax) {
    throw new VerifyFailure(
      'CHECKPOINT_FILE_INVALID',
      null,
      `the checkpoint file exceeds ${checkpointFileBytesMax} bytes`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    throw new VerifyFailure('CHECKPOINT_FILE_INVALID', null, 'the checkpoint file is not JSON');
  }
  const parsed = checkpointFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new VerifyFailure(
      'CHECKPOINT_FILE_INVALID',
      null,
      `the checkpoint file is malformed at ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? ''}`,
    );
  }
  const f = parsed.data;
  return {
    signPublic: Buffer.from(f.sign_public_key, 'base64'),
    size: f.size,
    root: Buffer.from(f.root, 'hex'),
    at_ms: f.at_ms,
    signature: Buffer.from(f.signature, 'base64'),
  };
}

export function formatCheckpointFile(checkpoint: TrustedCheckpoint, exportedAtMs: number): string {
  const file: CheckpointFile = {
    format: checkpointFileFormat,
    sign_public_key: Buffer.from(checkpoint.signPublic).toString('base64'),
    size: checkpoint.size,
    root: Buffer.from(checkpoint.root).toString('hex'),
    at_ms: checkpoint.at_ms,
    signature: Buffer.from(checkpoint.signature).toString('base64'),
    exported_at_ms: exportedAtMs,
  };
  return `${JSON.stringify(file, null, 2)}\n`;
}
