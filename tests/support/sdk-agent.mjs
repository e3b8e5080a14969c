// One agent process that uses Postern's own TypeScript SDK (connectPostern) straight on the agent
// socket, no shim: the session is this process (pid + start time), so it outlives a broker restart
// and the same session can reconnect and read its results. Driven over Node IPC by
// tests/support/sdk-agent.ts: {connect: id} → {result: {id, value}}, {call: {id, method, args}} →
// {result: {id, value} | {id, error: {name, code, message, envelope}}}, {exit: true}.
import { register } from 'tsx/esm/api';

register();
const { connectPostern } = await import('../../broker/sdk/index.ts');
const [dataDir, name] = process.argv.slice(2);
let client;

const answer = (id, work) =>
  work.then(
    (value) => process.send?.({ result: { id, value: value ?? null } }),
    (error) =>
      process.send?.({
        result: {
          id,
          error: {
            name: String(error?.name ?? 'Error'),
            code: error?.code ?? null,
            message: String(error?.message ?? error),
            envelope: error?.envelope ?? null,
          },
        },
      }),
  );

process.on('message', (message) => {
  if (message.exit === true) {
    void Promise.resolve(client?.close())
      .catch(() => undefined)
      .finally(() => process.exit(0));
    return;
  }
  if (message.connect !== undefined) {
    answer(
      message.connect,
      (async () => {
        const previous = client;
        client = undefined;
        await Promise.resolve(previous?.close()).catch(() => undefined);
        client = await connectPostern({ dataDir, clientName: name ?? 'sdk-agent' });
        return { pid: process.pid };
      })(),
    );
    return;
  }
  if (message.call !== undefined) {
    const { id, method, args } = message.call;
    answer(id, client === undefined ? Promise.reject(new Error('not connected')) : client[method](...args));
  }
});
process.on('disconnect', () => process.exit(0));
process.send?.({ ready: true, pid: process.pid });
