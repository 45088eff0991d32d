// docs/postgres.md's first commands, typed as the page writes them (its URL swapped for a real server's,
// the password included), in a copy of manifests/: the run goes to its end with its state in PostgreSQL
// and `status` through MEDIABATCH_STATE_URL finds it. A page that shows a command that is refused fails.
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { REPO } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, SANDBOX_KEY } from '../helpers/run-env.js';
import { shellWords } from '../helpers/shell-words.js';

const PAGE_URL = 'postgres://mediabatch:secret@db.internal:5432/mediabatch';
const PASSWORD = 'pw-SENTINEL-d0c5';

let pg: Postgres;
let sandbox: Sandbox;
let dir: string;
beforeAll(async () => {
  pg = await startPostgres();
  sandbox = await startSandbox({ port: 0, speed: 0, seed: 11, apiKey: SANDBOX_KEY, balance: 1000 });
  dir = await mkdtemp(join(tmpdir(), 'mb-docs-walk-'));
  await cp(join(REPO, 'manifests'), join(dir, 'manifests'), { recursive: true });
});
afterAll(async () => {
  await sandbox?.close();
  pg?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The lines of the page's first `sh` block. */
async function firstBlock(page: string): Promise<string[]> {
  const text = await readFile(join(REPO, 'docs', page), 'utf8');
  const block = /```sh\n([\s\S]*?)```/.exec(text)?.[1] ?? '';
  return block.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
}

describe("docs/postgres.md's first commands, typed", () => {
  it('run the demo with its state in PostgreSQL, and status finds it through MEDIABATCH_STATE_URL', async () => {
    const url = pg.freshDatabase().replace('postgres@', `postgres:${PASSWORD}@`);
    const lines = await firstBlock('postgres.md');
    expect(lines).toHaveLength(2);
    const outputs: string[] = [];
    for (const line of lines) {
      expect(line).toContain(PAGE_URL);
      const words = shellWords(line.replace(PAGE_URL, `'${url}'`));
      // `NAME=value mediabatch …`: the variables the line sets for the command.
      const vars = Object.fromEntries(
        words.slice(0, words.indexOf('mediabatch')).map((w) => w.split(/=(.*)/s).slice(0, 2)),
      );
      const args = words.slice(words.indexOf('mediabatch') + 1);
      const result = await cli(args, {
        env: {
          MEDIABATCH_API_KEY: SANDBOX_KEY,
          MEDIABATCH_BASE_URL: sandbox.baseUrl,
          MEDIABATCH_POLL_SCALE: FAST_POLLS,
          ...vars,
        },
        cwd: dir,
        now: () => new Date(),
        // A person at the terminal, answering the run's question.
        ask: async () => true,
      });
      expect([result.code, result.stderr], line).toEqual([0, '']);
      outputs.push(result.stdout);
    }
    expect(outputs[1]).toMatch(/^demo {2}.* finished /m);
    expect(sandbox.state().jobs.length).toBeGreaterThan(0);
    for (const out of outputs) expect(out).not.toContain(PASSWORD);
  });
});
