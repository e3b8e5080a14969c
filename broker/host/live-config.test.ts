import { describe, expect, it } from 'vitest';
import { parseConfig, type PosternConfig } from '../config/index.js';
import { createLiveConfig } from './live-config.js';

/** The live configuration holder with configurations parsed by the real loader (no hand-built shapes). */
const file = '/tmp/postern-live-config-test.yaml';
interface Options {
  baseUrl?: string;
  approval?: string;
  retention?: number;
  autoLock?: number;
  port?: number;
  observe?: boolean;
}
const config = (options: Options = {}): PosternConfig =>
  parseConfig(
    [
      'version: 1',
      ...(options.port === undefined ? [] : ['operator:', `  port: ${options.port}`]),
      ...(options.autoLock === undefined ? [] : ['vault:', `  auto_lock_minutes: ${options.autoLock}`]),
      ...(options.retention === undefined ? [] : ['results:', `  retention_seconds: ${options.retention}`]),
      ...(options.observe === true ? ['agents:', '  session_approval: observe'] : []),
      'routes:',
      '  - name: docs',
      `    base_url: ${options.baseUrl ?? 'http://127.0.0.1:1111'}`,
      '    credential: docs-token',
      '    injection: bearer',
      `    approval: ${options.approval ?? 'per_call'}`,
      '',
    ].join('\n'),
    file,
  );

describe('when a configuration is applied to the live holder', () => {
  it('every property read after apply sees the new configuration; a route taken before keeps the old one', () => {
    const live = createLiveConfig(config());
    const admitted = live.routes.get('docs');
    expect(live.restartNeededFor()).toEqual([]);

    const answer = live.apply(config({ baseUrl: 'http://127.0.0.1:2222', approval: 'none', observe: true }));
    expect(answer).toEqual({ restart_needed_for: [] });
    expect(live.routes.get('docs')).toMatchObject({ base_url: 'http://127.0.0.1:2222', approval: 'none' });
    expect(live.agents.session_approval).toBe('observe');
    expect(live.file).toBe(file);
    // What an action read at admission is its own object: the swap never reaches into it.
    expect(admitted).toMatchObject({ base_url: 'http://127.0.0.1:1111', approval: 'per_call' });
  });

  it('reads through the PosternConfig shape (getters), so a holder passed where a config goes is live everywhere', () => {
    const live = createLiveConfig(config());
    const asConfig: PosternConfig = live;
    const readRoute = (c: PosternConfig): string | undefined => c.routes.get('docs')?.base_url;
    expect(readRoute(asConfig)).toBe('http://127.0.0.1:1111');
    live.apply(config({ baseUrl: 'http://127.0.0.1:3333' }));
    expect(readRoute(asConfig)).toBe('http://127.0.0.1:3333');
  });

  it.each([
    ['results.retention_seconds', { retention: 120 }],
    ['vault.auto_lock_minutes', { autoLock: 0 }],
    ['operator.port', { port: 7777 }],
  ] as const)('a changed %s is named as waiting for a restart, and the running value stays', (setting, changed) => {
    const started = config();
    const live = createLiveConfig(started);
    const answer = live.apply(config({ ...changed, approval: 'none' }));
    expect(answer.restart_needed_for).toEqual([setting]);
    expect(live.restartNeededFor()).toEqual([setting]);
    // The rest of the change is live.
    expect(live.routes.get('docs')?.approval).toBe('none');
    // Results and the vault keep what the purge and the idle timer run with.
    expect(live.results).toEqual(started.results);
    expect(live.vault).toEqual(started.vault);
  });

  it('applying the start values again clears what waited for a restart', () => {
    const live = createLiveConfig(config());
    expect(live.apply(config({ retention: 120, autoLock: 5, port: 7777 })).restart_needed_for).toEqual([
      'vault.auto_lock_minutes',
      'results.retention_seconds',
      'operator.port',
    ]);
    expect(live.apply(config()).restart_needed_for).toEqual([]);
    expect(live.restartNeededFor()).toEqual([]);
  });
});
