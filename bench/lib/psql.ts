// psql on a bench's throwaway PostgreSQL: for what the store has no statement for (EXPLAIN, \timing,
// sizes of tables), one call a script, its output trimmed.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { postgresBinaries } from '../../test/helpers/postgres.js';

/** The database's URL without the test server's options (its statement_timeout of a few seconds). */
export const bare = (url: string) => url.replace(/\?.*$/, '');

/** Runs `sql` (statements separated by semicolons) through psql; stops at the first error. */
export function psql(url: string, sql: string): string {
  return execFileSync(join(postgresBinaries(), 'psql'), ['-qAt', '-v', 'ON_ERROR_STOP=1', '-d', bare(url)], {
    input: `${sql};\n`,
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  }).trim();
}
