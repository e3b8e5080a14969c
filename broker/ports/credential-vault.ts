/**
 * The vault as the rest of the broker sees it (implemented by broker/vault). Names, kinds, version
 * tags and bindings are not secret and are readable while locked; secret material is handed out
 * only inside `withSecret`, only while unlocked, and must not outlive that call.
 */
export type VaultState = 'uninitialized' | 'locked' | 'unlocked';

export const credentialKinds = ['bearer', 'header', 'basic', 'query', 'ssh_key', 'aws_sigv4', 'oauth2_client'] as const;
export type CredentialKind = (typeof credentialKinds)[number];

export interface CredentialInfo {
  /** Stable id (`cred_…`), never reused; journaled instead of the name where a name could be sensitive. */
  readonly id: string;
  readonly name: string;
  readonly kind: CredentialKind;
  /** Non-secret tag that changes on every rotation (journaled as CREDENTIAL_AUTHORIZED.version_tag). */
  readonly version_tag: string;
  /** Hosts (or route/host-entry names) this credential may be sent to. */
  readonly bindings: readonly string[];
  /** kind header: the header name; kind query: the parameter name. */
  readonly header?: string;
  readonly param?: string;
  /** kind header: a template containing `{secret}`. */
  readonly template?: string;
}

/** Secret material for one use. Strings for HTTP injection; a Buffer for an SSH private key. */
export type SecretMaterial =
  | { readonly kind: 'bearer'; readonly token: string }
  /** `value` is what is injected (the template rendered); `secret` is the bare vault secret inside it. */
  | { readonly kind: 'header'; readonly header: string; readonly value: string; readonly secret: string }
  | { readonly kind: 'basic'; readonly user: string; readonly password: string }
  | { readonly kind: 'query'; readonly param: string; readonly value: string }
  | { readonly kind: 'ssh_key'; readonly privateKey: Buffer }
  /** AWS Signature V4: the key pair signs each final request; the session token (if any) is sent as a header. */
  | {
      readonly kind: 'aws_sigv4';
      readonly accessKeyId: string;
      readonly secretAccessKey: string;
      readonly sessionToken: string | undefined;
    }
  /** OAuth2 client credentials: sent only to the route's token endpoint; the route's requests carry the access token. */
  | { readonly kind: 'oauth2_client'; readonly clientId: string; readonly clientSecret: string };

export interface CredentialVault {
  state(): VaultState;
  list(): readonly CredentialInfo[];
  describe(name: string): CredentialInfo | undefined;
  /**
   * Runs `use` with the decrypted secret. Throws CodedError VAULT_LOCKED (locked or uninitialized),
   * UNKNOWN_CREDENTIAL (no such name; the message never echoes it) or CREDENTIAL_MISSING.
   */
  withSecret<T>(name: string, use: (secret: SecretMaterial, info: CredentialInfo) => Promise<T> | T): Promise<T>;
  /**
   * Seals bytes under the vault's data key for another part of the broker (e.g. the audit signing
   * key), with `purpose` as associated data. Needs unlock (VAULT_LOCKED otherwise).
   */
  wrap(purpose: string, plaintext: Uint8Array): Uint8Array;
  unwrap(purpose: string, sealed: Uint8Array): Uint8Array;
  /** Called with the reason whenever the vault locks (operator, idle timeout, shutdown). */
  onLock(listener: (reason: string) => void): () => void;
  /** Called after every successful unlock. */
  onUnlock(listener: () => void): () => void;
}
