// `mediabatch run --state postgres://…` end to end: the CLI against the sandbox over HTTP, its state in a
// real PostgreSQL server started for this file. The money in the database equals the sandbox's books;
// a second run of the same manifest resumes the run and sends nothing again; status reads the same run
// through MEDIABATCH_STATE_URL; the password of the URL is never printed.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EXIT, RunError, run } from '../../src/index.js';
import { openStore } from '../../src/store/index.js';
import { spawnCli } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import {
  FAST_POLLS,
  images,
  makeRunEnv,
  type RunEnv,
  reason,
  SANDBOX_KEY,
  walk,
} from '../helpers/run-env.js';

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

const PASSWORD = 'pw-SENTINEL-4e1d';
let env: RunEnv;
let url: string;
beforeEach(async () => {
  env = await makeRunEnv({ balance: 1000 });
  // The test server trusts loopback, so any password is accepted: one that must never be written anywhere.
  url = pg.freshDatabase().replace('postgres@', `postgres:${PASSWORD}@`);
});
afterEach(async () => {
  await env.close();
});

function mediabatch(args: string[], extraEnv: Record<string, string> = {}) {
  return cli(args, {
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

describe('a run whose state is in PostgreSQL', () => {
  it('runs, books every charge the sandbox made, and resumes without sending anything again', async () => {
    const file = await env.manifest({ name: 'pgrun', budget: 500, tasks: images(8) });
    const first = await mediabatch(['--state', url, 'run', file, '--yes', '--allow-local-output']);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);

    const jobs = env.state().jobs;
    expect(jobs).toHaveLength(8);
    // In micro-tokens, as money is kept: the sandbox's doubles added up carry float noise (1.5999…).
    const sandboxNet = jobs.reduce((n, j) => n + Math.round(j.cost * 1e6) - Math.round(j.refunded * 1e6), 0);
    const store = openStore(url);
    try {
      expect(store.tasks.countTasksByState('pgrun').done).toBe(8);
      expect(Math.round(store.ledger.runSpent('pgrun').net * 1e6)).toBe(sandboxNet);
    } finally {
      store.close();
    }
    const files = (await walk(`${env.dir}/out`)).filter((f) => f.endsWith('.png'));
    expect(files).toHaveLength(8);

    for (const path of await walk(env.dir)) {
      expect(readFileSync(join(env.dir, path)).includes(PASSWORD), path).toBe(false);
    }
    expect(`${first.stdout}${first.stderr}`).not.toContain(PASSWORD);
    // The run folder's mark names the database it belongs to, without the password.
    const mark = JSON.parse(readFileSync(join(env.dir, 'out', 'pgrun', '.mediabatch-run.json'), 'utf8'));
    expect(mark.state_file).toBe(url.replace(PASSWORD, '***').replace(/\?.*$/, ''));

    const again = await mediabatch(['--state', url, 'run', file, '--yes', '--allow-local-output']);
    expect(again.code).toBe(0);
    expect(env.state().jobs).toHaveLength(8);

    const status = await mediabatch(['status', 'pgrun'], { MEDIABATCH_STATE_URL: url });
    expect(status.code).toBe(0);
    expect(status.stdout).toContain('pgrun');
    expect(status.stdout).toMatch(/8 done/);
  });

  it('keeps the budget as a hard cap: the database refuses the spend that would pass it, nothing held after', async () => {
    const file = await env.manifest({ name: 'pgcap', tasks: images(5), budget: 0.5, concurrency: 4 });
    const result = await mediabatch([
      '--state',
      url,
      'run',
      file,
      '--yes',
      '--allow-partial',
      '--allow-local-output',
    ]);
    expect(result.code).toBe(4);
    const shown = url.replace(`:${PASSWORD}`, '');
    expect(reason(result)).toBe(
      // A run on PostgreSQL is a fleet (of one here): the tasks it gives up on are said together.
      `3 task(s) did not fit under the budget of 0.5 tokens (0.1 tokens left; they need up to 0.6 tokens): raise budget and run again to continue: \`mediabatch run batch.yaml --run-id pgcap --state '${shown}' --allow-local-output --allow-partial\``,
    );
    const jobs = env.state().jobs;
    expect(jobs).toHaveLength(2);
    expect(jobs.reduce((n, j) => n + j.cost, 0)).toBeLessThanOrEqual(0.5);
    const store = openStore(url);
    try {
      // In micro-tokens: the ledger's charges, and no worst case left reserved by a finished runner.
      expect(store.reservations.figures('pgcap')).toEqual({
        budget: 500_000,
        charged: jobs.reduce((n, j) => n + Math.round(j.cost * 1_000_000), 0),
        refunded: 0,
        held: 0,
        doubt: 0,
      });
    } finally {
      store.close();
    }
    expect(`${result.stdout}${result.stderr}`).not.toContain(PASSWORD);

    // The run keeps why it stopped, in the database: status says which limit, in the run's own words.
    const status = await mediabatch(['--state', url, 'status', 'pgcap', '--json']);
    expect(JSON.parse(status.stdout).stopped).toMatchObject({
      reason: 'budget',
      message:
        '3 task(s) did not fit under the budget of 0.5 tokens (0.1 tokens left; they need up to 0.6 tokens): raise budget and run again to continue',
    });
    const text = await mediabatch(['--state', url, 'status', 'pgcap']);
    expect(text.stdout).toContain("  Stopped (the run's budget) at ");
  });

  it('names the server it cannot reach in one line, without the password, and exits as for a state it cannot use', async () => {
    const file = await env.manifest({ name: 'pgrun', tasks: images(1) });
    const port = pg.port + 1;
    const r = await mediabatch([
      '--state',
      `postgres://mb:s3cret-pw@127.0.0.1:${port}/nowhere?connect_timeout=2`,
      'run',
      file,
      '--yes',
      '--allow-local-output',
    ]);
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBe(70);
    expect(r.stderr).toContain(
      `the PostgreSQL state at postgres://mb:***@127.0.0.1:${port}/nowhere cannot be reached`,
    );
    expect(`${r.stdout}${r.stderr}`).not.toContain('s3cret-pw');
    expect(env.state().jobs).toHaveLength(0);
  });
});

describe("the library's run() on a PostgreSQL state", () => {
  it('refuses a local output folder as the CLI does, unless allowLocalOutput says the workers share it', async () => {
    const file = await env.manifest({ name: 'pglib', tasks: images(2) });
    const api = {
      cwd: env.dir,
      baseUrl: env.sandbox.baseUrl,
      apiKey: SANDBOX_KEY,
      stateFile: url,
      probe: false,
    };
    const refused = await run(file, api).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(RunError);
    expect((refused as RunError).exitCode).toBe(EXIT.invalid);
    expect((refused as RunError).message).toBe(
      `output: ${join(env.dir, 'out')} is a local folder, and the state is in PostgreSQL, where workers on other machines would write their results to their own disks: use a bucket (output: s3://bucket/prefix, or output: storage), or pass allowLocalOutput: true when every worker shares this disk`,
    );
    expect(env.state().jobs).toHaveLength(0);
    expect(await walk(env.dir)).not.toContain('out/pglib/.mediabatch-run.json');

    const ran = await run(file, { ...api, allowLocalOutput: true, timeScale: 0.01 });
    expect(ran.exitCode).toBe(EXIT.ok);
    expect(env.state().jobs).toHaveLength(2);
    expect((await walk(join(env.dir, 'out', 'pglib'))).filter((f) => f.endsWith('.png'))).toHaveLength(2);
  });

  it('refuses it in each run `schedule` fires on that state too, naming --allow-local-output', async () => {
    writeFileSync(
      join(env.dir, 'tick.yaml'),
      'version: 1\nname: tick\nrun: "{{name}}-{{datetime}}"\nschedule: "*/2 * * * * *"\ntimezone: UTC\noutput: out\ntasks:\n  - id: shot\n    model: flat-image\n    input: { prompt: "a mug" }\n',
    );
    const replica = spawnCli(['--state', url, 'schedule', 'tick.yaml', '--no-probe'], {
      cwd: env.dir,
      env: { MEDIABATCH_API_KEY: SANDBOX_KEY, MEDIABATCH_BASE_URL: env.sandbox.baseUrl },
    });
    try {
      const said = await Promise.race([
        replica.waitFor('when every worker shares this disk'),
        new Promise<false>((r) => setTimeout(() => r(false), 20_000)),
      ]);
      expect(said, `${replica.stdout()}${replica.stderr()}`).toBe(true);
      expect(replica.stdout()).toMatch(
        /^tick\.yaml: run tick-\S+ invalid: output: \S+ is a local folder, and the state is in PostgreSQL, where workers on other machines would write their results to their own disks: use a bucket \(output: s3:\/\/bucket\/prefix, or output: storage\), or pass --allow-local-output when every worker shares this disk$/m,
      );
      expect(env.state().jobs).toHaveLength(0);
    } finally {
      replica.proc.kill('SIGKILL');
      await replica.exited;
    }
  });

  it('keeps the embedded sandbox of a database state in one place: balance --sandbox sees what run --sandbox spent', async () => {
    const file = await env.manifest({ name: 'pgsand', tasks: images(2) });
    const ran = await mediabatch([
      '--state',
      url,
      'run',
      file,
      '--yes',
      '--sandbox',
      '--sandbox-speed',
      '0',
      '--allow-local-output',
    ]);
    expect(ran.code, ran.stderr).toBe(0);
    const spent = openStore(url);
    const net = spent.ledger.runSpent('pgsand').net;
    spent.close();
    expect(net).toBeGreaterThan(0);
    const balance = await mediabatch(['--state', url, 'balance', '--sandbox', '--json']);
    expect(balance.code, balance.stderr).toBe(0);
    const fresh = await mediabatch(['balance', '--sandbox', '--json']);
    expect(JSON.parse(balance.stdout).balance).toBeCloseTo(JSON.parse(fresh.stdout).balance, 6);
    expect(JSON.parse(fresh.stdout).balance).toBeLessThan(1000);

    // The library's sandbox run on that state keeps the same journal: the balance goes down from there.
    const before = JSON.parse(fresh.stdout).balance as number;
    const lib = await env.manifest({ name: 'pglibsand', tasks: images(6) }, 'lib.yaml');
    const ran2 = await run(lib, {
      cwd: env.dir,
      stateFile: url,
      sandbox: { speed: 0 },
      allowLocalOutput: true,
      probe: false,
    });
    expect(ran2.exitCode).toBe(EXIT.ok);
    const after = await mediabatch(['balance', '--sandbox', '--json']);
    expect(JSON.parse(after.stdout).balance).toBeLessThan(before);
    // Nothing named after the URL (its password in it) was made where the process runs.
    expect(existsSync(join(process.cwd(), 'postgres:'))).toBe(false);
  });
});
