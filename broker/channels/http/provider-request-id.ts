import type { IncomingHttpHeaders } from 'node:http';

/**
 * What a provider request id may look like to be journaled: 1–200 characters of letters, digits
 * and `. _ : -` (UUIDs, `req_…`, ULIDs, dotted trace ids). Anything else — spaces, quotes, `/`,
 * `=`, `+`, a list of values — is not recorded: the id is only worth keeping as an exact key to
 * look up later, and a narrow alphabet keeps header noise, injected text and most encodings of a
 * credential out of the journal.
 */
const providerRequestIdPattern = /^[A-Za-z0-9._:-]{1,200}$/;

/**
 * The provider's own request id from the response header the route names
 * (`correlation.provider_request_id_header`), or undefined.
 *
 * The channel never sees the vault, so it cannot compare with "the secret" as the executor's
 * scrubber does. It compares with what it does see: the request as sent, credential injected. A
 * value found inside any request header value or the request path (query included) is not
 * recorded: an echo of the request is not an id the provider made (so it is no correlation), and
 * it is exactly how an injected bearer token, header secret, basic `user:pass` in base64 or query
 * secret would come back. What this cannot catch (a basic password echoed alone, a secret embedded
 * inside a longer id) would need a remote that deliberately reflects credentials into the header
 * the operator chose as its request id.
 */
export function providerRequestIdOf(
  headerName: string | undefined,
  responseHeaders: IncomingHttpHeaders,
  sent: { readonly path: string; readonly headers: ReadonlyArray<readonly [string, string]> },
): string | undefined {
  if (headerName === undefined) return undefined;
  const wanted = headerName.toLowerCase();
  const values = Object.entries(responseHeaders).filter(([name]) => name.toLowerCase() === wanted);
  // Two headers (or a list) with that name: which one is the request's id is not known.
  if (values.length !== 1) return undefined;
  const value = values[0]?.[1];
  if (typeof value !== 'string' || !providerRequestIdPattern.test(value)) return undefined;
  if (sent.path.includes(value) || sent.headers.some(([, v]) => v.includes(value))) return undefined;
  return value;
}
