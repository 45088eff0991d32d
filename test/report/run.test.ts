// A run driven by the real CLI against the in-process sandbox, then the report, status, report and
// balance commands checked against the sandbox's own account of the money (/_sandbox/state).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CSV_COLUMNS, type Report, reportSchema } from '../../src/report/index.js';
import { cli } from '../helpers/cli.js';
import { type RealRun, realRun } from './helpers.js';

const MANIFEST = `version: 1
name: money
concurrency: 4
output: out
tasks:
  - id: "img-{{index}}"
    model: flat-image
    repeat: 3
    input: { prompt: "A mug on a table, variant {{index}}", ratio: "1:1" }
  - id: broken
    model: flat-image
    input: { prompt: "SANDBOX_FAIL: this one fails and is refunded" }
  - id: voice
    model: speech-v3
    input: { text: "Hello from the report test.", voice: Alloy }
`;

let run: RealRun;
let report: Report;

beforeAll(async () => {
  run = await realRun({ manifest: () => MANIFEST, runId: 'money', sandbox: { discount: 0.25 } });
  expect(run.result.stderr).toContain('did not succeed');
  expect(run.result.code).toBe(2);
  // The run command writes the report at its end once wired; `report` (re)writes it in any case.
  const written = await run.mb(['report']);
  expect(written.code).toBe(0);
  report = JSON.parse(readFileSync(join(run.runDir, 'report.json'), 'utf8')) as Report;
}, 60_000);

afterAll(async () => {
  await run?.close();
});

describe('the cost report of a real run', () => {
  it('accounts for every token: charged − refunded is the sandbox balance change, task by task', () => {
    const state = run.sandbox.state();
    expect(report.totals.net.tokens).toBeCloseTo(1000 - state.balance, 6);
    expect(report.totals.jobs).toBe(state.jobs.length);
    for (const job of state.jobs) {
      const task = report.tasks.find((t) => t.img_uuid === job.img_uuid);
      expect(task, `job ${job.img_uuid}`).toBeDefined();
      expect(task?.charged).toBeCloseTo(job.cost, 6);
      expect(task?.refunded).toBeCloseTo(job.refunded, 6);
    }
    const sum = (f: (t: Report['tasks'][number]) => number) => report.tasks.reduce((n, t) => n + f(t), 0);
    expect(sum((t) => t.charged)).toBeCloseTo(report.totals.charged.tokens, 6);
    expect(sum((t) => t.refunded)).toBeCloseTo(report.totals.refunded.tokens, 6);
    expect(report.totals.net.usd).toBeCloseTo(report.totals.net.tokens * 0.02, 6);
  });

  it('shows the discount the account gets, per model and for the run', () => {
    expect(report.totals.charge_ratio).toBe(0.75);
    expect(report.totals.discount).toBe(0.25);
    for (const m of report.by_model) expect(m.discount).toBe(0.25);
    expect(report.by_model.map((m) => [m.model, m.tasks, m.by_status.done, m.by_status.failed])).toEqual([
      ['flat-image', 4, 3, 1],
      ['speech-v3', 1, 1, 0],
    ]);
  });

  it('lists each task with its estimate, money, times and files relative to the run folder', () => {
    const img = report.tasks.find((t) => t.id === 'img-1');
    expect(img).toMatchObject({
      model: 'flat-image',
      status: 'done',
      folder: 'img-1',
      estimate: { tokens: 0.2, min: 0.2, max: 0.2, assumed: false },
      charged: 0.15,
      refunded: 0,
      net: 0.15,
      jobs: 1,
      error: null,
    });
    expect(img?.files).toEqual([
      { path: 'img-1/1.png', kind: 'image', bytes: expect.any(Number), sha256: expect.any(String) },
    ]);
    for (const file of report.tasks.flatMap((t) => t.files)) {
      expect(readFileSync(join(run.runDir, file.path)).length).toBe(file.bytes);
    }
    expect(img?.submitted_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(img?.finished_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    const broken = report.tasks.find((t) => t.id === 'broken');
    expect(broken).toMatchObject({ status: 'failed', charged: 0.15, refunded: 0.15, net: 0, files: [] });
    expect(broken?.error).toMatch(/failed/);
    expect(report.advice.join('\n')).toMatch(/1 task failed; failed jobs were refunded/);
  });

  it('keeps the balance before and after, and the period spend of the key from the ledger', () => {
    expect(report.balance.before).toBe(1000);
    // user/tokens answers the balance rounded down; the exact figure is in /_sandbox/state.
    expect(report.balance.after).toBe(Math.floor(run.sandbox.state().balance));
    expect(report.quota.period).toBe(report.generated_at.slice(0, 7));
    expect(report.quota.keys).toHaveLength(1);
    expect(report.quota.keys[0]?.net).toBeCloseTo(report.totals.net.tokens, 6);
  });

  it('writes a report.json that the versioned schema accepts', () => {
    expect(reportSchema.safeParse(report).error).toBeUndefined();
    expect(report.version).toBe(2);
    expect(Date.parse(report.generated_at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('writes one CSV row per task that a CSV library reads back to the same figures', () => {
    const text = readFileSync(join(run.runDir, 'report.csv'), 'utf8');
    const rows = parseCsv(text, { columns: true }) as Record<string, string>[];
    expect(Object.keys(rows[0] ?? {})).toEqual(CSV_COLUMNS.map((c) => c.name));
    expect(rows.map((r) => r['task_id'])).toEqual(report.tasks.map((t) => t.id));
    const net = rows.reduce((n, r) => n + Number(r['net_tokens']), 0);
    expect(net).toBeCloseTo(report.totals.net.tokens, 6);
    const broken = rows.find((r) => r['task_id'] === 'broken');
    expect(broken).toMatchObject({ status: 'failed', charged_tokens: '0.15', refunded_tokens: '0.15' });
    expect(rows.find((r) => r['task_id'] === 'img-2')?.['files']).toBe('img-2/1.png');
  });

  it('writes report.md with the cost table and the failures, and index.html', () => {
    const md = readFileSync(join(run.runDir, 'report.md'), 'utf8');
    expect(md).toContain('# Cost report: run `money`');
    expect(md).toMatch(
      /\| \*\*Total\*\* \| 5 \| 5 \| 4 \| 1 \| 0 \| 0 \| 2\.8 \| 2\.1 \| 0\.15 \| 1\.95 \| \$0\.04 \| 75% \|/,
    );
    expect(md).toMatch(/## Failed, rejected and blocked tasks[\s\S]*`broken`/);
    expect(existsSync(join(run.runDir, 'index.html'))).toBe(true);
  });
});

describe('status, report and balance', () => {
  it('status lists the runs with their tasks by state and net tokens', async () => {
    const out = await run.mb(['status']);
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^RUN\s+MANIFEST\s+STARTED\s+STATE\s+TASKS\s+NET TOKENS/);
    expect(out.stdout).toMatch(
      /money\s+manifest\.yaml\s+\S+ \S+ UTC\s+interrupted|money\s+manifest\.yaml\s+\S+ \S+ UTC\s+finished/,
    );
    expect(out.stdout).toContain('5 tasks: 4 done, 1 failed');
    const json = JSON.parse((await run.mb(['status', '--json'])).stdout) as {
      runs: { id: string; by_state: Record<string, number>; net: number }[];
    };
    expect(json.runs).toHaveLength(1);
    expect(json.runs[0]).toMatchObject({ id: 'money', tasks: 5, net: report.totals.net.tokens });
    expect(json.runs[0]?.by_state).toMatchObject({ done: 4, failed: 1, in_doubt: 0 });
  });

  it('status <run> shows the tasks by state and the failing ones with their errors', async () => {
    const out = await run.mb(['status', 'money']);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain('Tasks: 5 (4 done, 1 failed)');
    expect(out.stdout).toMatch(/estimated 2\.8, charged 2\.1, refunded 0\.15, net 1\.95 \(\$0\.04\)/);
    expect(out.stdout).toMatch(/broken\s+flat-image\s+failed\s+0\s+the job failed/);
    const json = JSON.parse((await run.mb(['status', 'money', '--json'])).stdout) as {
      problems: { id: string; state: string; error: string }[];
    };
    expect(json.problems).toEqual([
      expect.objectContaining({ id: 'broken', state: 'failed', error: expect.stringMatching(/failed/) }),
    ]);
  });

  it.each([[['status', 'nope']], [['report', 'nope']]])('%j exits 1 naming the known runs', async (argv) => {
    const out = await run.mb(argv);
    expect(out.code).toBe(1);
    expect(out.stdout).toBe('');
    expect(out.stderr).toBe(
      'mediabatch: run nope: not found in state/mediabatch.db; known runs, newest first: money\n',
    );
  });

  it('report prints report.md (or report.json with --json) and rewrites the four files', async () => {
    const out = await run.mb(['report', 'money']);
    expect(out.code).toBe(0);
    expect(out.stdout).toBe(readFileSync(join(run.runDir, 'report.md'), 'utf8'));
    expect(out.stderr).toBe('Wrote report.json, report.csv, report.md and index.html in out/money\n');
    const json = await run.mb(['report', '--json']);
    expect(JSON.parse(json.stdout)).toEqual({ ...report, generated_at: expect.any(String) });
  });

  it('balance shows the API balance, this key and the ledger per period', async () => {
    const out = await run.mb(['balance']);
    expect(out.code).toBe(0);
    const exact = run.sandbox.state().balance;
    expect(out.stdout).toContain(`Balance: ${Math.floor(exact)} tokens`);
    expect(out.stdout).toMatch(/API key fingerprint: [0-9a-f]{12}/);
    expect(out.stdout).toMatch(/\d{4}-\d\d\s+[0-9a-f]{12} \(this key\)\s+2\.1\s+0\.15\s+1\.95\s+\$0\.04/);
    expect(out.stdout).not.toContain('sandbox-key');
    const json = JSON.parse((await run.mb(['balance', '--json'])).stdout) as {
      balance: number;
      ledger: { net: number; this_key: boolean }[];
    };
    expect(json.balance).toBe(Math.floor(exact));
    expect(json.ledger).toEqual([expect.objectContaining({ net: 1.95, this_key: true })]);
  });

  it('balance without credentials still shows the ledger', async () => {
    const out = await run.mb(['balance'], {});
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^Balance: unknown \(no credentials: set MEDIABATCH_API_KEY/);
    expect(out.stdout).toMatch(/[0-9a-f]{12}\s+2\.1\s+0\.15\s+1\.95/);
  });

  it('balance exits 5 when the API refuses the key, after showing the ledger', async () => {
    const out = await run.mb(['balance'], { ...run.env, MEDIABATCH_API_KEY: 'wrong-key' });
    expect(out.code).toBe(5);
    expect(out.stderr).toMatch(/401/);
    expect(out.stdout).toContain('Ledger');
  });

  it('treats a missing state file as no runs yet, and creates no database', async () => {
    const argv = ['--state', 'elsewhere/none.db'];
    const io = { cwd: run.tmp, env: {} };
    const status = await cli([...argv, 'status'], io);
    expect(status).toMatchObject({ code: 0, stderr: '' });
    expect(status.stdout).toBe(
      'No runs yet in elsewhere/none.db: start one with `mediabatch run <manifest> --state elsewhere/none.db`.\n',
    );
    expect(JSON.parse((await cli([...argv, 'status', '--json'], io)).stdout)).toEqual({
      runs: [],
      scheduled: [],
    });
    const report = await cli([...argv, 'report'], io);
    expect(report.code).toBe(1);
    expect(report.stderr).toMatch(/^mediabatch: no runs yet in elsewhere\/none\.db: start one with/);
    const unknown = await cli([...argv, 'status', 'money'], io);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/run money: not found in elsewhere\/none\.db; there are no runs yet/);
    expect((await cli([...argv, 'balance'], io)).stdout).toContain('Ledger: no charges recorded');
    expect(existsSync(join(run.tmp, 'elsewhere'))).toBe(false);
  });
});
