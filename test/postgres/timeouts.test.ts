// A runner on PostgreSQL never waits forever. A connection that hangs (a TCP proxy forwards nothing and
// closes nothing, as a hung pooler does; its kernel acknowledges every byte, so TCP's own timeouts never
// fire) ends the process within statement_timeout plus a margin, with one line naming the database; the
// session it left idle in a transaction is ended by the server, so a run started again (as another
// worker would) gets the rows it held and finishes with nothing sent twice. A statement that runs out of
// statement_timeout or lock_timeout (here: another session holds a lock on the table of leases every run
// starts with) ends the run with one line and exit 4. `npm run torture` runs the hung connection with the default timeouts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/errors.js';
import { PgDb } from '../../src/store/pg/db.js';
import { finish, type Libpq, newLibpq } from '../../src/store/pg/libpq.js';
import { type FleetStage, jobsByPrompt, startFleetStage, until } from '../helpers/fleet.js';
import { images } from '../helpers/run-env.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

const PASSWORD = 'pw-SENTINEL-t1me0ut';
const TASKS = 12;

let stage: FleetStage;
beforeAll(async () => {
  stage = await startFleetStage(['--speed', '0.02', '--latency', '10']);
});
afterAll(async () => {
  await stage?.close();
});

/** A URL whose query sets the session's settings (libpq's `options`) and libpq's own parameters. */
function withQuery(url: string, settings: string, params = ''): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', settings);
  for (const [key, value] of new URLSearchParams(params)) parsed.searchParams.set(key, value);
  return parsed.toString().replace(/\+/g, '%20');
}

function withPassword(url: string): string {
  return url.replace('postgres@', `postgres:${PASSWORD}@`);
}

describe('a runner on PostgreSQL never waits forever', () => {
  it('a hung connection: the process ends within statement_timeout plus the margin with one line; run again finishes', async () => {
    const proxy = await startTcpProxy({ port: stage.pg.port });
    try {
      const direct = stage.database();
      // statement_timeout 1 s, connect_timeout 1 s: the watchdog's deadline is 1 s + 5 s. The session's
      // idle transaction is ended later than that: ending it closes the proxy's connection, and the
      // runner would see the connection go away rather than hang.
      const state = withQuery(
        withPassword(proxy.through(direct)),
        '-c statement_timeout=1000 -c idle_in_transaction_session_timeout=8000',
        'connect_timeout=1',
      );
      const file = await stage.manifest('hung.yaml', { name: 'pghung', tasks: images(TASKS, 'hung') });
      const first = stage.spawn(state, ['run', file, '--yes']);
      await until(async () => (await stage.sandbox()).jobs.length >= 3, 60_000);
      proxy.drop();
      const dropped = Date.now();
      await first.exited;
      const waitedMs = Date.now() - dropped;
      // Killed by its watchdog: no exit code, SIGKILL (a shell shows 137).
      expect(first.proc.signalCode, `${first.proc.exitCode} ${first.stderr()}`).toBe('SIGKILL');
      expect(waitedMs).toBeGreaterThanOrEqual(1000);
      const lines = first
        .stderr()
        .split('\n')
        .filter((l) => l !== '');
      expect(lines).toEqual([
        expect.stringMatching(
          /^mediabatch: the PostgreSQL state at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/t\d+_\d+ did not answer for 6 s \(statement_timeout 1 s\): its connection hangs \(a pooler, a proxy or the server stopped answering without closing it\); this process stops here, run again to continue$/,
        ),
      ]);
      // The proxy still holds the server's side open: a session left idle in its transaction keeps the
      // rows it locked until the server ends it (idle_in_transaction_session_timeout), then the run goes on.
      const again = stage.spawn(direct, ['run', file, '--yes']);
      const code = await again.exited;
      expect([0, 2], again.stderr()).toContain(code);
      const mine = [...jobsByPrompt(await stage.sandbox())].filter(([p]) => p.startsWith('hung'));
      for (const [prompt, jobs] of mine) expect(jobs.length, prompt).toBe(1);
      const counts = stage.read(direct, (store) => store.tasks.countTasksByState('pghung'));
      expect(counts.done + counts.in_doubt).toBe(TASKS);
      for (const out of [first.stdout(), first.stderr(), again.stdout(), again.stderr()]) {
        expect(out).not.toContain(PASSWORD);
      }
    } finally {
      await proxy.close();
    }
  }, 120_000);

  it('a transaction left idle past idle_in_transaction_session_timeout: the session the server ended is gone (exit 4), not a bug', () => {
    const url = withQuery(stage.database(), '-c idle_in_transaction_session_timeout=300');
    const db = new PgDb(url);
    try {
      const idle = db.transaction(() => {
        db.prepare('SELECT 1').get();
        // A worker frozen inside its transaction: nothing reaches the server for longer than it allows.
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
        return db.prepare('SELECT 2').get();
      });
      let thrown: unknown;
      try {
        idle();
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(StoreError);
      expect((thrown as StoreError).exitCode).toBe(4);
      expect((thrown as StoreError).message).toMatch(
        /^the PostgreSQL state at postgres:\/\/postgres@127\.0\.0\.1:\d+\/t\d+_\d+ went away/,
      );
      // Outside a transaction the next statement opens a new session.
      expect(db.prepare('SELECT 3 AS n').get()).toEqual({ n: 3 });
    } finally {
      db.close();
    }
  });

  describe('a statement the server gives up on (another session holds a lock the run needs)', () => {
    let holder: Libpq | undefined;
    // Every run takes its lease first: a transaction left open on the table of leases keeps it waiting.
    const hold = (url: string) => {
      holder = newLibpq();
      holder.connectSync(url);
      holder.exec('BEGIN; LOCK TABLE leases IN ACCESS EXCLUSIVE MODE');
      expect(holder.resultStatus()).toBe('PGRES_COMMAND_OK');
    };
    const release = () => {
      if (holder !== undefined) finish(holder);
      holder = undefined;
    };

    it.each([
      [
        'statement_timeout',
        '-c statement_timeout=1000',
        'canceling statement due to statement timeout \\(statement_timeout 1 s\\)',
      ],
      ['lock_timeout', '-c lock_timeout=500', 'canceling statement due to lock timeout'],
    ])(
      '%s: one line, exit 4; run again once the lock is free finishes',
      async (name, settings, reason) => {
        const direct = stage.database();
        const state = withQuery(withPassword(direct), settings);
        const file = await stage.manifest(`${name}.yaml`, { name: `pg${name}`, tasks: images(3, name) });
        // The schema first, so that the runner's wait is on the lease's table, not on creating it.
        stage.read(direct, () => undefined);
        hold(direct);
        try {
          const first = stage.spawn(state, ['run', file, '--yes']);
          expect(await first.exited, first.stderr()).toBe(4);
          expect(
            first
              .stderr()
              .split('\n')
              .filter((l) => l !== ''),
          ).toEqual([
            expect.stringMatching(
              new RegExp(
                `^mediabatch: the PostgreSQL state at postgres://postgres:\\*\\*\\*@127\\.0\\.0\\.1:\\d+/t\\d+_\\d+ is busy or slow: ${reason}; run again to continue$`,
              ),
            ),
          ]);
          expect(first.stderr() + first.stdout()).not.toContain(PASSWORD);
        } finally {
          release();
        }
        const again = stage.spawn(state, ['run', file, '--yes']);
        expect(await again.exited, again.stderr()).toBe(0);
        const counts = stage.read(direct, (store) => store.tasks.countTasksByState(`pg${name}`));
        expect(counts.done).toBe(3);
      },
      60_000,
    );
  });
});
