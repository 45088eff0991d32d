// The state's URL in what mediabatch prints, on a server that asks for a password (a role whose login
// takes one, as a real deployment's does; the other tests' server trusts loopback, where a command
// without its password works anyway). Every line names the database without the password, and a command
// printed for the person, typed as printed in the shell whose MEDIABATCH_STATE_URL holds the password,
// reaches the run: `--state` names the same database there, and the password comes from the environment.

import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PgDb } from '../../src/store/pg/db.js';
import { cli } from '../helpers/cli.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, reason, SANDBOX_KEY } from '../helpers/run-env.js';
import { shellWords } from '../helpers/shell-words.js';

const PASSWORD = 'pw-SENTINEL-77c2';
const pg: Postgres = await startPostgres();
let admin: PgDb;
let count = 0;

beforeAll(() => {
  admin = new PgDb(pg.url('postgres'));
  admin.exec(`SET password_encryption = 'scram-sha-256'`);
  admin.exec(`CREATE ROLE walker LOGIN PASSWORD '${PASSWORD}'`);
  // The role must give its password over TCP; every other role is still trusted, as in the other tests.
  const hba = String(admin.prepare('SHOW hba_file').pluck().get());
  writeFileSync(hba, `host all walker 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, 'utf8')}`);
  admin.prepare('SELECT pg_reload_conf()').get();
});
afterAll(() => {
  admin?.close();
  pg.stop();
});

let env: RunEnv;
/** postgres://walker:<password>@…/<a new database> */
let url: string;
/** The same URL as printed: no password. */
let shown: string;
beforeEach(async () => {
  env = await makeRunEnv({ balance: 1000 });
  count += 1;
  admin.exec(`CREATE DATABASE walk${count} OWNER walker`);
  shown = `postgres://walker@127.0.0.1:${pg.port}/walk${count}`;
  url = shown.replace('walker@', `walker:${PASSWORD}@`);
});
afterEach(async () => {
  await env.close();
});

/** The CLI in the test's folder; `ask` answers the confirmation a person at a terminal is asked. */
function mediabatch(args: string[], extraEnv: Record<string, string> = {}, ask?: () => Promise<boolean>) {
  return cli(args, {
    ...(ask !== undefined ? { ask } : {}),
    env: {
      MEDIABATCH_API_KEY: SANDBOX_KEY,
      MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
      MEDIABATCH_POLL_SCALE: FAST_POLLS,
      ...extraEnv,
    },
    cwd: env.dir,
    now: () => new Date(),
  });
}

/** The command between backquotes in a printed line, split as a shell would. */
function printedCommand(line: string): string[] {
  const command = /`(mediabatch [^`]*)`/.exec(line)?.[1];
  if (command === undefined) throw new Error(`no command in: ${line}`);
  return shellWords(command).slice(1);
}

describe('the state URL in what mediabatch prints, on a server that asks for a password', () => {
  it('names the database without its password in every line about a state that has no run yet', async () => {
    const file = await env.manifest({ name: 'walk', tasks: images(1), output: 'out' });
    const hidden = shown.replace('walker@', 'walker:***@');
    const start = `\`mediabatch run <manifest> --state ${shown}\``;
    const status = await mediabatch(['--state', url, 'status']);
    expect(status.stdout).toBe(`No runs yet in ${hidden}: start one with ${start}.\n`);
    const report = await mediabatch(['--state', url, 'report']);
    expect([report.code, reason(report)]).toEqual([
      1,
      `no runs yet in ${hidden}: start one with ${start}, then report on it`,
    ]);
    for (const args of [
      ['status', 'nope'],
      ['review', 'nope'],
      ['report', 'nope'],
    ]) {
      const unknown = await mediabatch(['--state', url, ...args]);
      expect([unknown.code, reason(unknown)]).toEqual([
        1,
        `run nope: not found in ${hidden}; there are no runs yet: start one with ${start}`,
      ]);
    }
    const shard = await mediabatch(['--state', url, 'status', '--shard', '1/2']);
    expect(reason(shard)).toBe(
      `no run of shard 1 of 2 in ${hidden}: name the run (\`<run> --shard 1/2\`), or use the shard's own --state`,
    );
    const balance = await mediabatch(['--state', url, 'balance']);
    expect(balance.stdout).toContain(`Ledger: no charges recorded in ${hidden} yet.`);
    const schedule = await mediabatch(['--state', url, 'schedule', file]);
    expect(schedule.stderr).toContain(`or start it with \`mediabatch run batch.yaml --state ${shown}\``);
    for (const r of [status, report, shard, balance, schedule]) {
      expect(`${r.stdout}${r.stderr}`).not.toContain(PASSWORD);
    }
  });

  it('reaches the run with a printed command typed where MEDIABATCH_STATE_URL holds the password', async () => {
    const file = await env.manifest({ name: 'walk', tasks: images(6), budget: 100 });
    const secret = { MEDIABATCH_STATE_URL: url };
    const first = await mediabatch(['run', file, '--yes', '--allow-local-output', '--limit', '2'], secret);
    expect(first.code).toBe(4);
    expect(`${first.stdout}${first.stderr}`).not.toContain(PASSWORD);
    const words = printedCommand(reason(first));
    expect(words).toEqual([
      'run',
      'batch.yaml',
      '--run-id',
      'walk',
      '--state',
      shown,
      '--allow-local-output',
    ]);
    expect(env.state().jobs).toHaveLength(2);

    // Typed as printed, in the same shell, and confirmed: it continues the run and sends the other four.
    const typed = await mediabatch(words, secret, async () => true);
    expect([typed.code, typed.stderr]).toEqual([0, '']);
    expect(env.state().jobs).toHaveLength(6);

    const status = await mediabatch(['status', 'walk', '--state', shown], secret);
    expect(status.stdout).toMatch(/Tasks: 6 \(6 done\)/);
    // Another database's password is not lent: the URL must name the same database.
    const other = await mediabatch(
      ['status', 'walk', '--state', shown.replace(/walk\d+$/, 'postgres')],
      secret,
    );
    expect([other.code, reason(other)]).toEqual([
      1,
      expect.stringContaining(
        `the PostgreSQL state at ${shown.replace(/walk\d+$/, 'postgres')} cannot be reached`,
      ),
    ]);
  });
});
