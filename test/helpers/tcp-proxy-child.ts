// The TCP proxy of tcp-proxy.ts in a process of its own, driven by lines on stdin (`pass`, `drop`, `cut`,
// `hole <ms>` (drop, then cut and pass after ms), `cutafter <hex>`, `counts`), each answered by one line on stdout. A test process that talks to PostgreSQL synchronously
// (mediabatch's client blocks its event loop while a statement waits) must not host the proxy another
// process's connection goes through: the proxy would stop with it, and both would wait on each other.
import { createInterface } from 'node:readline';
import { startTcpProxy } from './tcp-proxy.js';

const port = Number(process.argv[2]);
const proxy = await startTcpProxy({ port });
process.stdout.write(`${proxy.port}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  const command = line.trim();
  if (command === 'pass') proxy.pass();
  else if (command === 'drop') proxy.drop();
  else if (command === 'cut') proxy.cut();
  else if (command.startsWith('cutafter ')) proxy.cutAfter(Buffer.from(command.slice(9), 'hex'));
  else if (command.startsWith('hole ')) {
    // Timed here, not by the test, whose event loop may be blocked on the database meanwhile.
    proxy.drop();
    setTimeout(
      () => {
        proxy.cut();
        proxy.pass();
      },
      Number(command.slice(5)),
    );
  }
  if (command === 'counts') process.stdout.write(`${JSON.stringify(proxy.counts())}\n`);
  else process.stdout.write(`ok ${command}\n`);
}
await proxy.close();
