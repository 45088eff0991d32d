// `view` over a state kept in a real PostgreSQL server (started for this file): every read of the page
// answers from the database as the store states it, the workers panel's answer and its live event,
// decisions written through the store with their reservations, reads that never take the writers' lock,
// and a server that goes away: 503 in one line without the password, a `store` event, and back again.
import { EventEmitter } from 'node:events';
import { request } from 'node:http';
import { hostname } from 'node:os';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { openReadOnlyStore, openStore, type Store } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { registerSecret } from '../../src/util/secrets.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { cli } from '../helpers/cli.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { VARIANTS } from '../helpers/review-chain.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';
import { FAULTY, raw } from './helpers.js';

const PASSWORD = 'pw-SENTINEL-9c2a';
const KEY = 'sk-SENTINEL-key-in-the-database-3e7b';
let pg: Postgres;
let env: RunEnv;
let url: string;
let view: ViewServer;
/** Failures of the view itself (500s, background reads): none is expected. */
const errors: string[] = [];
/** What the view told its terminal about the database going away and coming back. */
const awayLines: string[] = [];

function mediabatch(args: string[]) {
  return cli(['--state', url, ...args], {
    env: {
      MEDIABATCH_API_KEY: SANDBOX_KEY,
      MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
      MEDIABATCH_POLL_SCALE: FAST_POLLS,
    },
    cwd: env.dir,
    now: () => new Date(),
  });
}

async function get(path: string): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const answer = await raw(view.port, path, { authorization: `Bearer ${view.token}` });
  return {
    status: answer.status,
    json: JSON.parse(answer.text) as Record<string, unknown>,
    text: answer.text,
  };
}

async function ok(path: string): Promise<Record<string, unknown>> {
  const answer = await get(path);
  expect(answer.status, `${path}: ${answer.text}`).toBe(200);
  return answer.json;
}

function post(path: string, body: unknown) {
  const text = JSON.stringify(body);
  return new Promise<{ status: number; json: Record<string, unknown> }>((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: view.port,
        path,
        method: 'POST',
        headers: {
          host: `127.0.0.1:${view.port}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
          'x-mediabatch-token': view.token,
          origin: `http://127.0.0.1:${view.port}`,
          'sec-fetch-site': 'same-origin',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) }),
        );
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

/** The live events as they come, and a wait for one that matches. */
async function listen(): Promise<{ until(match: RegExp, ms?: number): Promise<string>; close(): void }> {
  let text = '';
  const req = request({
    host: '127.0.0.1',
    port: view.port,
    path: '/api/events',
    headers: { host: `127.0.0.1:${view.port}`, authorization: `Bearer ${view.token}` },
  });
  await new Promise<void>((resolve) => {
    req.on('response', (res) => {
      res.on('data', (c: Buffer) => {
        text += c.toString('utf8');
      });
      resolve();
    });
    req.end();
  });
  return {
    async until(match, ms = 10_000) {
      const end = Date.now() + ms;
      for (;;) {
        const event = text.split('\n\n').find((e) => match.test(e));
        if (event !== undefined) return event;
        if (Date.now() > end) throw new Error(`no event ${match} in: ${text}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    close: () => req.destroy(),
  };
}

function withStore<T>(read: (store: Store) => T): T {
  const store = openStore(url);
  try {
    return read(store);
  } finally {
    store.close();
  }
}

beforeAll(async () => {
  pg = await startPostgres();
  env = await makeRunEnv(FAULTY);
  // The test server trusts loopback, so any password is accepted: one that must never be shown.
  url = pg.freshDatabase().replace('postgres@', `postgres:${PASSWORD}@`);
  const batch = await env.manifest({
    name: 'batch',
    tasks: [
      ...images(12),
      { id: 'clip', model: 'flow22_spicy', input: { prompt: 'a slow dolly shot', resolution: '480p' } },
    ],
  });
  const first = await mediabatch(['run', batch, '--yes', '--allow-local-output', '--retries', '0']);
  if (![0, 2].includes(first.code)) throw new Error(`run exited ${first.code}: ${first.stderr}`);
  env.sandbox.configure({ failRate: 0, chargeThenErrorRate: 0 });
  const chain = await env.manifest(
    { name: 'chain', tasks: VARIANTS, concurrency: 8, budget: 200 },
    'chain.yaml',
  );
  const second = await mediabatch(['run', chain, '--yes', '--allow-local-output']);
  if (second.code !== 4) throw new Error(`chain run exited ${second.code}: ${second.stderr}`);
  view = await startView({
    stateFile: url,
    cwd: env.dir,
    onError: (m) => errors.push(m),
    onAway: (line) => awayLines.push(line ?? 'back'),
  });
}, 120_000);

afterEach(() => {
  expect(errors).toEqual([]);
});

afterAll(async () => {
  await view?.close();
  await env?.close();
  pg?.stop();
});

describe('view --state postgres://…', () => {
  it('is opened by the command from MEDIABATCH_STATE_URL: one line, the run it names, never the password', async () => {
    const signals = new EventEmitter();
    let stdout = '';
    let printed: (line: string) => void = () => undefined;
    const line = new Promise<string>((resolve) => {
      printed = resolve;
    });
    let stderr = '';
    const io = {
      stdout: {
        write: (s: string) => {
          stdout += s;
          if (stdout.includes('\n')) printed(stdout);
        },
      },
      stderr: { write: (s: string) => (stderr += s) },
      env: { MEDIABATCH_STATE_URL: url },
      cwd: env.dir,
      now: () => new Date(),
      interactive: false,
      signals,
    };
    const done = runCli(['view', 'chain'], io);
    const shown = await line;
    expect(shown).toMatch(/^View: http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}\n$/);
    const port = Number(/:(\d+)\//.exec(shown)?.[1]);
    const token = /token=(.*)\n/.exec(shown)?.[1] ?? '';
    const answer = await raw(port, '/api/runs/chain', { authorization: `Bearer ${token}` });
    expect(answer.status).toBe(200);
    expect(answer.text).not.toContain(PASSWORD);
    signals.emit('SIGINT');
    expect(await done).toBe(0);
    expect(stderr).toBe('');

    const missing = await cli(['view', 'nope'], { env: { MEDIABATCH_STATE_URL: url }, cwd: env.dir });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(
      /run nope: not found in postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/\w+; known runs, newest first: chain, batch/,
    );
    expect(missing.stderr).not.toContain(PASSWORD);

    // A database mediabatch never wrote to: refused in one line, and left as it was.
    const empty = pg.url('postgres').replace('postgres@', `postgres:${PASSWORD}@`);
    const none = await cli(['view'], { env: { MEDIABATCH_STATE_URL: empty }, cwd: env.dir });
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(
      `mediabatch: the PostgreSQL state at postgres://postgres:***@127.0.0.1:${pg.port}/postgres holds no mediabatch state (no run was ever recorded there): check --state or MEDIABATCH_STATE_URL\n`,
    );
    const db = new PgDb(pg.url('postgres'));
    try {
      expect(
        db
          .prepare(`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`)
          .pluck()
          .get(),
      ).toBe(0);
    } finally {
      db.close();
    }
  });

  it('answers every read of the page from the database, as the store states it', async () => {
    const runs = (await ok('/api/runs'))['runs'] as Array<{ id: string }>;
    expect(runs.map((r) => r.id).sort()).toEqual(['batch', 'chain']);
    const d = await ok('/api/runs/batch');
    const counts = withStore((s) => s.tasks.countTasksByState('batch'));
    const run = d['run'] as { by_state: Record<string, number>; tasks: number; net: number };
    expect(run.by_state).toEqual(counts);
    expect(run.tasks).toBe(13);
    expect(counts.failed).toBeGreaterThan(0);
    expect(counts.in_doubt).toBeGreaterThan(0);
    // Money as the ledger in the database books it, and the sandbox charged at least that.
    const spent = withStore((s) => s.ledger.runSpent('batch'));
    expect(run.net).toBeCloseTo(spent.net, 6);
    expect((d['in_doubt'] as { tasks: number }).tasks).toBe(counts.in_doubt);
    expect((d['failures'] as unknown[]).length).toBeGreaterThan(0);
    expect((d['spend_series'] as { points: unknown[] }).points.length).toBeGreaterThan(0);
    // The printed commands name the database without its password.
    expect(JSON.stringify(d)).not.toContain(PASSWORD);
    expect(String((d['in_doubt'] as { advice: string }).advice)).toContain(
      `--state 'postgres://postgres@127.0.0.1:${pg.port}/`,
    );

    // Every task once over the pages of the list (keyset paging on PostgreSQL), and each one's page.
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await ok(`/api/runs/batch/tasks?order=newest&limit=5${cursor ? `&cursor=${cursor}` : ''}`);
      ids.push(...(page['tasks'] as Array<{ id: string }>).map((t) => t.id));
      cursor = page['next_cursor'] as string | null;
    } while (cursor !== null);
    expect(ids.sort()).toEqual(['clip', ...images(12).map((t) => t.id)].sort());
    const failed = await ok('/api/runs/batch/tasks?state=failed&q=img');
    expect((failed['tasks'] as unknown[]).length).toBe(counts.failed);
    const clip = await ok('/api/runs/batch/tasks/clip');
    expect((clip['task'] as { id: string }).id).toBe('clip');
    const still = await ok('/api/runs/chain/tasks/still-mug-1');
    expect((still['review'] as { status: string }).status).toBe('awaiting');
    const file = (still['files'] as Array<{ index: number }>)[0];
    const served = await raw(view.port, `/files/chain/still-mug-1/${file?.index}`, {
      authorization: `Bearer ${view.token}`,
    });
    expect(served.status).toBe(200);
    expect(served.body.length).toBeGreaterThan(0);
  });

  it('answers every read of the view’s store on PostgreSQL as the run’s own rows say', () => {
    const reader = openReadOnlyStore(url);
    try {
      const r = reader.viewReads;
      const counts = reader.tasks.countTasksByState('batch');
      const tasks = Object.values(counts).reduce((n, c) => n + c, 0);
      const spent = reader.ledger.runSpent('batch');
      const sum = (rows: ReadonlyArray<{ kind: string; tokens: number }>, kind: string) =>
        rows.filter((b) => b.kind === kind).reduce((n, b) => n + b.tokens, 0);
      // The spend series, read whole and in id ranges, add up to the ledger.
      const upTo = r.maxLedgerId();
      expect(upTo).toBeGreaterThan(0);
      for (const rows of [r.spendAfter('batch', 0), r.spendBetween('batch', 0, upTo)]) {
        expect(sum(rows, 'charge')).toBeCloseTo(spent.charged, 9);
        expect(sum(rows, 'refund')).toBeCloseTo(spent.refunded, 9);
      }
      // The rows per model and state, whole and by rowid range, count every task.
      const bounds = r.taskRowids('batch');
      expect(bounds).toBeDefined();
      for (const rows of [
        r.modelStates('batch'),
        r.modelStatesIn('batch', bounds?.lo ?? 0, bounds?.hi ?? 0),
      ]) {
        expect(rows.reduce((n, m) => n + m.tasks, 0)).toBe(tasks);
        expect(rows.filter((m) => m.state === 'failed').reduce((n, m) => n + m.tasks, 0)).toBe(counts.failed);
      }
      // Finishes: by cursor, per second, since a time and the newest, all agree.
      const finishedTasks = r.finishedAfter('batch', '', '', 1_000);
      expect(r.finishedBuckets('batch').reduce((n, b) => n + b.n, 0)).toBe(finishedTasks.length);
      expect(r.finishedSince('batch', '', 1_000)).toHaveLength(finishedTasks.length);
      expect(r.latestFinish('batch')).toBe(finishedTasks.at(-1)?.[0]);
      expect(finishedTasks.length).toBeGreaterThan(0);
      // Failures, chains, doubt, a task's state, its ledger lines and its chain neighbours.
      const failures = r.failuresByReason('batch');
      expect(failures.reduce((n, f) => n + f.count, 0)).toBe(counts.failed + counts.in_doubt);
      expect(r.inDoubtFigures('batch').tasks).toBe(counts.in_doubt);
      expect(
        r
          .blockedChains('chain', 50)
          .map((c) => c.task)
          .sort(),
      ).toEqual(['clip-mug-1', 'clip-mug-2', 'clip-mug-3', 'clip-mug-4']);
      expect(r.upstreamsWithState('chain', 'clip-mug-1')).toEqual([
        { name: '', task: 'still-mug-1', state: 'done' },
      ]);
      expect(r.downstreamsWithState('chain', 'still-mug-1').map((d) => d.task)).toEqual(['clip-mug-1']);
      expect(r.taskState('batch', 'clip')).toBe(reader.tasks.getTask('batch', 'clip')?.state);
      const charged = r.ledgerOfTask('batch', 'clip');
      expect(charged.map((l) => l.kind)).toContain('charge');
      const signals = r.changeSignals();
      expect(signals.dataVersion).toBeGreaterThan(0);
      expect(signals.ledger).toBe(upTo);
    } finally {
      reader.close();
    }
  });

  it('finds text as the answers show it: a key in the database is not found by q=, the rows past it are', async () => {
    registerSecret(KEY);
    const db = new PgDb(url);
    try {
      const set = db.prepare(`UPDATE tasks SET error = ? WHERE run_id = 'batch' AND task_id = ?`);
      for (const id of ['img-1', 'img-2', 'img-3']) set.run(`server said ${KEY}`, id);
      set.run('server said sk-visible', 'img-4');
    } finally {
      db.close();
    }
    const ids = async (query: string) => {
      const found: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await ok(
          `/api/runs/batch/tasks?order=id&limit=1&${query}${cursor ? `&cursor=${cursor}` : ''}`,
        );
        found.push(...(page['tasks'] as Array<{ id: string }>).map((t) => t.id));
        cursor = page['next_cursor'] as string | null;
      } while (cursor !== null);
      return found;
    };
    for (const q of [KEY, KEY.slice(0, 12), 'SENTINEL', 'said sk-SEN']) {
      expect(await ids(`q=${encodeURIComponent(q)}`), q).toEqual([]);
    }
    // The three rows whose plain text holds "sk-" are read past: the first page is the fourth.
    const first = await ok('/api/runs/batch/tasks?order=id&limit=1&q=sk-');
    expect((first['tasks'] as Array<{ id: string }>).map((t) => t.id)).toEqual(['img-4']);
    expect(await ids('q=sk-')).toEqual(['img-4']);
    expect(await ids(`q=${encodeURIComponent('server said')}`)).toEqual(['img-1', 'img-2', 'img-3', 'img-4']);
    const newest = await ok('/api/runs/batch/tasks?order=newest&q=sk-');
    expect((newest['tasks'] as Array<{ id: string; error: string }>).map((t) => [t.id, t.error])).toEqual([
      ['img-4', 'server said sk-visible'],
    ]);
  });

  it('decides from the page through the store: an approval releases its clip, a re-roll reserves its worst case', async () => {
    const awaiting = (await ok('/api/runs/chain/tasks?review=awaiting&order=id'))['tasks'] as Array<{
      id: string;
      review: { version: number };
    }>;
    expect(awaiting.map((t) => t.id)).toEqual(['still-mug-1', 'still-mug-2', 'still-mug-3', 'still-mug-4']);
    const price = await ok('/api/runs/chain/reroll-price?taskIds=still-mug-2');
    expect(price).toMatchObject({ budget: 200, fits: true });
    const held = withStore((s) => s.reservations.figures('chain').held);

    const approve = await post('/api/runs/chain/decisions', {
      taskIds: ['still-mug-1'],
      verdict: 'approve',
      expectedVersions: { 'still-mug-1': awaiting[0]?.review.version },
    });
    expect(approve.status).toBe(200);
    const reroll = await post('/api/runs/chain/decisions', { taskIds: ['still-mug-2'], verdict: 'reroll' });
    expect(reroll.status).toBe(200);
    expect(reroll.json['outcomes']).toMatchObject([{ task: 'still-mug-2', ok: true }]);
    // A stale page's decision is refused with its reason; the first stands.
    const stale = await post('/api/runs/chain/decisions', {
      taskIds: ['still-mug-1'],
      verdict: 'reject',
      expectedVersions: { 'still-mug-1': awaiting[0]?.review.version },
    });
    expect(stale.status).toBe(409);

    const after = withStore((s) => ({
      verdict: s.tasks.getTask('chain', 'still-mug-1')?.verdict,
      rerolled: s.tasks.getTask('chain', 'still-mug-2')?.state,
      held: s.reservations.figures('chain').held,
    }));
    expect(after.verdict).toBe('approved');
    expect(after.rerolled).toBe('pending');
    // The re-roll's worst case is held in the database (the approved still's clip is released to run).
    expect(after.held).toBeGreaterThanOrEqual(held + Math.round(Number(price['total']) * 1_000_000));
    const page = await ok('/api/runs/chain/tasks/still-mug-1');
    expect((page['review'] as { decisions: Array<{ verdict: string }> }).decisions).toMatchObject([
      { verdict: 'approve' },
    ]);

    // The budget lowered to what is committed (as a resumed run with a smaller budget records it): the
    // database refuses a re-roll over it before anything is recorded or sent.
    const committed = Number((await ok('/api/runs/chain/reroll-price?taskIds=still-mug-3'))['committed']);
    const db = new PgDb(url);
    try {
      db.prepare(
        `UPDATE runs SET settings = jsonb_set(settings::jsonb, '{budget}', to_jsonb(?::float8))::text WHERE id = 'chain'`,
      ).run(committed + 0.001);
    } finally {
      db.close();
    }
    const balance = env.state().balance;
    const over = await ok('/api/runs/chain/reroll-price?taskIds=still-mug-3');
    expect(over['fits']).toBe(false);
    const refused = await post('/api/runs/chain/decisions', { taskIds: ['still-mug-3'], verdict: 'reroll' });
    expect(refused.status).toBe(409);
    expect((refused.json['outcomes'] as Array<{ reason: string }>)[0]?.reason).toMatch(
      /^re-rolling 1 task\(s\) may cost up to .* nothing was sent; raise budget/,
    );
    expect(withStore((st) => st.tasks.getTask('chain', 'still-mug-3')?.state)).toBe('done');
    expect(withStore((st) => st.reservations.figures('chain').held)).toBe(after.held);
    expect(env.state().balance).toBe(balance);
  });

  it('shows the run’s workers, a lost one marked, and pushes their moves as events', async () => {
    const events = await listen();
    try {
      withStore((s) => {
        s.workers.join('batch', `101@host-a#n1`, 'host-a', 101, 60_000);
        s.workers.heartbeat('batch', `101@host-a#n1`, { inFlight: 3, submitted: 7 }, 60_000);
        // A heartbeat that runs out at once: the worker is lost from then on.
        s.workers.join('batch', `202@host-b#n2`, 'host-b', 202, 1);
      });
      const answer = await ok('/api/runs/batch/workers');
      const workers = answer['workers'] as Array<Record<string, unknown>>;
      // The run's own worker first (it left when the run ended; its submitted are the POSTs whose
      // acceptance it recorded: the sandbox's jobs of the run but those whose answer was lost, in doubt),
      // then the two that joined.
      const batchJobs = env
        .state()
        .jobs.filter((j) => !String((j.request as { prompt?: unknown }).prompt).includes('mug'));
      expect(workers.map((w) => [w['host'], w['state'], w['in_flight'], w['submitted']])).toEqual([
        [
          hostname(),
          'stopped',
          0,
          batchJobs.length - withStore((st) => st.tasks.countTasksByState('batch').in_doubt),
        ],
        ['host-a', 'working', 3, 7],
        ['host-b', 'lost', 0, 0],
      ]);
      expect(Date.parse(String(answer['now']))).toBeGreaterThan(
        Date.parse(String(workers[1]?.['heartbeat_at'])) - 1,
      );
      const chain = (await ok('/api/runs/chain/workers'))['workers'] as Array<Record<string, unknown>>;
      expect(chain.map((w) => [w['host'], w['state']])).toEqual([[hostname(), 'stopped']]);
      const first = await events.until(/event: workers\n.*"host-b"/);
      expect(first).toContain('"state":"lost"');
      withStore((s) => s.workers.heartbeat('batch', `101@host-a#n1`, { inFlight: 1, submitted: 9 }, 60_000));
      await events.until(/event: workers\n.*"in_flight":1,"submitted":9/);
      expect((await get('/api/runs/nope/workers')).status).toBe(404);
      expect((await get('/api/runs/batch/workers?x=1')).json['error']).toBe(
        'unknown parameter "x"; this address takes none',
      );
    } finally {
      events.close();
    }
  });

  it('serves the view of a run while it goes with run --view, and closes it with the run', async () => {
    const file = await env.manifest({ name: 'viewed', tasks: images(1, 'seen') }, 'viewed.yaml');
    const result = await mediabatch(['run', file, '--yes', '--allow-local-output', '--view']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n').filter((l) => l.startsWith('View: '));
    expect(lines).toHaveLength(1);
    const port = Number(/:(\d+)\//.exec(lines[0] ?? '')?.[1]);
    await expect(raw(port, '/api/runs')).rejects.toThrow(/ECONNREFUSED/);
    expect(withStore((s) => s.tasks.countTasksByState('viewed').done)).toBe(1);
  });

  it('keeps serving when a look of the live feed fails for a reason of its own, and tells it', async () => {
    const events = await listen();
    const db = new PgDb(url);
    try {
      // A table gone under the view (what a botched manual migration does): a bug-like failure, not an outage.
      // The rename itself moves the feed's signals (the write-ahead log), so the next look reads the workers.
      db.exec('ALTER TABLE workers RENAME TO workers_away');
      await expect.poll(() => errors.length, { timeout: 5_000 }).toBeGreaterThan(0);
      expect(errors[0]).toContain('workers');
      expect((await get('/api/runs/batch/workers')).status).toBe(500);
      // Committed for good before a later test stops the server at once (the test server commits
      // asynchronously: an immediate stop could undo it).
      db.exec('SET synchronous_commit = on');
      db.exec('ALTER TABLE workers_away RENAME TO workers');
      withStore((s) => s.workers.heartbeat('batch', '101@host-a#n1', { inFlight: 4, submitted: 11 }, 60_000));
      await events.until(/event: workers\n.*"in_flight":4,"submitted":11/);
      expect((await get('/api/runs/batch/workers')).status).toBe(200);
    } finally {
      db.close();
      events.close();
      errors.length = 0;
    }
  });

  it('reads in a snapshot that takes no lock: writers go on meanwhile, and it cannot write', () => {
    const reader = openReadOnlyStore(url);
    try {
      const seen = reader.readAtOnce(() => {
        const before = reader.tasks.countTasksByState('batch').done;
        // Another connection writes (under the writers' lock) while the read transaction is open: it
        // would wait for ever (here: fail at the test database's statement timeout) if the view held it.
        withStore((s) => s.batch([() => s.workers.join('batch', '303@host-c#n3', 'host-c', 303, 60_000)]));
        return { before, workers: reader.workers.list('batch').length };
      });
      // The snapshot did not see the worker that joined during it; a new read does.
      expect(seen.workers).toBe(3);
      expect(reader.workers.list('batch')).toHaveLength(4);
      expect(() => reader.workers.leave('batch', '303@host-c#n3')).toThrow(/read-only transaction/);
    } finally {
      reader.close();
    }
  });

  it('says in one line, without the password, that the server went away, and reads again when it is back', async () => {
    const events = await listen();
    try {
      pg.pause();
      const away = await get('/api/runs/batch');
      expect(away.status).toBe(503);
      const line = String(away.json['error']);
      expect(line).toMatch(
        /^the PostgreSQL state at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/\w+ (went away|cannot be reached|does not take connections yet): /,
      );
      expect(line).not.toContain('\n');
      // The page adds `: the page reads again when it is back` to it: no full stop before that colon.
      expect(line).not.toMatch(/\.$/);
      expect(away.text).not.toContain(PASSWORD);
      expect((await get('/api/runs')).status).toBe(503);
      const told = await events.until(/event: store\n.*"reachable":false/);
      expect(told).not.toContain(PASSWORD);
      pg.resume();
      await events.until(/event: store\n.*"reachable":true/, 15_000);
      expect((await get('/api/runs/batch')).status).toBe(200);
      // The terminal was told as the page was: the same line when it went, once, and once when back.
      expect(awayLines).toHaveLength(2);
      expect(awayLines[0]).toMatch(/^the PostgreSQL state at postgres:\/\/postgres:\*\*\*@/);
      expect(awayLines[1]).toBe('back');
    } finally {
      pg.resume();
      events.close();
    }
  });
});
