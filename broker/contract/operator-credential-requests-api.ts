import { z } from 'zod';
import { credentialRequestIdSchema } from './events.js';
import { SessionRecordCheck } from './session-record.js';
import { credentialSummarySchema, operatorCredentialKinds, vaultApiSchemas } from './operator-vault-api.js';

/**
 * The operator API over agents' credential requests (request_credential, docs/operator.md). Merged into
 * `brokerApiSchemas`. Provisioning takes a secret (`credential.secret`, like `credentials.add.secret`): it goes only
 * into the vault; no reply, journal event or log line carries it.
 */

/** What the agent asked for, as a person sees it: plain text the request schema already cleared of control and bidi characters. */
export const credentialRequestCardSchema = z.object({
  request_id: z.string(),
  status: z.enum(['pending', 'provisioned', 'declined', 'expired']),
  session_id: z.string().nullable(),
  /** The asking process as the kernel described it (null: its session is not recorded). */
  session: z
    .object({
      status: z.string(),
      pid: z.number().int(),
      exe: z.string().nullable(),
      client_name: z.string().nullable(),
      /** Whether `status` is the journal's own record or an earlier run's row not confirmed by its events (SessionRecordCheck). */
      record: z.enum(SessionRecordCheck),
    })
    .nullable(),
  requested_at_ms: z.number().int(),
  /** While pending: when it expires unanswered. */
  expires_at_ms: z.number().int().nullable(),
  decided_at_ms: z.number().int().nullable(),
  /**
   * True when the request's details were written by an earlier run and the vault is locked (the journal seals each
   * run's events): the fields below are null until it is unlocked. Its status is still known.
   */
  sealed: z.boolean(),
  purpose: z.string().nullable(),
  for: z.union([z.object({ route: z.string() }), z.object({ host: z.string() })]).nullable(),
  kind: z.enum(operatorCredentialKinds).nullable(),
  header: z.string().nullable(),
  format: z.string().nullable(),
  /** Text only: a surface shows it as a link only after a person chooses to. */
  docs_url: z.string().nullable(),
  scopes: z.array(z.string()),
  /**
   * A prefill for the form: for a configured route, the credential name, kind and header it expects and the route's
   * name and host as bindings; for a host, the host as the binding. A suggestion only: the person decides.
   */
  suggested: z.object({
    name: z.string().nullable(),
    kind: z.enum(operatorCredentialKinds).nullable(),
    header: z.string().nullable(),
    bindings: z.array(z.string()),
  }),
  /** provisioned: the credential's name and how it was given. */
  credential: z.string().nullable(),
  how: z.enum(['added', 'bound_existing']).nullable(),
  /** Who answered (a person, or the process under the unattended opt-out) and a decline's reason. */
  decided_by: z.string().nullable(),
  reason: z.string().nullable(),
});
export type CredentialRequestCard = z.infer<typeof credentialRequestCardSchema>;

const requestId = credentialRequestIdSchema;
const credentialName = z.string().min(1).max(64);

export const credentialRequestApiSchemas = {
  'credential_requests.list': {
    input: z.strictObject({}),
    /** Pending ones first (oldest first), then the most recent answered ones; bounded. */
    output: z.object({ requests: z.array(credentialRequestCardSchema) }),
  },
  'credential_requests.provision': {
    input: z.union([
      /** A new credential, added exactly as `credentials.add` adds one. */
      z.strictObject({ request_id: requestId, credential: vaultApiSchemas['credentials.add'].input }),
      /** A credential the vault holds; `add_binding` adds one binding (a host, host pattern or route name) to it. */
      z.strictObject({
        request_id: requestId,
        existing: credentialName,
        add_binding: z.string().min(1).max(255).optional(),
      }),
    ]),
    output: z.object({
      request_id: z.string(),
      status: z.literal('provisioned'),
      how: z.enum(['added', 'bound_existing']),
      credential: credentialSummarySchema,
      journal_seq: z.number().int(),
    }),
  },
  'credential_requests.decline': {
    input: z.strictObject({ request_id: requestId, reason: z.string().trim().min(1).max(2000).optional() }),
    output: z.object({ request_id: z.string(), status: z.literal('declined'), journal_seq: z.number().int() }),
  },
} as const;
