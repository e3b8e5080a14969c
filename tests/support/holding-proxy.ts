import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A response the proxy got from the target and has not passed on (yet). */
export interface HeldResponse {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly body: string;
}

/**
 * A loopback HTTP proxy in front of a test target (broker/testing/idempotency-target.ts) that can
 * hold a response the target already gave: the request reached the target (its effect, if any, is
 * applied and counted there), the answer never reaches the broker, the broker's connection stays
 * open. That is "a retry in flight", for any of the three idempotency behaviours — the target's own
 * `hangResponses` holds only effect-applying requests, and a same-key retry at an honouring target
 * applies none. A response the target lost (socket destroyed) is lost here too. Only 127.0.0.1.
 */
export class HoldingProxy {
  /** Responses still to hold: the next N answers the target gives are kept, not passed on. */
  holdNext = 0;
  readonly held: HeldResponse[] = [];
  private readonly waiting: Array<{ res: ServerResponse; held: HeldResponse; headers: Record<string, string> }> = [];

  private constructor(
    private readonly server: Server,
    private readonly targetPort: number,
  ) {}

  static async start(targetPort: number): Promise<HoldingProxy> {
    const server = createServer();
    const proxy = new HoldingProxy(server, targetPort);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => proxy.forward(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Passes every held response on, in the order they were held. */
  release(): void {
    for (const w of this.waiting.splice(0)) {
      w.res.writeHead(w.held.status, w.headers);
      w.res.end(w.held.body);
    }
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = { ...req.headers, host: `127.0.0.1:${this.targetPort}`, connection: 'close' };
      const upstream = request(
        { host: '127.0.0.1', port: this.targetPort, method: req.method, path: req.url, headers, agent: false },
        (answer) => {
          const body: Buffer[] = [];
          answer.on('data', (c: Buffer) => body.push(c));
          answer.on('error', () => req.socket.destroy());
          answer.on('end', () => {
            const held: HeldResponse = {
              method: req.method ?? '',
              path: req.url ?? '/',
              status: answer.statusCode ?? 502,
              body: Buffer.concat(body).toString('utf8'),
            };
            const out: Record<string, string> = {
              'content-type': String(answer.headers['content-type'] ?? 'application/octet-stream'),
              'content-length': String(Buffer.byteLength(held.body)),
            };
            if (this.holdNext > 0) {
              this.holdNext -= 1;
              this.held.push(held);
              this.waiting.push({ res, held, headers: out });
              return;
            }
            res.writeHead(held.status, out);
            res.end(held.body);
          });
        },
      );
      // The target destroyed its socket (a lost response): the broker's connection goes the same way.
      upstream.on('error', () => req.socket.destroy());
      upstream.end(Buffer.concat(chunks));
    });
  }
}
