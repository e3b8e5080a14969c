import { startBoundConfigSettings, type StartBoundConfigSetting } from '../contract/config-constants.js';
import { vaultAutoLockMinutesDefault, type PosternConfig } from '../config/index.js';

/**
 * The configuration in force, as every part of the running broker reads it. Its properties are getters over one
 * snapshot, and `apply` replaces that snapshot in one assignment: a reader sees the old configuration or the new one,
 * never a mix of the two within a synchronous step. An action reads its route or host once at admission and carries
 * that object to dispatch (execute-http-action.ts, execute-ssh-action.ts), so a change never reaches an action already
 * admitted; the next admission reads the new one.
 */
export interface LiveConfig extends PosternConfig {
  /**
   * A configuration a person accepted is now in force. Settings read only at start keep their start values (the
   * vault's idle timer, the result purge, the UI's port): they are named in `restart_needed_for` when `next` changes
   * them, and take effect at the next start.
   */
  apply(next: PosternConfig): { restart_needed_for: StartBoundConfigSetting[] };
  /** The start-bound settings the last applied configuration changed (empty after a start, or with none changed). */
  restartNeededFor(): StartBoundConfigSetting[];
}

export function createLiveConfig(initial: PosternConfig): LiveConfig {
  const started = startBoundValues(initial);
  let current = initial;
  let waiting: StartBoundConfigSetting[] = [];
  return {
    get version() {
      return current.version;
    },
    get routes() {
      return current.routes;
    },
    get sshHosts() {
      return current.sshHosts;
    },
    get mcpServers() {
      return current.mcpServers;
    },
    get agents() {
      return current.agents;
    },
    get results() {
      return current.results;
    },
    get operator() {
      return current.operator;
    },
    get vault() {
      return current.vault;
    },
    get file() {
      return current.file;
    },
    apply(next) {
      const wanted = startBoundValues(next);
      waiting = startBoundConfigSettings.filter((setting) => wanted[setting] !== started[setting]);
      // `results` is also read per fetch (agent-backend): it stays at the value the purge runs with, so a result is
      // never promised longer than it is kept. `vault` is read only at start; `operator.port` only by the host at start.
      current = { ...next, results: initial.results, vault: initial.vault };
      return { restart_needed_for: [...waiting] };
    },
    restartNeededFor: () => [...waiting],
  };
}

/** The values a running broker took at start and keeps (undefined: absent, the default applies). */
function startBoundValues(config: PosternConfig): Record<StartBoundConfigSetting, number | undefined> {
  return {
    'agents.credential_request_ttl_s': config.agents.credential_request_ttl_s,
    'vault.auto_lock_minutes': config.vault?.auto_lock_minutes ?? vaultAutoLockMinutesDefault,
    'results.retention_seconds': config.results.retention_seconds,
    'operator.port': config.operator?.port,
  };
}
