// The store's contract on PostgreSQL: the same tests as on SQLite (the files below), each test on its own
// database of a real server started for this file. What only a SQLite file has (its pragmas, permissions,
// its migrations' snapshot) stays in open.test.ts and migrate.test.ts.

import { afterAll } from 'vitest';
import { startPostgres } from '../helpers/postgres.js';
import { useBackend } from './helpers.js';

const pg = await startPostgres();
afterAll(() => pg.stop());
useBackend(() => pg.freshDatabase());

await import('./answers.test.js');
await import('./batch.test.js');
await import('./chains.test.js');
await import('./counts.test.js');
await import('./jobs.test.js');
await import('./leases.test.js');
await import('./ledger.test.js');
await import('./report-reads.test.js');
await import('./reviews.test.js');
await import('./runs.test.js');
await import('./secrets.test.js');
await import('./spend.test.js');
await import('./submissions.test.js');
await import('./tasks.test.js');
