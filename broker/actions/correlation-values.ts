import type { Route } from '../config/index.js';

/** A recorded correlation value's length bound (the PREFLIGHT_VALIDATED schema's). */
export const correlationValueCharsMax = 200;

/**
 * The route's declared correlation fields (`correlation.request_fields`) as the request body names
 * them, journaled with PREFLIGHT_VALIDATED so a bounded read-back can later ask the remote for the
 * object this request would have created. Only top-level fields of a JSON object body, and only
 * string (1–200 characters) or finite number values (recorded as JavaScript prints them, which is
 * how a read-back candidate's number is compared too). A field that is missing, of another type or
 * too long is absent; a body that is not a JSON object gives nothing. Undefined when nothing was
 * found, so the event carries no empty record.
 *
 * The fields are ones the configuration names as identifiers (an external reference, an order
 * number), never credentials: the body is the agent's own, before any injection.
 */
export function correlationValues(route: Route, body: Uint8Array): Readonly<Record<string, string>> | undefined {
  const fields = route.correlation?.request_fields ?? [];
  if (fields.length === 0 || body.length === 0) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const entries: Array<[string, string]> = [];
  for (const field of fields) {
    if (!Object.hasOwn(parsed, field)) continue;
    const value = valueText((parsed as Record<string, unknown>)[field]);
    if (value !== undefined) entries.push([field, value]);
  }
  // fromEntries defines own properties, so a field named like an Object.prototype member stays data.
  return entries.length === 0 ? undefined : Object.fromEntries(entries);
}

function valueText(value: unknown): string | undefined {
  const text =
    typeof value === 'string' ? value : typeof value === 'number' && Number.isFinite(value) ? String(value) : undefined;
  return text === undefined || text.length === 0 || text.length > correlationValueCharsMax ? undefined : text;
}
