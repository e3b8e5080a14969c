import { CodedError } from '../contract/coded-error.js';
import { credentialKinds, type CredentialKind, type SecretMaterial } from '../ports/credential-vault.js';

/** What `Vault.add` accepts. The secret and the SSH key passphrase are bytes the caller owns and zeroes. */
export interface CredentialInput {
  name: string;
  kind: CredentialKind;
  secret: Uint8Array;
  bindings: string[];
  header?: string;
  template?: string;
  param?: string;
  sshKeyPassphrase?: Uint8Array;
}

/** The non-secret part of a credential as validated (the id and version tag are added by the vault). */
export interface CredentialShape {
  name: string;
  kind: CredentialKind;
  bindings: string[];
  header?: string;
  template?: string;
  param?: string;
}

export const credentialNamePattern = /^[a-z0-9][a-z0-9_.-]{0,63}$/i;
/** A secret (token, password, private key) is at most 64 KiB. */
export const secretBytesMax = 64 * 1024;
/** A vault passphrase's bounds (here, with the other input bounds, so the CLI can check them without loading the vault). */
export const passphraseBytesMin = 8;
export const passphraseBytesMax = 1_024;
export const bindingsMax = 32;
export const bindingCharsMax = 255;
export const templateCharsMax = 1_024;
export const paramCharsMax = 128;
const headerNameCharsMax = 128;
const secretPlaceholder = '{secret}';
/** RFC 9110 token characters (header field names). */
const tokenPattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A host, host:port, [v6]:port, a wildcard label or a route name; lowercased when stored. */
const bindingPattern = /^[a-z0-9*[][a-z0-9._:*[\]-]*$/i;
/** Headers the broker owns or that frame the message: a credential may never set them. */
const headersRefused = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'upgrade',
  'te',
  'trailer',
  'keep-alive',
  'cookie',
  'proxy-authorization',
]);

/** Validates everything but the secret bytes themselves; throws INVALID_ARGUMENT naming the field. */
export function validateShape(input: Omit<CredentialInput, 'secret' | 'sshKeyPassphrase'>): CredentialShape {
  const name = validateName(input.name);
  if (!(credentialKinds as readonly string[]).includes(input.kind)) {
    throw invalid('kind', `must be one of ${credentialKinds.join(', ')}`);
  }
  if (!Array.isArray(input.bindings) || input.bindings.length > bindingsMax)
    throw invalid('bindings', `at most ${bindingsMax} bindings`);
  const bindings = [...new Set(input.bindings.map((binding, index) => validateBinding(binding, index)))];
  const shape: CredentialShape = { name, kind: input.kind, bindings };
  refuseUnless(input.kind === 'header', input.header, 'header');
  refuseUnless(input.kind === 'header', input.template, 'template');
  refuseUnless(input.kind === 'query', input.param, 'param');
  if (input.kind === 'header') {
    shape.header = validateHeaderName(input.header);
    shape.template = validateTemplate(input.template ?? secretPlaceholder);
  }
  if (input.kind === 'query') shape.param = validateParam(input.param);
  return shape;
}

export function validateName(name: unknown): string {
  if (typeof name !== 'string' || !credentialNamePattern.test(name)) {
    // The name may itself be sensitive (DESIGN §3): say what is allowed, never echo it.
    throw invalid('name', 'must be 1-64 characters: letters, digits, and . _ - (not first)');
  }
  return name;
}

/**
 * The secret as material for one use. Text kinds must be UTF-8 without control characters (a CR/LF
 * in a header value would let a secret smuggle a second header); messages never quote the bytes.
 */
export function materialFor(
  shape: Pick<CredentialShape, 'kind' | 'header' | 'template' | 'param'>,
  secret: Uint8Array,
): SecretMaterial {
  switch (shape.kind) {
    case 'bearer':
      return { kind: 'bearer', token: secretText(secret) };
    case 'header': {
      const text = secretText(secret);
      return {
        kind: 'header',
        header: shape.header ?? '',
        value: (shape.template ?? secretPlaceholder).replace(secretPlaceholder, () => text),
        secret: text,
      };
    }
    case 'basic': {
      const text = secretText(secret);
      const colon = text.indexOf(':');
      if (colon <= 0) throw invalid('secret', 'a basic credential is `user:password` with a non-empty user');
      return { kind: 'basic', user: text.slice(0, colon), password: text.slice(colon + 1) };
    }
    case 'query':
      return { kind: 'query', param: shape.param ?? '', value: secretText(secret) };
    case 'aws_sigv4':
      return awsKeyMaterial(secretText(secret));
    case 'oauth2_client':
      return oauthClientMaterial(secretText(secret));
    case 'ssh_key': {
      // Buffer.alloc is never a slice of the shared pool, so zeroing it after use zeroes only this key.
      const privateKey = Buffer.alloc(secret.length);
      privateKey.set(secret);
      return { kind: 'ssh_key', privateKey };
    }
  }
}

/** An AWS access key id: 16-128 word characters (the IAM API's AccessKeyId pattern and bounds). */
const awsAccessKeyIdPattern = /^\w{16,128}$/;
/** A secret access key or session token: visible ASCII without `:` (the separator); AWS issues base64 text. */
const awsKeyPartPattern = /^[\x21-\x39\x3b-\x7e]+$/;
/** A secret access key shorter than this could not be found by the scrubber (AWS issues 40 characters). */
const awsSecretCharsMin = 16;

/**
 * `ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]` (docs/vault.md): AWS issues none of the three with a colon,
 * so the form is unambiguous and fits the stdin and form paths `basic` uses.
 */
function awsKeyMaterial(text: string): SecretMaterial {
  const [accessKeyId = '', secretAccessKey = '', sessionToken, ...rest] = text.split(':');
  if (rest.length > 0 || !awsAccessKeyIdPattern.test(accessKeyId))
    throw invalid('secret', 'an aws_sigv4 credential is `ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]`');
  if (secretAccessKey.length < awsSecretCharsMin || !awsKeyPartPattern.test(secretAccessKey))
    throw invalid('secret', `the secret access key must be at least ${awsSecretCharsMin} visible ASCII characters`);
  if (sessionToken !== undefined && !awsKeyPartPattern.test(sessionToken))
    throw invalid('secret', 'the session token must be visible ASCII characters (or left out with its colon)');
  return { kind: 'aws_sigv4', accessKeyId, secretAccessKey, sessionToken };
}

/** A client secret shorter than this could not be found by the scrubber. */
const oauthClientSecretCharsMin = 8;

/**
 * `CLIENT_ID:CLIENT_SECRET` (docs/vault.md), split at the first colon like `basic`: a client id with a colon
 * cannot be stored (RFC 6749 allows one; no provider we know issues one), a secret with one can.
 */
function oauthClientMaterial(text: string): SecretMaterial {
  const colon = text.indexOf(':');
  if (colon <= 0)
    throw invalid('secret', 'an oauth2_client credential is `CLIENT_ID:CLIENT_SECRET` with a non-empty id');
  const clientSecret = text.slice(colon + 1);
  if (clientSecret.length < oauthClientSecretCharsMin)
    throw invalid('secret', `the client secret must be at least ${oauthClientSecretCharsMin} characters`);
  return { kind: 'oauth2_client', clientId: text.slice(0, colon), clientSecret };
}

export function checkSecretSize(secret: Uint8Array): void {
  if (!(secret instanceof Uint8Array) || secret.length === 0) throw invalid('secret', 'must not be empty');
  if (secret.length > secretBytesMax) {
    throw new CodedError('PAYLOAD_LIMIT', `a secret is at most ${secretBytesMax} bytes`, { field: 'secret' });
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function secretText(secret: Uint8Array): string {
  let text: string;
  try {
    text = utf8.decode(secret);
  } catch {
    throw invalid('secret', 'must be UTF-8 text for this kind');
  }
  // Control characters (C0 and DEL) are refused everywhere; a tab or space only inside the value.
  if (hasControlCharacter(text) || /^[\t ]|[\t ]$/.test(text)) {
    throw invalid('secret', 'must not contain control characters or leading/trailing whitespace');
  }
  return text;
}

/** C0 controls except tab, and DEL. */
function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f) return true;
  }
  return false;
}

function validateBinding(binding: unknown, index: number): string {
  if (
    typeof binding !== 'string' ||
    binding.length === 0 ||
    binding.length > bindingCharsMax ||
    !bindingPattern.test(binding)
  ) {
    throw invalid(`bindings[${index}]`, 'must be a host name, host:port, [v6 address]:port or a route name');
  }
  return binding.toLowerCase();
}

function validateHeaderName(header: string | undefined): string {
  if (header === undefined || header.length === 0 || header.length > headerNameCharsMax || !tokenPattern.test(header)) {
    throw invalid('header', 'a header credential needs a header name made of token characters (RFC 9110)');
  }
  if (headersRefused.has(header.toLowerCase()))
    throw invalid('header', `${header} is owned by the broker or frames the message`);
  return header;
}

function validateTemplate(template: string): string {
  if (template.length > templateCharsMax) throw invalid('template', `at most ${templateCharsMax} characters`);
  if (template.split(secretPlaceholder).length !== 2) throw invalid('template', 'must contain {secret} exactly once');
  if (hasControlCharacter(template)) throw invalid('template', 'must not contain control characters');
  return template;
}

function validateParam(param: string | undefined): string {
  if (param === undefined || param.length === 0 || param.length > paramCharsMax || !/^[A-Za-z0-9._~-]+$/.test(param)) {
    throw invalid('param', 'a query credential needs a parameter name (letters, digits, . _ ~ -)');
  }
  return param;
}

function refuseUnless(allowed: boolean, value: string | undefined, field: string): void {
  if (!allowed && value !== undefined)
    throw invalid(field, `only applies to a ${field === 'param' ? 'query' : 'header'} credential`);
}

function invalid(field: string, message: string): CodedError {
  return new CodedError('INVALID_ARGUMENT', message, { field });
}
