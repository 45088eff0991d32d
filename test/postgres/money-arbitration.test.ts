// The money of a PostgreSQL state is arbitrated by the database itself, not by one lock for every
// writer: two processes ask for intents against one run budget each and one period budget over both
// runs, at once and as fast as they can, giving some back, many rounds. No reading after any intent ever
// finds a budget passed, and at the end what is held is within both budgets. (Without the run's money
// lock or the period's that each budget check takes, the two processes' checks interleave and a budget
// is passed within a few hundred rounds: tried, each lock taken out in turn.)
import { spawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { spendFromPeriod } from '../../src/money/index.js';
import { openStore } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { REPO } from '../helpers/child.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { task } from '../store/helpers.js';

vi.setConfig({ testTimeout: 120_000 });

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

const SPENDER = fileURLToPath(new URL('./money-spender.ts', import.meta.url));
const TSX = pathToFileURL(`${REPO}node_modules/tsx/dist/loader.mjs`).href;
const M = 1_000_000;
/** Rounds per spender: enough for many budget-edge races on a loaded machine, cheap in `npm test`. */
const ROUNDS = Number(process.env.MEDIABATCH_MONEY_ROUNDS ?? 400);

interface Spent {
  granted: number;
  refused: number;
  passed: string[];
}

function spender(url: string, who: string, seed: number): Promise<Spent> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', TSX, SPENDER, url, who, String(ROUNDS), String(seed)],
      { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
    });
    child.on('exit', (code) => {
      if (code === 0) resolve(JSON.parse(out) as Spent);
      else reject(new Error(`spender ${who} exited ${code}: ${err}`));
    });
  });
}

describe('money on a PostgreSQL state, two processes at once', () => {
  it('never passes a run budget nor a period budget, and both processes spent and were refused', async () => {
    const url = pg.freshDatabase();
    const store = openStore(url);
    try {
      // Two runs of one manifest fired in one period: each run's budget holds 5 tasks of 1 token, the
      // period 8 of both together, so either budget is the one that refuses, depending on the moment. A
      // third run, started by hand, has its own budget of 5 only.
      const ids = ['a', 'b'].flatMap((who) => Array.from({ length: 12 }, (_, i) => `${who}-${i}`));
      for (const runId of ['r1', 'r2', 'r3']) {
        store.runs.createRun({
          id: runId,
          manifestPath: runId === 'r3' ? '/m/other.yaml' : '/m/nightly.yaml',
          manifestName: 'nightly',
          settings: { budget: 5 },
        });
        if (runId !== 'r3') spendFromPeriod(store, runId, { period: '2026-11', budget: 8 });
        store.tasks.upsertTasks(
          runId,
          ids.map((id) => task(id, {}, 1)),
        );
      }
      const [a, b] = await Promise.all([spender(url, 'a', 1), spender(url, 'b', 2)]);
      expect([...(a?.passed ?? []), ...(b?.passed ?? [])]).toEqual([]);
      // Both got intents and both were refused: the two really met at the budgets' edges.
      for (const s of [a, b]) {
        expect(s?.granted).toBeGreaterThan(ROUNDS / 4);
        expect(s?.refused).toBeGreaterThan(0);
      }
      const [r1, r2, r3] = ['r1', 'r2', 'r3'].map((id) => store.reservations.figures(id).held);
      expect([r1, r2, r3].every((held) => held !== undefined && held <= 5 * M)).toBe(true);
      expect((r1 ?? 0) + (r2 ?? 0)).toBeLessThanOrEqual(8 * M);
    } finally {
      store.close();
    }
  });

  it("a charge takes its run's money lock before the run's sums, as a spend does (one order: no deadlock)", () => {
    const url = pg.freshDatabase();
    const store = openStore(url);
    const other = new PgDb(url);
    try {
      store.runs.createRun({ id: 'r1', manifestPath: '/m', manifestName: 'm', settings: {} });
      store.tasks.upsertTasks('r1', [task('a')]);
      const attemptNo = store.submissions.recordSubmitIntent('r1', 'a');
      const tryLock = other
        .prepare("SELECT pg_try_advisory_xact_lock(hashtextextended('mediabatch money ' || ?, 0))")
        .pluck();
      const [held] = store.batch([
        () => {
          store.submissions.recordSubmitted('r1', 'a', attemptNo, {
            imgUuid: 'job-a',
            cost: 2,
            keyFingerprint: 'fp0000000000',
          });
          // A read: what was sent before it has run on the server when it answers.
          store.tasks.getTask('r1', 'a');
          return tryLock.get('r1');
        },
      ]);
      expect(held).toEqual({ ok: true, value: 0 });
      // Once committed, the lock is free again.
      expect(tryLock.get('r1')).toBe(1);
    } finally {
      other.close();
      store.close();
    }
  });
});
