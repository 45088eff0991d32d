// A runner whose connection to PostgreSQL hangs: a TCP proxy stops forwarding without closing anything,
// with mediabatch's default timeouts. The proxy's own kernel still acknowledges every byte, as a hung
// pooler or a frozen server process does, so TCP's keepalives and tcp_user_timeout never fire. The
// runner's wait must end with one line: by its watchdog (statement_timeout 60 s plus 5 s; SIGKILL), or,
// when its session sat idle in a transaction, by the server ending that session after 10 s (the proxy
// then closes the runner's side: exit 4). A run started again on a direct connection while the proxy
// still hangs (another worker) must get the rows it held and finish with nothing sent twice.
// `npm run torture` only; test/postgres/timeouts.test.ts is its fast slice with short timeouts.
import { jobsByPrompt, startFleetStage, until } from '../helpers/fleet.js';
import { images } from '../helpers/run-env.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { type Guarantee, guarantee } from './guarantees.js';

const TASKS = 16;
/** How long the runner may wait on the hung connection before the check gives up on it. */
const PATIENCE_MS = 90_000;

export async function hungConnection(): Promise<{ waitedMs: number; code: string; guarantees: Guarantee[] }> {
  const stage = await startFleetStage(['--speed', '0.02', '--latency', '10']);
  const proxy = await startTcpProxy({ port: stage.pg.port });
  try {
    const direct = stage.database();
    const state = proxy.through(direct);
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
    // The proxy still hangs: another worker, on its own connection, carries the run on.
    const again = stage.spawn(direct, ['run', file, '--yes']);
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
          `a runner on a hung connection ends its wait with one line (gave it ${PATIENCE_MS / 1000} s)`,
          lines.length === 1 &&
            ((code === 'SIGKILL' && /did not answer for 65 s/.test(lines[0] ?? '')) ||
              (code === 4 &&
                /went away|cannot be reached|does not take connections yet/.test(lines[0] ?? ''))),
          `${code} after ${waitedMs} ms: ${lines.join(' | ')}`,
        ),
        guarantee(
          'its run, started again by another worker while the proxy still hangs, finishes with nothing sent twice',
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
