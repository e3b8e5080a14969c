import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A scripted remote for the retry engine's tests (issue 7): one of the three idempotency
 * behaviours DESIGN §6 names, counting its real effects.
 *  - `honours`: a repeated key returns the first result and applies nothing;
 *  - `ignores`: every request applies its effect, key or not;
 *  - `rejects_changed`: a repeated key with the same body returns the first result, with a changed
 *    body answers 422 and applies nothing.
 * `loseResponses` makes the next N effect-applying requests lose their response after the effect
 * (the socket is destroyed before a status line is written): the broker sees a dispatched request
 * and no answer. `hangResponses` / `hangLookups` hold the next N effect-applying requests / lookups
 * open without an answer (after the effect), so a test can kill the broker mid-wait. A lookup at GET <base>/operations/<key> answers 200 with the stored result when the
 * key was applied (honours, rejects_changed), else 404. Only 127.0.0.1.
 */
export type IdempotencyBehaviour = 'honours' | 'ignores' | 'rejects_changed';

export interface TargetRequest {
  readonly method: string;
  readonly path: string;
  readonly key: string | undefined;
  readonly body: string;
}

export class IdempotencyTarget {
  /** Every effect actually applied, in order (`<method> <path> <body>`). */
  readonly effects: string[] = [];
  /** Every request that arrived, lookups included. */
  readonly requests: TargetRequest[] = [];
  /** Responses still to lose after applying the effect. */
  loseResponses: number;
  /** Effect-applying requests still to hold open (after the effect) without an answer. */
  hangResponses = 0;
  /** Lookups still to hold open without an answer. */
  hangLookups = 0;
  private readonly byKey = new Map<string, { body: string; status: number; response: string }>();

  private constructor(
    private readonly server: Server,
    readonly behaviour: IdempotencyBehaviour,
    loseResponses: number,
  ) {
    this.loseResponses = loseResponses;
  }

  static async start(
    behaviour: IdempotencyBehaviour,
    options: { loseResponses?: number; hangResponses?: number; hangLookups?: number } = {},
  ): Promise<IdempotencyTarget> {
    const handlers: { handle?: (req: IncomingMessage, res: ServerResponse) => void } = {};
    const server = createServer((req, res) => handlers.handle?.(req, res));
    const target = new IdempotencyTarget(server, behaviour, options.loseResponses ?? 0);
    handlers.handle = (req, res) => target.handle(req, res);
    target.hangResponses = options.hangResponses ?? 0;
    target.hangLookups = options.hangLookups ?? 0;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return target;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Real effects for one body (how many times the remote state changed because of it). */
  effectsOf(body: string): number {
    return this.effects.filter((e) => e.endsWith(` ${body}`)).length;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const key = typeof req.headers['idempotency-key'] === 'string' ? req.headers['idempotency-key'] : undefined;
      const path = req.url ?? '/';
      this.requests.push({ method: req.method ?? '', path, key, body });
      const lookup = /\/operations\/([^/?]+)$/.exec(path);
      if (req.method === 'GET' && lookup !== null) {
        if (this.hangLookups > 0) {
          this.hangLookups -= 1;
          return;
        }
        const stored = this.behaviour === 'ignores' ? undefined : this.byKey.get(decodeURIComponent(lookup[1] ?? ''));
        this.answer(res, stored === undefined ? 404 : 200, stored === undefined ? '{"found":false}' : stored.response);
        return;
      }
      const seen = key === undefined || this.behaviour === 'ignores' ? undefined : this.byKey.get(key);
      if (seen !== undefined) {
        if (seen.body === body) this.answer(res, seen.status, seen.response);
        else if (this.behaviour === 'rejects_changed')
          this.answer(res, 422, '{"error":"idempotency key reused with a different payload"}');
        else this.answer(res, seen.status, seen.response);
        return;
      }
      const n = this.effects.push(`${req.method ?? ''} ${path} ${body}`);
      const response = JSON.stringify({ id: `obj-${n}`, applied: n });
      if (key !== undefined) this.byKey.set(key, { body, status: 201, response });
      if (this.hangResponses > 0) {
        this.hangResponses -= 1;
        return;
      }
      if (this.loseResponses > 0) {
        this.loseResponses -= 1;
        req.socket.destroy();
        return;
      }
      this.answer(res, 201, response);
    });
  }

  private answer(res: ServerResponse, status: number, body: string): void {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }
}
