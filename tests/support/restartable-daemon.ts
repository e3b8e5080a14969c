import type { BrokerApi, BrokerApiMethod } from '../../broker/contract/index.js';
import { DrillAgent } from './drill-agent.js';
import { decideAsPerson } from './person-decision.js';
import { startDaemon, type RunningDaemon } from './postern-process.js';

/**
 * A real daemon that a test stops and starts again between attacks: started locked (as after a reboot), one agent
 * connected, then unlocked by a person over the control socket (tests/support/person-decision.ts); the agent posts to
 * the `docs` route. The rig of tests/config-integrity.test.ts and tests/integrity-anchor.test.ts.
 */
export class RestartableDaemon {
  private daemon: RunningDaemon | undefined;
  private agent: DrillAgent | undefined;

  constructor(
    private readonly options: {
      readonly dataDir: string;
      readonly passphrase: string;
      readonly agentName: string;
      /** The path the agent's POSTs name on the `docs` route. */
      readonly docsPath: string;
      readonly env?: Record<string, string | undefined>;
    },
  ) {}

  /** A decision with a person's proof over the real control socket. */
  decide<M extends BrokerApiMethod>(method: M, input: BrokerApi[M]['input']): Promise<BrokerApi[M]['output']> {
    return decideAsPerson(this.options.dataDir, this.options.passphrase, method, input);
  }

  async startAndUnlock(): Promise<void> {
    this.daemon = await startDaemon(
      this.options.dataDir,
      this.options.env === undefined ? {} : { env: this.options.env },
    );
    this.agent = await DrillAgent.start(this.options.dataDir, this.options.agentName);
    await this.decide('vault.unlock', { passphrase: this.options.passphrase });
  }

  async stop(): Promise<void> {
    await this.agent?.stop();
    await this.daemon?.process.stop('SIGTERM');
    this.agent = undefined;
    this.daemon = undefined;
  }

  /** The agent's POST to the `docs` route, its reply as the agent reads it. */
  send(marker: string): ReturnType<DrillAgent['call']>['reply'] {
    if (this.agent === undefined) throw new Error('send before startAndUnlock');
    return this.agent.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: this.options.docsPath,
      body: JSON.stringify({ marker }),
      timeout_ms: 30_000,
    }).reply;
  }
}
