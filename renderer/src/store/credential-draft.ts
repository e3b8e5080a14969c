import { parseBindings } from './credentials-reducer.js';
import type { NewCredential } from './credentials-slice.js';

/** Kinds a form can add from a secret field; an SSH private key is multi-line and goes through the CLI. */
export const formCredentialKinds = [
  { kind: 'bearer', label: 'bearer — Authorization: Bearer <secret>' },
  { kind: 'header', label: 'header — a named header with a template' },
  { kind: 'basic', label: 'basic — user:password' },
  { kind: 'query', label: 'query — a query parameter' },
  { kind: 'aws_sigv4', label: 'aws_sigv4 — AWS Signature V4 (access key id, secret key, session token)' },
  { kind: 'oauth2_client', label: 'oauth2_client — OAuth2 client client_id:client_secret (for its token endpoint)' },
] as const;
export type FormCredentialKind = (typeof formCredentialKinds)[number]['kind'];

/**
 * A credential form's fields as typed (the Credentials tab's and a request's provision form), the secret excepted:
 * it never leaves its secret field until submit.
 */
export interface CredentialDraft {
  name: string;
  kind: FormCredentialKind;
  bindings: string;
  header: string;
  template: string;
  param: string;
  /** aws_sigv4: the access key id (not secret; the secret key and session token stay in secret fields). */
  accessKeyId: string;
}

export const emptyCredentialDraft: CredentialDraft = {
  name: '',
  kind: 'bearer',
  bindings: '',
  header: '',
  template: '',
  param: '',
  accessKeyId: '',
};

/** `kind` when a form can add it, else null (e.g. ssh_key, or a kind the agent made up). */
export function formCredentialKind(kind: string | null): FormCredentialKind | null {
  return formCredentialKinds.find((k) => k.kind === kind)?.kind ?? null;
}

/**
 * An aws_sigv4 credential's secret as the vault takes it (docs/vault.md): `ACCESS_KEY_ID:SECRET_ACCESS_KEY`, then
 * `:SESSION_TOKEN` only when one was typed.
 */
export function awsSigV4Secret(accessKeyId: string, secretAccessKey: string, sessionToken: string): string {
  const token = sessionToken.trim();
  return `${accessKeyId.trim()}:${secretAccessKey}${token === '' ? '' : `:${token}`}`;
}

/** The credentials.add input: only the options the chosen kind takes, an empty template left to the broker's default. */
export function credentialInput(draft: CredentialDraft, secret: string): NewCredential {
  const { kind, header, template, param } = draft;
  return {
    name: draft.name.trim(),
    kind,
    secret,
    bindings: parseBindings(draft.bindings),
    ...(kind === 'header'
      ? { header: header.trim(), ...(template.trim() === '' ? {} : { template: template.trim() }) }
      : {}),
    ...(kind === 'query' ? { param: param.trim() } : {}),
  };
}
