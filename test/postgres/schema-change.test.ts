// A rolling upgrade: a newer mediabatch migrates the PostgreSQL schema (a column added to a table) while a
// worker or a view of this build has its statements prepared on its connection. PostgreSQL then refuses
// each of them ("cached plan must not change result type"); the connection forgets its prepared
// statements and runs the statement again, once, where that is safe: outside a transaction, or the whole
// transaction again from its start. A schema newer than this build knows is said in one line.

import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { openReadOnlyStore, openStore, type Store } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { PG_MIGRATIONS } from '../../src/store/pg/migrations.js';
import { spawnCli } from '../helpers/child.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';
import { task } from '../store/helpers.js';

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let url: string;
const opened: Store[] = [];
beforeEach(() => {
  url = pg.freshDatabase();
});
let env: RunEnv | undefined;
afterEach(async () => {
  for (const store of opened.splice(0)) store.close();
  vi.restoreAllMocks();
  await env?.close();
  env = undefined;
});

function open(readOnly = false): Store {
  const store = readOnly ? openReadOnlyStore(url) : openStore(url);
  opened.push(store);
  return store;
}

/** The newest PostgreSQL schema this build knows. */
const KNOWN = Math.max(...PG_MIGRATIONS.map((m) => m.id));

/** What a newer mediabatch's migration does, from its own connection: a column added, its number recorded. */
function newerMigration(): void {
  const raw = new PgDb(url);
  try {
    raw.exec(`BEGIN;
ALTER TABLE runs ADD COLUMN newer_column TEXT;
ALTER TABLE tasks ADD COLUMN newer_column TEXT;
INSERT INTO migrations (id, name, applied_at) VALUES (${KNOWN + 100}, 'newer', 'now');
COMMIT`);
  } finally {
    raw.close();
  }
}

describe('a schema migrated by a newer mediabatch under a running one', () => {
  it('reads again with the new columns, outside a transaction and in one, for a worker and a view', async () => {
    const store = open();
    store.runs.createRun({ id: 'r1', manifestPath: '/m.yaml', manifestName: 'm', settings: {} });
    const view = open(true);
    // Each read prepared on its connection before the migration.
    expect(store.runs.getRun('r1')?.id).toBe('r1');
    expect(store.readAtOnce(() => store.runs.listRuns().map((r) => r.id))).toEqual(['r1']);
    expect(view.runs.getRun('r1')?.id).toBe('r1');
    expect(view.readAtOnce(() => view.runs.listRuns().length)).toBe(1);
    // A writing transaction (its statements pipelined) that reads the tasks it compares with.
    store.tasks.upsertTasks('r1', [task('a')]);
    expect(store.tasks.upsertTasks('r1', [task('a')]).unchanged).toBe(1);
    const said: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((line) => {
      said.push(String(line));
      return true;
    });

    newerMigration();

    expect(store.runs.getRun('r1')?.id).toBe('r1');
    expect(store.readAtOnce(() => store.runs.listRuns().map((r) => r.id))).toEqual(['r1']);
    expect(view.readAtOnce(() => view.runs.listRuns().length)).toBe(1);
    expect(view.runs.getRun('r1')?.id).toBe('r1');
    expect(store.tasks.upsertTasks('r1', [task('a'), task('b')])).toMatchObject({
      inserted: 1,
      unchanged: 1,
    });
    expect(store.tasks.getTask('r1', 'b')?.state).toBe('pending');
    // A write after it goes on too.
    store.runs.markRunState('r1', 'finished', 0);
    expect(view.runs.getRun('r1')?.state).toBe('finished');
    // Said once per connection, whatever number of statements met it.
    const known = KNOWN;
    const line = (name: string) =>
      `mediabatch: the PostgreSQL state at ${name} was migrated by a newer mediabatch (schema ${known + 100}, this one knows ${known}) while this one works: it goes on with what it knows; upgrade it before its next run\n`;
    expect(said).toEqual([line(store.file), line(view.file)]);
  });

  it('a worker of this build running while it happens finishes its run, and says so once', async () => {
    env = await makeRunEnv({ balance: 1000, speed: 0.15, latencyMs: 40 });
    const file = await env.manifest({ name: 'upgrade', concurrency: 2, tasks: images(16) });
    const worker = spawnCli(['--state', url, 'run', file, '--yes', '--allow-local-output'], {
      cwd: env.dir,
      env: {
        MEDIABATCH_API_KEY: SANDBOX_KEY,
        MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
        MEDIABATCH_POLL_SCALE: FAST_POLLS,
      },
    });
    try {
      const sandbox = env;
      for (const end = Date.now() + 60_000; sandbox.state().jobs.length < 4; ) {
        if (Date.now() > end || worker.proc.exitCode !== null)
          throw new Error(`the worker did not send: ${worker.stderr()}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      newerMigration();
      expect(await worker.exited, worker.stderr()).toBe(0);
    } finally {
      if (worker.proc.exitCode === null) worker.proc.kill('SIGKILL');
    }
    const known = KNOWN;
    const name = new PgDb(url);
    const said = worker
      .stderr()
      .split('\n')
      .filter((l) => l.includes('newer mediabatch'));
    expect(said).toEqual([
      `mediabatch: the PostgreSQL state at ${name.name} was migrated by a newer mediabatch (schema ${known + 100}, this one knows ${known}) while this one works: it goes on with what it knows; upgrade it before its next run`,
    ]);
    name.close();
    // Every task sent once and done.
    expect(env.state().requests.submit).toBe(16);
    // This build now refuses to open the state (a newer wrote it): read as any SQL client would.
    const raw = new PgDb(url);
    try {
      expect(
        raw.prepare(`SELECT count(*) FROM tasks WHERE run_id = 'upgrade' AND state = 'done'`).pluck().get(),
      ).toBe(16);
      expect(raw.prepare(`SELECT state FROM runs WHERE id = 'upgrade'`).pluck().get()).toBe('finished');
    } finally {
      raw.close();
    }
  });
});
