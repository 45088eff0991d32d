// Workers of one run on a PostgreSQL state, each its own `mediabatch run` process against one sandbox:
// the first plans and checks the run, later ones join; each task is sent once (the sandbox's POSTs),
// the money in the database is the sandbox's books, the last worker out closes the run. A worker killed
// with kill -9: its unsent claims go back to the queue, its task being sent is in doubt and never sent
// again, its jobs are finished by another worker. Two workers told of one job at the same moment: one task
// keeps it, the other is in doubt, one charge.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Store } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { type Child, spawnCli } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { type Postgres, startPostgres, until, withStoreAt } from '../helpers/postgres.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY, walk } from '../helpers/run-env.js';

// Worker processes start in seconds each on a loaded 2-core machine.
vi.setConfig({ testTimeout: 180_000 });

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let env: RunEnv;
let url: string;
const children: Child[] = [];
beforeEach(() => {
  url = pg.freshDatabase();
});
afterEach(async () => {
  for (const child of children.splice(0)) if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
  await env?.close();
});

function workerEnv(baseUrl = env.sandbox.baseUrl): Record<string, string> {
  return {
    MEDIABATCH_API_KEY: SANDBOX_KEY,
    MEDIABATCH_BASE_URL: baseUrl,
    MEDIABATCH_POLL_SCALE: FAST_POLLS,
  };
}

/** One worker: `mediabatch run` in its own process, on the test's database. */
function worker(file: string, extra: string[] = [], baseUrl?: string): Child {
  const child = spawnCli(['--state', url, 'run', file, '--yes', '--allow-local-output', ...extra], {
    cwd: env.dir,
    env: workerEnv(baseUrl),
  });
  children.push(child);
  return child;
}

const withStore = <T>(read: (store: Store) => T): T => withStoreAt(url, read);

/** How many POSTs the sandbox accepted per prompt: every task's prompt is its own. */
function jobsPerPrompt(): Map<string, number> {
  const per = new Map<string, number>();
  for (const job of env.state().jobs) {
    const prompt = String((job.request as { prompt?: unknown }).prompt);
    per.set(prompt, (per.get(prompt) ?? 0) + 1);
  }
  return per;
}

describe('workers of one run on a PostgreSQL state', () => {
  it('share the run: each task sent once, one preflight, the money the sandbox booked, closed once', async () => {
    env = await makeRunEnv({ balance: 1000, speed: 0.1, latencyMs: 30 });
    const file = await env.manifest({ name: 'fleet', concurrency: 2, budget: 100, tasks: images(30) });
    const first = worker(file);
    await until(
      () => withStore((store) => store.workers.list('fleet').length > 0),
      'the first worker to start working',
    );
    const second = worker(file);
    const third = worker(file);
    const codes = await Promise.all([first.exited, second.exited, third.exited]);
    expect(codes, `${first.stderr()}${second.stderr()}${third.stderr()}`).toEqual([0, 0, 0]);

    // One preflight: the balance was asked by the first worker only (and once more by the last one out).
    const joined = [second, third].map((w) => w.stdout());
    for (const out of joined) {
      expect(out).toMatch(
        /^Joined run fleet as a worker \([23] workers now, \d+@[^#]+#[0-9a-f]+\); the run was planned and checked by the worker that started it\.$/m,
      );
      expect(out).not.toContain('Submit ');
    }
    expect(first.stdout()).not.toContain('Joined run');
    // The balance was asked twice in all: by the first worker's preflight, and by the last one out.
    expect(env.state().requests.balance).toBe(2);

    const jobs = env.state().jobs;
    expect(jobs).toHaveLength(30);
    expect([...jobsPerPrompt().values()].every((n) => n === 1)).toBe(true);
    expect(env.state().requests.submit).toBe(30);
    const sandboxNet = jobs.reduce((n, j) => n + j.cost - j.refunded, 0);
    withStore((store) => {
      expect(store.tasks.countTasksByState('fleet').done).toBe(30);
      expect(store.ledger.runSpent('fleet').net).toBeCloseTo(sandboxNet, 9);
      expect(store.runs.getRun('fleet')?.state).toBe('finished');
      const workers = store.workers.list('fleet');
      expect(workers).toHaveLength(3);
      expect(workers.every((w) => w.stoppedAt !== undefined && !w.lost)).toBe(true);
      // The work was shared: each worker's POSTs are recorded with its attempts.
      expect(workers.reduce((n, w) => n + w.submitted, 0)).toBe(30);
      expect(workers.filter((w) => w.submitted > 0).length).toBeGreaterThanOrEqual(2);
    });
    // Exactly one worker wrote the report: the last one out.
    const reports = [first, second, third].filter((w) => /Report: .*report\.md/.test(w.stdout()));
    expect(reports).toHaveLength(1);
    expect((await walk(`${env.dir}/out/fleet`)).filter((f) => f.endsWith('.png'))).toHaveLength(30);
  });

  it('takes a killed worker’s work back: unsent claims re-queued, the one being sent in doubt, its jobs finished', async () => {
    // Requests take 0.8 s: the killed worker has a task being sent while its earlier jobs are running.
    env = await makeRunEnv({ balance: 1000, speed: 0.2, latencyMs: 800 });
    const file = await env.manifest({ name: 'kill', concurrency: 4, tasks: images(16) });
    const victim = worker(file);
    let atKill = { submitting: [] as string[], submitted: [] as string[] };
    await until(
      () =>
        withStore((store) => {
          const submitting = store.tasks.tasksByState('kill', ['submitting']).map((t) => t.taskId);
          const submitted = store.tasks.tasksByState('kill', ['submitted', 'running']).map((t) => t.taskId);
          // Sent less than 0.3 s ago: its answer is half a second away, so it is still being sent at the kill.
          const fresh = submitting.some((id) =>
            store.submissions.attemptsOf('kill', id).some((a) => Date.now() - a.sentAt.getTime() < 300),
          );
          atKill = { submitting, submitted };
          return fresh && submitted.length > 0;
        }),
      'a task being sent beside a running job',
    );
    victim.proc.kill('SIGKILL');
    expect(await victim.exited).toBe('SIGKILL');
    // Slow answers and jobs were for the moment of the kill; the rescuer's jobs need neither (its run took
    // 15 s at that pace). The victim's jobs keep the times they were given when sent.
    env.sandbox.configure({ latencyMs: 30, speed: 0.05 });
    const postsAtKill = env.state().requests.submit;
    // What the victim left, read after its death (an answer may have come in between).
    atKill = withStore((store) => ({
      submitting: store.tasks.tasksByState('kill', ['submitting']).map((t) => t.taskId),
      submitted: store.tasks.tasksByState('kill', ['submitted', 'running']).map((t) => t.taskId),
    }));
    expect(atKill.submitting.length).toBeGreaterThan(0);

    const rescuer = worker(file);
    const code = await rescuer.exited;
    expect(rescuer.stderr()).toMatch(/in doubt/);
    expect(code).toBe(2);

    withStore((store) => {
      const [lost, alive] = store.workers.list('kill');
      expect(lost?.lost).toBe(true);
      expect(alive?.lost).toBe(false);
      for (const id of atKill.submitting) {
        expect(store.tasks.getTask('kill', id)?.state).toBe('in_doubt');
        expect(store.submissions.attemptsOf('kill', id)).toHaveLength(1);
      }
      // The victim's jobs were watched and fetched by the rescuer.
      for (const id of atKill.submitted) expect(store.tasks.getTask('kill', id)?.state).toBe('done');
      const counts = store.tasks.countTasksByState('kill');
      expect(counts.done + counts.in_doubt).toBe(16);
      expect(counts.in_doubt).toBe(atKill.submitting.length);
      expect(store.runs.getRun('kill')?.state).toBe('finished');
    });
    const status = await cli(['--state', url, 'status', 'kill'], {
      env: workerEnv(),
      cwd: env.dir,
      now: () => new Date(),
    });
    expect(status.stdout).toContain('Workers: 0 working, 1 lost, 2 in all');
    expect(status.stdout).toMatch(new RegExp(`^${victim.proc.pid}@\\S+ .* lost$`, 'm'));
    // Nothing was sent twice: at most one job per prompt, the in-doubt ones never sent again.
    expect([...jobsPerPrompt().values()].every((n) => n === 1)).toBe(true);
    expect(env.state().requests.submit).toBeLessThanOrEqual(16);
    expect(env.state().requests.submit).toBeGreaterThanOrEqual(16 - atKill.submitting.length);
    expect(postsAtKill).toBeGreaterThanOrEqual(atKill.submitted.length);
  });

  it('stop on a budget below the worst case as one runner would: each worker ends, the rest pending, said once', async () => {
    // 30 images of 0.2 tokens: a budget of 2.5 (about 40 % of the worst case) covers 12 of them.
    env = await makeRunEnv({ balance: 1000, speed: 0.1, latencyMs: 30 });
    const file = await env.manifest({ name: 'lean', concurrency: 2, budget: 2.5, tasks: images(30) });
    // The preflight refuses a run its budget cannot finish unless it may stop part way.
    const first = worker(file, ['--allow-partial']);
    await until(
      () => withStore((store) => store.workers.list('lean').length > 0),
      'the first worker to start working',
    );
    const crew = [first, worker(file, ['--allow-partial']), worker(file, ['--allow-partial'])];
    // Every worker ends (the test's timeout is the bound): none waits for tasks another one gave up on.
    const codes = await Promise.all(crew.map((w) => w.exited));
    const said = crew.map((w) => w.stderr().trim().split('\n').at(-1) ?? '');
    const stop =
      '18 task(s) did not fit under the budget of 2.5 tokens (0.1 tokens left; they need up to 3.6 tokens): raise budget and run again to continue';
    for (const [i, w] of crew.entries()) {
      expect(codes[i], w.stderr()).toBe(4);
      expect(said[i]).toContain(stop);
    }

    // The sandbox charged no more than the budget, each task at most once.
    const jobs = env.state().jobs;
    expect(jobs).toHaveLength(12);
    expect([...jobsPerPrompt().values()].every((n) => n === 1)).toBe(true);
    expect(jobs.reduce((n, j) => n + j.cost - j.refunded, 0)).toBeLessThanOrEqual(2.5);
    withStore((store) => {
      expect(store.tasks.countTasksByState('lean')).toMatchObject({ done: 12, pending: 18 });
      // Nobody holds the tasks left: a later run (with a bigger budget) takes them.
      expect(store.claims.heldByOthers('lean', 'nobody')).toBe(0);
    });
    const status = await cli(['--state', url, 'status', 'lean'], {
      env: workerEnv(),
      cwd: env.dir,
      now: () => new Date(),
    });
    // The run ended as a budget stop ends one (exit 4), its unfinished tasks counted with the way on.
    expect(status.stdout).toMatch(/^ {2}State: interrupted \(exit 4\) · /m);
    // Why, once for the run: the first worker to stop on the budget said it, the last one out closed it.
    expect(status.stdout).toMatch(
      new RegExp(
        `^ {2}Stopped \\(the run's budget\\) at [^:]+:\\d\\d UTC: ${stop.replace(/[.()]/g, '\\$&')}$`,
        'm',
      ),
    );
    expect(status.stdout).toContain('Tasks: 30 (18 pending, 12 done)');
    expect(status.stdout).toMatch(
      /^18 task\(s\) unfinished: `mediabatch run batch\.yaml --run-id lean --state /m,
    );
    expect(status.stdout).toContain('Workers: 0 working, 3 in all');

    // One runner on its own state stops on the same line with the same exit code.
    const single = await env.manifest(
      { name: 'lean', concurrency: 2, budget: 2.5, output: 'alone', tasks: images(30) },
      'alone.yaml',
    );
    // Its jobs' pace changes nothing of what it says: quicker ones (7 s at the workers' pace).
    env.sandbox.configure({ speed: 0.02 });
    const alone = await env.run(['run', single, '--yes', '--allow-partial']);
    expect(alone.code, alone.stderr).toBe(4);
    expect(alone.stderr.trim().split('\n').at(-1)).toContain(stop);
  });

  it('refuses a local output folder for a PostgreSQL state unless the workers share the disk', async () => {
    env = await makeRunEnv({ balance: 1000 });
    const file = await env.manifest({ name: 'local', tasks: images(1) });
    const r = await cli(['--state', url, 'run', file, '--yes'], {
      env: workerEnv(),
      cwd: env.dir,
      now: () => new Date(),
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'mediabatch: output: out is a local folder, and the state is in PostgreSQL, where workers on other machines would write their results to their own disks: use a bucket (output: s3://bucket/prefix, or output: storage), or pass --allow-local-output when every worker shares this disk\n',
    );
    expect(env.state().requests.submit).toBe(0);
  });

  it('two workers answered with one job at the same moment: one task keeps it, the other is in doubt, no crash', async () => {
    env = await makeRunEnv({ balance: 1000, speed: 0.1 });
    // Four tasks, one slot each: a worker claims ahead of its slots, so the second worker finds some left.
    const file = await env.manifest({ name: 'twin', concurrency: 1, tasks: images(4) });
    const twin = await twinAnswers(env.sandbox.baseUrl);
    try {
      const first = worker(file, [], twin.baseUrl);
      await until(
        () => withStore((store) => store.workers.list('twin').length > 0),
        'the first worker to start working',
      );
      const second = worker(file, [], twin.baseUrl);
      await Promise.race([twin.bothSent, first.exited, second.exited]);
      expect(twin.count(), `${first.stdout()}${first.stderr()}${second.stdout()}${second.stderr()}`).toBe(2);
      // Both answers are recorded behind a third writer so that they meet: the first to write the job
      // waits for the ledger with the job's index entry uncommitted, the second waits for it on that index.
      const holder = new PgDb(url);
      try {
        holder.exec('BEGIN; LOCK TABLE ledger IN SHARE MODE');
        twin.answer();
        await until(() => lockWaiters() === 2, 'both answers to wait');
        holder.exec('COMMIT');
      } finally {
        holder.close();
      }
      const codes = await Promise.all([first.exited, second.exited]);
      const said = `${first.stderr()}${second.stderr()}`;
      expect(said).not.toContain('    at ');
      // A task in doubt ends the run as any task that needs you does, never as a bug (70).
      expect(codes.sort(), said).toEqual([0, 2]);
    } finally {
      await twin.close();
    }
    // The sandbox made a job per POST, one per task; the second answer of the two named the first's job.
    expect(env.state().requests.submit).toBe(4);
    withStore((store) => {
      const done = store.tasks.tasksByState('twin', ['done']);
      const doubt = store.tasks.tasksByState('twin', ['in_doubt']);
      expect([done.length, doubt.length]).toEqual([3, 1]);
      const kept = done.find((t) => t.imgUuid === twin.jobId());
      expect(doubt[0]?.error).toBe(
        `the API answered with job ${twin.jobId()}, which task ${kept?.taskId} of run twin already has: this submission may or may not have been charged`,
      );
      // The books hold the done tasks' charges only: the job both tasks were told of is charged once.
      expect(store.ledger.runSpent('twin').charged).toBeCloseTo(
        done.reduce((n, t) => n + (t.cost ?? 0), 0),
        9,
      );
    });
  });
});

/** Sessions of the test's database waiting for a lock. */
function lockWaiters(): number {
  const db = new PgDb(url);
  try {
    return Number(
      db
        .prepare(
          `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
           WHERE NOT l.granted AND s.datname = current_database()`,
        )
        .pluck()
        .get(),
    );
  } finally {
    db.close();
  }
}

/**
 * A proxy in front of the sandbox that holds the answers of the first two submissions until both came
 * (from two workers) and `answer()` is called, then gives both the first one's job id.
 */
async function twinAnswers(upstream: string): Promise<{
  baseUrl: string;
  bothSent: Promise<void>;
  answer(): void;
  jobId(): string;
  count(): number;
  close(): Promise<void>;
}> {
  const held: { status: number; body: { data?: { img_uuid?: string } } }[] = [];
  let sent: () => void = () => undefined;
  const bothSent = new Promise<void>((resolve) => {
    sent = resolve;
  });
  let go: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    go = resolve;
  });
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (['host', 'connection', 'content-length', 'keep-alive'].includes(name)) continue;
      if (typeof value === 'string') headers[name] = value;
    }
    const answer = await request(`${upstream}${req.url ?? '/'}`, {
      method: req.method as 'GET' | 'POST',
      headers,
      ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
    });
    const text = await answer.body.text();
    const type = answer.headers['content-type'];
    if (req.method !== 'POST' || !req.url?.startsWith('/api/') || held.length >= 2) {
      res.writeHead(answer.statusCode, typeof type === 'string' ? { 'content-type': type } : {}).end(text);
      return;
    }
    const mine = { status: answer.statusCode, body: JSON.parse(text) as { data?: { img_uuid?: string } } };
    held.push(mine);
    if (held.length === 2) sent();
    await released;
    if (mine.body.data !== undefined) mine.body.data.img_uuid = held[0]?.body.data?.img_uuid;
    res.writeHead(mine.status, { 'content-type': 'application/json' }).end(JSON.stringify(mine.body));
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => req.socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    bothSent,
    answer: () => go(),
    jobId: () => held[0]?.body.data?.img_uuid ?? '',
    count: () => held.length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
