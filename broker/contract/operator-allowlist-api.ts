import { z } from 'zod';
import { allowlistEntryIdSchema, codeSigningSchema, sessionIdSchema } from './events.js';

/**
 * The operator API over the process allowlist (docs/queue.md "Process allowlist", docs/operator.md). Merged into
 * `brokerApiSchemas`. An entry names an executable by absolute path and the sha256 of its bytes — always computed by
 * the broker, from the file at that path or from the running process's /proc/<pid>/exe, never taken from a caller —
 * so a binary replaced on disk no longer matches. The caller's hash is only compared: an add names the hash the
 * person saw (from allowlist.preview) and is refused when the broker's own hash differs. On macOS an entry may also carry the executable's code-signing
 * identity (read with /usr/bin/codesign when it was added); it then matches only a process whose executable still
 * verifies with that identity. Adding and removing are a person's decisions.
 */

/** Bounds: entries in force, and routes/hosts per entry. */
export const allowlistEntriesMax = 256;
export const allowlistScopeMax = 64;

const routeName = z.string().min(1).max(64);
const hostName = z.string().min(1).max(260);
const scope = {
  /** Only these routes (empty or absent: every route and host, unless `hosts` names some). */
  routes: z.array(routeName).max(allowlistScopeMax).optional(),
  /** Only these SSH host entries. */
  hosts: z.array(hostName).max(allowlistScopeMax).optional(),
};

export const allowlistEntrySchema = z.object({
  entry_id: z.string(),
  path: z.string(),
  sha256: z.string(),
  /** Both empty: the entry covers every route and host (the session is approved at open). */
  routes: z.array(z.string()),
  hosts: z.array(z.string()),
  /** actorLabel of the person who added it. */
  added_by: z.string(),
  added_at_ms: z.number().int(),
  from_session: z.string().nullable(),
  /** macOS: the code-signing identity the executable had when added (null: none, matched by path + sha256 only). */
  signing: codeSigningSchema.nullable(),
});
export type AllowlistEntry = z.infer<typeof allowlistEntrySchema>;

/** The sha256 a person was shown (allowlist.preview): an add whose file now hashes otherwise is refused. */
const expectedSha256 = z.string().regex(/^sha256:[0-9a-f]{64}$/);

export const allowlistApiSchemas = {
  'allowlist.list': {
    input: z.strictObject({}),
    output: z.object({
      /**
       * `sealed`: entries written by an earlier run cannot be read until the vault is unlocked (the journal seals every
       * payload); until then nothing matches and every new session gets a card.
       */
      state: z.enum(['ready', 'sealed']),
      entries: z.array(allowlistEntrySchema),
    }),
  },
  'allowlist.preview': {
    /**
     * What `allowlist.add` would record for a session's executable or a path, hashed by the broker now the same way:
     * the card shows it, and the add that follows carries it back as `expected_sha256`.
     */
    input: z.union([
      z.strictObject({ session_id: sessionIdSchema }),
      z.strictObject({ path: z.string().min(2).max(4096).startsWith('/') }),
    ]),
    output: z.object({ path: z.string(), sha256: z.string(), signing: codeSigningSchema.nullable() }),
  },
  'allowlist.add': {
    /**
     * From a session's card (`session_id`: that process's executable, hashed now from /proc/<pid>/exe while the
     * process lives with the same start time and still runs the executable its session recorded; on macOS the file
     * lsof names as its text image, with its start time unchanged by `ps`), or by `path` (an absolute path to a
     * regular file, hashed as it is on disk now). On macOS the broker also reads its code-signing identity.
     * `expected_sha256` is the hash the person was shown (allowlist.preview): the file rewritten between that look and
     * this hash is refused (EXECUTABLE_UNVERIFIABLE, field expected_sha256) rather than recorded as the agent's bytes.
     */
    input: z.union([
      z.strictObject({ session_id: sessionIdSchema, expected_sha256: expectedSha256, ...scope }),
      z.strictObject({ path: z.string().min(2).max(4096).startsWith('/'), expected_sha256: expectedSha256, ...scope }),
    ]),
    output: z.object({
      entry: allowlistEntrySchema,
      /** False when an entry with the same path, hash, signing and scope was already in force (nothing appended). */
      added: z.boolean(),
      /** From a session's card with no scope: whether that session was approved too (false: decided meanwhile). */
      session_approved: z.boolean().optional(),
    }),
  },
  'allowlist.remove': {
    input: z.strictObject({ entry_id: allowlistEntryIdSchema }),
    output: z.object({ entry_id: z.string(), removed: z.literal(true) }),
  },
} as const;
