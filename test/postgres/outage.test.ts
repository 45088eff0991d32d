// One runner on a PostgreSQL state when the database goes away mid-run: the server stopped for a few
// seconds (pg_ctl stop -m immediate on its data folder, then started again on the same port), or the
// runner's connection cut by a TCP proxy. The runner stops with one line naming the database (never its
// password) and exit 4 (run again to go on); nothing is charged twice; `run` again finishes the run and
// books every charge, or reports the tasks in doubt. The runner is a child process: its synchronous
// client blocked on a dead connection must not stall the sandbox, the proxy or the test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Child } from '../helpers/child.js';
import { type FleetStage, jobsByPrompt, sandboxNet, startFleetStage, until } from '../helpers/fleet.js';
import { images } from '../helpers/run-env.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

const PASSWORD = 'pw-SENTINEL-0ut4ge';
/** How long the server stays down; `npm run torture` holds it for 10 s. */
const PAUSE_MS = 3000;
const TASKS = 16;

let stage: FleetStage;
beforeAll(async () => {
  // Jobs take a few hundred milliseconds, so the run is mid-flight when the database goes.
  stage = await startFleetStage(['--speed', '0.02', '--latency', '10']);
});
afterAll(async () => {
  await stage?.close();
});

/** Accepted jobs whose prompt starts with `prefix` (each test has its own tasks in the one sandbox). */
async function accepted(prefix: string): Promise<number> {
  return [...jobsByPrompt(await stage.sandbox()).keys()].filter((p) => p.startsWith(prefix)).length;
}

/**
 * mediabatch's own lines on stderr. libpq itself prints the server's notice of an immediate shutdown
 * ("WARNING:  terminating connection due to immediate shutdown command") from C, where mediabatch
 * cannot catch it; it is not ours and is left out.
 */
function ownLines(child: Child): string[] {
  return child
    .stderr()
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('WARNING:  terminating connection'));
}

/** The run again until it ends by itself; then its books against the sandbox's. */
async function resumeAndCheck(state: string, file: string, name: string, prefix: string, direct = state) {
  const again = stage.spawn(state, ['run', file, '--yes']);
  const code = await again.exited;
  expect([0, 2], again.stderr()).toContain(code);
  const books = await stage.sandbox();
  const mine = [...jobsByPrompt(books)].filter(([p]) => p.startsWith(prefix));
  // Every task sent once at most, whatever moment the database went away at.
  for (const [prompt, jobs] of mine) expect(jobs.length, prompt).toBe(1);
  // Read on a direct connection: this process's own client would block the proxy it goes through.
  const { counts, net } = stage.read(direct, (store) => ({
    counts: store.tasks.countTasksByState(name),
    net: store.ledger.runSpent(name).net,
  }));
  expect(counts.done + counts.in_doubt).toBe(TASKS);
  const own = { ...books, jobs: mine.flatMap(([, jobs]) => jobs) };
  // What the ledger lacks is exactly what tasks in doubt were charged (their answers were never recorded).
  const inDoubt = counts.in_doubt;
  if (inDoubt === 0) {
    expect(code).toBe(0);
    expect(Math.round(net * 1e6)).toBe(sandboxNet(own));
  } else {
    expect(code).toBe(2);
    expect(again.stdout()).toMatch(/in doubt/);
    expect(Math.round(net * 1e6)).toBeLessThanOrEqual(sandboxNet(own));
  }
  return { again, counts };
}

describe('a runner on PostgreSQL when the database goes away', () => {
  it('PostgreSQL stopped mid-run: one line naming the database, exit 4, nothing sent twice; run again finishes', async () => {
    const state = stage.database().replace('postgres@', `postgres:${PASSWORD}@`);
    const file = await stage.manifest('stop.yaml', { name: 'pgstop', tasks: images(TASKS, 'stop') });
    const first = stage.spawn(state, ['run', file, '--yes']);
    await until(async () => (await accepted('stop')) >= 4, 60_000);
    const stoppedAt = Date.now();
    stage.pg.pause();
    try {
      // It gives up on its own (the connection refused at once when the server is down).
      expect(await first.exited).toBe(4);
      const sentAfter = await accepted('stop');
      await new Promise((r) => setTimeout(r, 1000));
      expect(await accepted('stop'), 'nothing submitted once the runner gave up').toBe(sentAfter);
    } finally {
      await new Promise((r) => setTimeout(r, Math.max(0, PAUSE_MS - (Date.now() - stoppedAt))));
      stage.pg.resume();
    }
    const lines = ownLines(first);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^mediabatch: the PostgreSQL state at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/t\d+_\d+ (went away|cannot be reached|does not take connections yet): \S.*; run again to continue( once it is back)?$/,
    );
    // libpq's sentences keep their stops on one line ("Connection refused. Is the server running …").
    expect(lines[0]).not.toMatch(/[a-z] (Is|This) /);
    // It could not write why it stopped to a database that was gone: status says its worker was lost,
    // what to do, and the command that continues it.
    const status = stage.spawn(state, ['status', 'pgstop']);
    expect(await status.exited, status.stderr()).toBe(0);
    expect(status.stdout()).toContain(
      '  Stopped (its process or workers lost): the process driving it (or every worker of it) ended without closing it: killed, crashed, or its PostgreSQL state went away; run it again to continue\n',
    );
    expect(status.stdout()).toMatch(
      /task\(s\) unfinished: `mediabatch run stop\.yaml --run-id pgstop --state 'postgres:\/\/postgres@127\.0\.0\.1:\d+\/t\d+_\d+\?[^']*'` continues the run\./,
    );
    const { again } = await resumeAndCheck(state, file, 'pgstop', 'stop');
    for (const out of [first.stdout(), first.stderr(), status.stdout(), again.stdout(), again.stderr()]) {
      expect(out).not.toContain(PASSWORD);
    }
  }, 120_000);

  it('its connection reset mid-run (a TCP proxy cuts it; the server is reachable at once): one line, exit 4; run again finishes', async () => {
    const proxy = await startTcpProxy({ port: stage.pg.port });
    try {
      const direct = stage.database();
      const state = `${proxy.through(direct)}&connect_timeout=3`;
      const file = await stage.manifest('cut.yaml', { name: 'pgcut', tasks: images(TASKS, 'cut') });
      const first = stage.spawn(state, ['run', file, '--yes']);
      await until(async () => (await accepted('cut')) >= 4, 60_000);
      // Every connection reset while the runner is busy: a transaction cut in the middle must end the
      // run, never go on over a new connection outside any transaction (half of it would commit).
      while (first.proc.exitCode === null && (await accepted('cut')) < TASKS) {
        proxy.cut();
        await new Promise((r) => setTimeout(r, 100));
      }
      const code = await first.exited;
      const lines = ownLines(first);
      if (code !== 0) {
        expect(code).toBe(4);
        // The report is written from the state too: when it cannot be, the run says so and how to write
        // it later, a line of its own before the reason.
        const own = lines.filter(
          (l) => !l.startsWith('warning: the report could not be written (the PostgreSQL state'),
        );
        expect(own, first.stderr()).toHaveLength(1);
        lines.splice(0, lines.length, ...own);
        expect(lines[0]).toMatch(
          /^mediabatch: the PostgreSQL state at postgres:\/\/postgres@127\.0\.0\.1:\d+\/t\d+_\d+ (went away|cannot be reached|does not take connections yet)\b.*$/,
        );
      }
      await resumeAndCheck(state, file, 'pgcut', 'cut', direct);
    } finally {
      await proxy.close();
    }
  }, 120_000);
});
