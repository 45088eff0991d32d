// The store's contract on PostgreSQL: the same tests as on SQLite (the files below), each test on its own
// database of a real server started for this file. What only a SQLite file has (its pragmas, permissions,
// its migrations' snapshot) stays in open.test.ts and migrate.test.ts.

import { afterAll, vi } from 'vitest';
import { startPostgres } from '../helpers/postgres.js';
import { useBackend } from './helpers.js';

// Each statement is a round trip to a server (0.04 ms on an idle loopback, 0.5 ms on a 2-core machine at
// load 20) where SQLite is a function call: the 100,000-task upsert, which reads the stored tasks back
// one at a time, needs far more than the usual 30 s there.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 120_000 });

const pg = await startPostgres();
afterAll(() => pg.stop());
useBackend(() => pg.freshDatabase());

await import('./account-read.test.js');
await import('./account-sums.test.js');
await import('./answers.test.js');
await import('./batch.test.js');
await import('./chains.test.js');
await import('./claims.test.js');
await import('./column-rules.test.js');
await import('./counts.test.js');
await import('./jobs.test.js');
await import('./leases.test.js');
await import('./ledger.test.js');
await import('./money-model.test.js');
await import('./money-schema.test.js');
await import('./period-budget.test.js');
await import('./moves.test.js');
await import('./report-reads.test.js');
await import('./reviews.test.js');
await import('./runs.test.js');
await import('./secrets.test.js');
await import('./spend.test.js');
await import('./submissions.test.js');
await import('./tasks.test.js');
await import('./workers.test.js');
