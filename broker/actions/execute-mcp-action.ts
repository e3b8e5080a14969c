import { createHash } from 'node:crypto';
import type { McpChannelReport, McpServerSpec, McpUpstreams } from '../channels/mcp/index.js';
import { mcpCredentialRefs, mcpToolPolicy, type McpServerSettings } from '../config/index.js';
import { operationTimeoutMsDefault } from '../config/config-schema.js';
import {
  errorCodeMeanings,
  type ActionState,
  type AgentMcpResult,
  type ApprovalMode,
  type Classification,
  type NewEvent,
} from '../contract/index.js';
import { classifyOutcome, mcpReportEvidence, type LocalGate } from '../core/index.js';
import { mcpCardPreview } from '../queue/card-preview.js';
import { startAuthorization } from './authorize-credential.js';
import { authorizationRefusal, closedBeforeDispatch } from './journal-failure.js';
import { buildMcpEnvelope } from './mcp-envelope.js';
import { withServerSecrets, type OpenedCredential } from './mcp-server-secrets.js';
import { runRecorded } from './record-broker-error.js';
import {
  type ExecutorDeps,
  acceptedEvent,
  closedFacts,
  recordCallerCancelled,
  refusalFacts,
  settleOnlyAttempt,
  logRecorded,
  recordAccepted,
  vaultRefusal,
} from './record-refusal.js';
import { secretParts, secretScrubber } from './secret-scrubber.js';
import { settle, type SettleAnswers } from './settle.js';

/** An upstream call's arguments as the agent sent them are at most this many bytes of JSON. */
export const mcpArgumentsBytesMax = 1024 * 1024;
/** An upstream reply kept and handed to the agent is at most this many bytes of JSON (blocks past it are cut). */
export const mcpResultBytesMax = 1024 * 1024;

export interface McpActionDeps extends ExecutorDeps {
  readonly upstreams: McpUpstreams;
}

/** One call as the agent made it: `<server>.<tool>` split, the arguments unvalidated. */
export interface McpActionInput {
  readonly server: string;
  readonly tool: string;
  readonly arguments: unknown;
}

export interface McpActionResult {
  readonly envelope: ReturnType<typeof buildMcpEnvelope>;
  readonly result?: AgentMcpResult;
}

/**
 * Drives one upstream MCP tool call from admission to a recorded outcome, with the same steps as an SSH command:
 * ACTION_ACCEPTED → PREFLIGHT_VALIDATED | PREFLIGHT_FAILED → its turn (card, decision, lane order) →
 * CREDENTIAL_AUTHORIZED → the channel (SETUP_ATTEMPT_FAILED / DISPATCH_STARTED before the JSON-RPC request is
 * written, REQUEST_SENT, REMOTE_RESPONSE_*, CONNECTION_LOST) → result rows with RESULT_COMMITTED (one transaction), or
 * OUTCOME_RECORDED. A tool call is never retried by the broker (no tool is assumed idempotent).
 */
export async function executeMcpAction(
  deps: McpActionDeps,
  input: McpActionInput,
  cancel?: AbortSignal,
): Promise<McpActionResult> {
  const actionId = deps.ids.newActionId();
  return runRecorded(deps, actionId, async () => {
    const admitted = await admit(deps, actionId, input, cancel);
    if (admitted.kind === 'refused') return admitted.result;
    const turn = await deps.queue.awaitTurn(actionId, admitted.bound.preview);
    if (turn.kind === 'closed') return { envelope: closedEnvelope(turn.state, admitted.bound.fingerprint) };
    return authorizeAndRun(deps, admitted.bound);
  });
}

interface Bound {
  readonly actionId: string;
  readonly server: McpServerSettings;
  readonly tool: string;
  readonly args: Record<string, unknown>;
  readonly fingerprint: string;
  readonly preview: ReturnType<typeof mcpCardPreview>;
  readonly cancel: AbortSignal | undefined;
}

type Admitted = { kind: 'refused'; result: McpActionResult } | { kind: 'admitted'; bound: Bound };

/** sha256 over the server, the tool and the arguments with keys in order: what a person approves. */
export function mcpRequestFingerprint(server: string, tool: string, args: unknown): string {
  const hash = createHash('sha256').update(JSON.stringify([server, tool, sortedKeys(args)]));
  return `sha256:${hash.digest('hex')}`;
}

function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries.map(([k, v]) => [k, sortedKeys(v)]));
}

/** Admission: ACTION_ACCEPTED and PREFLIGHT_VALIDATED in one commit, or ACTION_ACCEPTED and the refusal. */
async function admit(
  deps: McpActionDeps,
  actionId: string,
  input: McpActionInput,
  cancel: AbortSignal | undefined,
): Promise<Admitted> {
  const fingerprint = mcpRequestFingerprint(input.server, input.tool, input.arguments);
  const server = deps.config.mcpServers.get(input.server);
  const refuseAdmission = async (target: string, gate: LocalGate, message: string): Promise<Admitted> => {
    await recordAccepted(deps, mcpAccepted(deps, actionId, { target, fingerprint, lane: null, approval: 'none' }));
    return { kind: 'refused', result: await refuse(deps, actionId, fingerprint, gate, message) };
  };
  if (server === undefined) {
    const gate = { kind: 'validation', code: 'INVALID_TARGET', field: 'name' } as const;
    return refuseAdmission('mcp:(unknown)', gate, 'no such MCP server; list the tools first');
  }
  const target = `mcp:${server.name} call ${input.tool}`;
  const args = input.arguments ?? {};
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    const gate = { kind: 'validation', code: 'INVALID_ARGUMENT', field: 'arguments' } as const;
    return refuseAdmission(target, gate, 'arguments must be a JSON object');
  }
  if (Buffer.byteLength(JSON.stringify(args), 'utf8') > mcpArgumentsBytesMax) {
    const gate = { kind: 'validation', code: 'PAYLOAD_LIMIT', field: 'arguments' } as const;
    return refuseAdmission(target, gate, `arguments are at most ${mcpArgumentsBytesMax} bytes of JSON`);
  }
  const missing = mcpCredentialRefs(server).some(
    (name) => deps.vault.state() !== 'uninitialized' && deps.vault.describe(name) === undefined,
  );
  if (missing) {
    // The credential name comes from configuration and may itself be sensitive: never echoed.
    const gate = { kind: 'validation', code: 'UNKNOWN_CREDENTIAL', field: 'name' } as const;
    return refuseAdmission(target, gate, 'the MCP server names a credential the vault does not hold');
  }
  const policy = mcpToolPolicy(server, input.tool);
  await deps.journal.appendBatch([
    mcpAccepted(deps, actionId, {
      target,
      fingerprint,
      lane: policy.lane,
      approval: policy.approval,
      ...(policy.rule === undefined ? {} : { rule: policy.rule }),
    }),
    { kind: 'PREFLIGHT_VALIDATED', action_id: actionId, payload: {} },
  ]);
  deps.onAdmitted?.(actionId);
  const record = args as Record<string, unknown>;
  const preview = mcpCardPreview({ name: server.name, credentials: mcpCredentialRefs(server) }, input.tool, record);
  return {
    kind: 'admitted',
    bound: { actionId, server, tool: input.tool, args: record, fingerprint, preview, cancel },
  };
}

interface Admission {
  readonly target: string;
  readonly fingerprint: string;
  readonly lane: string | null;
  readonly approval: ApprovalMode;
  readonly rule?: string;
}

function mcpAccepted(deps: McpActionDeps, actionId: string, a: Admission): NewEvent {
  return acceptedEvent(deps, actionId, a.lane, {
    channel: 'mcp',
    target: a.target,
    request_fingerprint: a.fingerprint,
    approval: a.approval,
    // No tool is assumed idempotent: an upstream's own hints are the upstream's word, not a declared contract.
    idempotent: false,
    ...(a.rule === undefined ? {} : { approval_rule: a.rule }),
  });
}

/** What the channel needs of a server entry. */
export function mcpServerSpec(server: McpServerSettings): McpServerSpec {
  return {
    name: server.name,
    transport: server.transport,
    ...(server.command === undefined ? {} : { command: server.command }),
    ...(server.args === undefined ? {} : { args: server.args }),
    ...(server.cwd === undefined ? {} : { cwd: server.cwd }),
    ...(server.url === undefined ? {} : { url: server.url }),
    ...(server.oauth === undefined ? {} : { oauth: mcpOAuthSettings(server.oauth) }),
    warmMs: server.warm_ms,
  };
}

function mcpOAuthSettings(oauth: NonNullable<McpServerSettings['oauth']>): NonNullable<McpServerSpec['oauth']> {
  return {
    ...(oauth.client_id === undefined ? {} : { clientId: oauth.client_id }),
    ...(oauth.client_name === undefined ? {} : { clientName: oauth.client_name }),
    ...(oauth.scopes === undefined ? {} : { scopes: oauth.scopes }),
  };
}

async function authorizeAndRun(deps: McpActionDeps, b: Bound): Promise<McpActionResult> {
  const needsVault = mcpCredentialRefs(b.server).length > 0;
  if (needsVault && deps.vault.state() !== 'unlocked')
    return refuse(deps, b.actionId, b.fingerprint, { kind: 'vault_locked' }, 'the vault is locked');
  try {
    return await withServerSecrets(deps.vault, b.server, async (opened) => {
      // A person may have cancelled between the queue's release and here: nothing is even set up.
      const closed = closedBeforeDispatch(deps.journal, b.actionId);
      if (closed !== undefined) return { envelope: closedEnvelope(closed, b.fingerprint) };
      // Awaited only after the channel ran: FIFO commits make DISPATCH_STARTED durable only after this row.
      const authorized = startAuthorization(
        deps.journal,
        b.actionId,
        mcpCredentialAuthorization(b.server, b.fingerprint, opened),
      );
      // The secrets the serving session was started with: a reply may echo those, whatever was opened here.
      const sessionSecrets: string[] = [];
      const report = await deps.upstreams.call(mcpServerSpec(b.server), {
        actionId: b.actionId,
        attempt: 1,
        tool: b.tool,
        arguments: b.args,
        deadlineMs: b.server.timeout_ms ?? operationTimeoutMsDefault,
        ...(b.cancel === undefined ? {} : { signal: b.cancel }),
        // What CREDENTIAL_AUTHORIZED records, and how it is handed over: a warm session started otherwise is renewed.
        credentialKey: JSON.stringify([
          opened.map((o) => [o.info.id, o.info.version_tag]),
          b.server.credential ?? null,
          b.server.env ?? {},
        ]),
        onSessionSecrets: (secrets) => sessionSecrets.push(...secrets.map((s) => s.toString('utf8'))),
        // record() appends the settlement at once (settle.ts): the observations ride in its commit.
        observationsRideWithSettlement: true,
      });
      const refusedAs = await authorizationRefusal(deps.journal, b.actionId, authorized);
      if (refusedAs !== undefined) return { envelope: closedEnvelope(refusedAs, b.fingerprint) };
      // An OAuth server's tokens are its secrets too: a server that echoes its request must not hand them on.
      const parts = [
        ...opened.flatMap((o) => secretParts(o.secret)),
        ...sessionSecrets,
        ...deps.upstreams.oauthSecrets(b.server.name),
      ];
      // The reply is scrubbed in slices that give the event loop turns (scrubAsync): here, before settle, never
      // between settle's check of the held observations and the settlement's append (settle.ts).
      const delivered =
        report.result !== undefined && 'content' in report.result ? await deliver(b, report.result, parts) : undefined;
      return settle(deps.journal, b.actionId, report, mcpAnswers(b, report), () => record(deps, b, report, delivered));
    });
  } catch (error) {
    const refusal = vaultRefusal(error, 'name');
    if (refusal !== undefined) return refuse(deps, b.actionId, b.fingerprint, refusal.gate, refusal.message);
    throw error;
  }
}

/**
 * CREDENTIAL_AUTHORIZED for an MCP call: the credentials the server is given (ids and version tags, comma-joined;
 * `none` for a server that needs none — the journal's order still requires the step) and how they are handed over
 * (`mcp_env`, `mcp_header`); for an `oauth:` server its OAuth grant, `mcp_oauth:<server>`, sent as the bearer
 * (`mcp_oauth`; a grant has no version tag: a person's authorization replaces it). Never a token.
 */
export function mcpCredentialAuthorization(
  server: McpServerSettings,
  fingerprint: string,
  opened: readonly OpenedCredential[],
): Parameters<typeof startAuthorization>[2] {
  if (server.oauth !== undefined)
    return {
      credential_id: `mcp_oauth:${server.name}`,
      version_tag: 'none',
      injection_mode: 'mcp_oauth',
      request_fingerprint: fingerprint,
    };
  const joined = (values: string[]): string => (values.length === 0 ? 'none' : values.join(',').slice(0, 200));
  return {
    credential_id: joined(opened.map((o) => o.info.id)),
    version_tag: joined(opened.map((o) => o.info.version_tag)),
    injection_mode: opened.length === 0 ? 'none' : server.transport === 'stdio' ? 'mcp_env' : 'mcp_header',
    request_fingerprint: fingerprint,
  };
}

function mcpAnswers(b: Bound, report: McpChannelReport): SettleAnswers<McpActionResult> {
  return {
    closed: (state) => ({ envelope: closedEnvelope(state, b.fingerprint) }),
    unknown: (facts) => ({ envelope: buildMcpEnvelope({ ...facts, report, fingerprint: b.fingerprint }) }),
  };
}

async function record(
  deps: McpActionDeps,
  b: Bound,
  report: McpChannelReport,
  delivered: Delivered | undefined,
): Promise<McpActionResult> {
  const classification = classifyOutcome(mcpReportEvidence(report));
  if (report.caller === 'cancelled' || report.stoppedBeforeDispatch === 'cancelled')
    await recordCallerCancelled(deps.journal, b.actionId, report.dispatchStarted);
  const decided =
    delivered !== undefined &&
    report.dispatchStarted &&
    (classification.outcome === 'committed' || classification.outcome === 'rejected');
  const { state, resultId } = await settleOnlyAttempt(
    deps,
    b.actionId,
    classification,
    decided
      ? {
          result: {
            summary: {
              server: b.server.name,
              tool: b.tool,
              is_error: delivered.result.is_error,
              bytes: delivered.result.bytes,
            },
            body: delivered.body,
            total_bytes: delivered.result.bytes,
            truncated: delivered.result.truncated,
            digest: delivered.digest,
            created_at_ms: deps.clock.nowMs(),
          },
        }
      : { attempted: report.dispatchStarted || report.setup !== undefined },
  );
  log(deps, b.actionId, b.server.name, classification);
  const envelope = buildMcpEnvelope({
    state,
    classification,
    message: classification.code === null ? '' : errorCodeMeanings[classification.code],
    report,
    ...(resultId === undefined || delivered === undefined ? {} : { resultId, resultDigest: delivered.digest }),
    fingerprint: b.fingerprint,
  });
  return { envelope, ...(delivered === undefined ? {} : { result: delivered.result }) };
}

interface Delivered {
  readonly result: AgentMcpResult;
  readonly body: Buffer;
  readonly digest: string;
}

/**
 * The upstream's reply as the agent receives it: scrubbed of every form of every secret given to that server (a
 * server may echo its environment), then capped by whole content blocks; digest and size are of the delivered JSON.
 */
export async function deliver(
  b: Pick<Bound, 'server' | 'tool'>,
  reply: { content: unknown[]; structuredContent?: unknown; isError: boolean },
  parts: readonly string[],
): Promise<Delivered> {
  const scrubber = secretScrubber(parts);
  const scrubbedJson = (await scrubber.scrubAsync(Buffer.from(JSON.stringify(reply), 'utf8'))).bytes.toString('utf8');
  let scrubbed: { content: unknown[]; structuredContent?: unknown; isError: boolean };
  try {
    scrubbed = JSON.parse(scrubbedJson) as typeof scrubbed;
  } catch {
    // A redaction that broke the JSON (a secret spanning an escape): the scrubbed text, as one text block.
    scrubbed = { content: [{ type: 'text', text: scrubbedJson }], isError: reply.isError };
  }
  const content: Record<string, unknown>[] = [];
  let bytes = 0;
  let truncated = false;
  for (const block of scrubbed.content) {
    const size = Buffer.byteLength(JSON.stringify(block), 'utf8');
    if (bytes + size > mcpResultBytesMax || typeof block !== 'object' || block === null) {
      truncated = true;
      break;
    }
    content.push(block as Record<string, unknown>);
    bytes += size;
  }
  const structured = scrubbed.structuredContent;
  const keepStructured =
    typeof structured === 'object' &&
    structured !== null &&
    !Array.isArray(structured) &&
    bytes + Buffer.byteLength(JSON.stringify(structured), 'utf8') <= mcpResultBytesMax;
  if (structured !== undefined && !keepStructured) truncated = true;
  const result: AgentMcpResult = {
    server: b.server.name,
    tool: b.tool,
    is_error: reply.isError,
    content,
    ...(keepStructured ? { structured_content: structured as Record<string, unknown> } : {}),
    bytes: 0,
    truncated,
  };
  const body = Buffer.from(JSON.stringify({ ...result, bytes: undefined }), 'utf8');
  const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
  return { result: { ...result, bytes: body.length }, body, digest };
}

/** A ticket the queue closed (rejected, expired, cancelled, session revoked): its recorded envelope. */
function closedEnvelope(state: ActionState, fingerprint: string): McpActionResult['envelope'] {
  return buildMcpEnvelope(closedFacts(state, fingerprint));
}

async function refuse(
  deps: McpActionDeps,
  actionId: string,
  fingerprint: string,
  gate: LocalGate,
  message: string,
): Promise<McpActionResult> {
  return { envelope: buildMcpEnvelope(await refusalFacts(deps, 'mcp', actionId, { gate, message, fingerprint })) };
}

function log(deps: McpActionDeps, actionId: string, server: string | undefined, c: Classification): void {
  // Only ids and closed-set values: never arguments or replies.
  logRecorded(deps.logger, { action_id: actionId, server }, c, 'mcp action recorded');
}
