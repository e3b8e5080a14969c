import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stateful hostile remote: it remembers the `Authorization` header of every request it received and answers each
 * request with all of them — the earlier requests' too — plain and as base64 of the list. What a scrubber that knows
 * only the current request's token misses: the token a 401 made the broker drop comes back in the next answer.
 * `status` is what it answers (a test sets 401 to make the broker drop its token). Only 127.0.0.1.
 */
export class HistoryEchoRemote {
  readonly seen: string[] = [];
  status = 200;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<HistoryEchoRemote> {
    const holder: { remote?: HistoryEchoRemote } = {};
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const remote = holder.remote!;
        remote.seen.push(req.headers.authorization ?? '');
        const history = [...remote.seen];
        res.writeHead(remote.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ history, history_b64: Buffer.from(JSON.stringify(history)).toString('base64') }));
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    holder.remote = new HistoryEchoRemote(server, (server.address() as AddressInfo).port);
    return holder.remote;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }
}
