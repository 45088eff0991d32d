// A runner whose connection to PostgreSQL hangs: a TCP proxy stops forwarding without closing anything,
// and the URL's query shortens the TCP timeouts (keepalives every second, tcp_user_timeout 2 s). The
// runner must end its wait with one line and exit 4, and a run started again once the connection is
// back must finish with nothing sent twice. The proxy's own kernel still acknowledges every byte, as a
// hung pooler or a frozen server process does; a network that loses packets would be ended by the TCP
// timeouts, which this machine cannot show (no packet filter). `npm run torture` only.
import { jobsByPrompt, startFleetStage, until } from '../helpers/fleet.js';
import { images } from '../helpers/run-env.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { type Guarantee, guarantee } from './guarantees.js';

const TASKS = 16;
/** How long the runner may wait on the hung connection before the check gives up on it. */
const PATIENCE_MS = 20_000;

export async function hungConnection(): Promise<{ waitedMs: number; code: string; guarantees: Guarantee[] }> {
  const stage = await startFleetStage(['--speed', '0.02', '--latency', '10']);
  const proxy = await startTcpProxy({ port: stage.pg.port });
  try {
    const direct = stage.database();
    const timeouts = 'keepalives_idle=1&keepalives_interval=1&keepalives_count=2&tcp_user_timeout=2000';
    const state = `${proxy.through(direct)}&${timeouts}`;
    const file = await stage.manifest('hung.yaml', { name: 'pghung', tasks: images(TASKS, 'hung') });
    const first = stage.spawn(state, ['run', file, '--yes']);
    await until(async () => (await stage.sandbox()).jobs.length >= 4, 60_000);
    proxy.drop();
    const dropped = Date.now();
    const code = await Promise.race([
      first.exited,
      new Promise<string>((r) => setTimeout(() => r('still waiting'), PATIENCE_MS)),
    ]);
    const waitedMs = Date.now() - dropped;
    const lines = first.stderr().trim().split('\n');
    if (code === 'still waiting') first.proc.kill('SIGKILL');
    await first.exited;
    proxy.cut();
    proxy.pass();
    const again = stage.spawn(state, ['run', file, '--yes']);
    const againCode = await again.exited;
    const twice = [...jobsByPrompt(await stage.sandbox())]
      .filter(([, jobs]) => jobs.length > 1)
      .map(([p]) => p);
    const counts = stage.read(direct, (store) => store.tasks.countTasksByState('pghung'));
    return {
      waitedMs,
      code: String(code),
      guarantees: [
        guarantee(
          `a runner on a hung connection ends its wait (tcp_user_timeout 2 s; gave it ${PATIENCE_MS / 1000} s)`,
          code === 4,
          `${code} after ${waitedMs} ms: ${lines.slice(-1).join('')}`,
        ),
        guarantee(
          'its run, started again, finishes with nothing sent twice',
          twice.length === 0 && [0, 2].includes(Number(againCode)),
          `${againCode}; twice: ${twice.join(', ') || 'none'}; ${counts.done} done, ${counts.in_doubt} in doubt`,
        ),
      ],
    };
  } finally {
    await proxy.close();
    await stage.close();
  }
}
