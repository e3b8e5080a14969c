import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { systemClock } from '../../broker/ports/index.js';
import { openVault } from '../../broker/vault/index.js';
import { acceptConfigAsPerson } from './accepted-config.js';

/** One HTTP route of postern.yaml: bearer injection, POST only unless `methods` says otherwise, to 127.0.0.1. */
export interface RouteYaml {
  /** Default `docs`. */
  name?: string;
  port: number;
  /** The vault credential it injects; default `docs-token`. */
  credential?: string;
  approval: 'none' | 'per_call';
  /** The methods it allows; default `[POST]`, `all` writes no `methods:` line (every method). */
  methods?: readonly string[] | 'all';
  /** More lines of the route, indented as its fields (`    lanes: …`, `    idempotency: …`). */
  lines?: readonly string[];
}

/**
 * postern.yaml with sessions approved by observe policy and the given top-level `sections` (lines, e.g. an
 * `ssh_hosts:` list); `unattended` adds the CI opt-out (`operator: unattended_decisions: true`) that lets a process
 * with no terminal make decisions.
 */
export function observeYaml(sections: readonly string[], options: { unattended?: boolean } = {}): string {
  return [
    'version: 1',
    ...(options.unattended === true ? ['operator:', '  unattended_decisions: true'] : []),
    'agents:',
    '  session_approval: observe',
    ...sections,
    '',
  ].join('\n');
}

/** observeYaml with the given routes (and `options` as there). */
export function routesYaml(routes: readonly RouteYaml[], options: { unattended?: boolean } = {}): string {
  return observeYaml(
    [
      'routes:',
      ...routes.flatMap((route) => [
        `  - name: ${route.name ?? 'docs'}`,
        `    base_url: http://127.0.0.1:${route.port}`,
        `    credential: ${route.credential ?? 'docs-token'}`,
        '    injection: bearer',
        `    approval: ${route.approval}`,
        ...(route.methods === 'all' ? [] : [`    methods: [${(route.methods ?? ['POST']).join(', ')}]`]),
        ...(route.lines ?? []),
      ]),
    ],
    options,
  );
}

/** A credential as the vault holds it: a bearer token (a test canary) unless `kind` says `ssh_key` (a private key). */
export interface VaultCredential {
  name: string;
  /** Default `bearer`. */
  kind?: 'bearer' | 'ssh_key';
  secret: string | Buffer;
  bindings: readonly string[];
}

/**
 * A data directory as `postern init` and a person leave it before a daemon starts: the directory (0700), a vault (fast
 * KDF, test only) sealed with `passphrase` holding one credential, and postern.yaml.
 *
 * With `acceptWith` (a passphrase file's path) the passphrase is written there (0600, what
 * POSTERN_PASSPHRASE_FILE reads) and postern.yaml is accepted as a person accepts it once
 * (tests/support/accepted-config.ts). Without it there is no accepted copy: the first start, with credentials in the
 * vault, refuses every route until a person accepts the file (docs/config.md) — what the config tests exercise.
 */
export async function createDataDir(options: {
  dataDir: string;
  passphrase: string;
  credential: VaultCredential;
  yaml: string;
  acceptWith?: string;
}): Promise<void> {
  const { dataDir, passphrase, credential } = options;
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({
    name: credential.name,
    kind: credential.kind ?? 'bearer',
    secret: Buffer.from(credential.secret),
    bindings: [...credential.bindings],
  });
  await vault.close();
  writeFileSync(path.join(dataDir, 'postern.yaml'), options.yaml);
  if (options.acceptWith === undefined) return;
  writeFileSync(options.acceptWith, `${passphrase}\n`, { mode: 0o600 });
  await acceptConfigAsPerson(dataDir, options.acceptWith);
}
