import { EventEmitter } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { scheduleCommand } from '../../src/cli/commands/schedule.js';
import { ExitError } from '../../src/cli/errors.js';
import type { CliIO } from '../../src/cli/io.js';
import { loadConfig } from '../../src/config.js';
import { stampOf } from '../../src/manifest/clock.js';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { CronSchedule } from '../../src/schedule/next.js';
import type { Scheduler } from '../../src/schedule/scheduler.js';
import { openStore } from '../../src/store/index.js';
import { cli } from '../helpers/cli.js';
import { shellWords } from '../helpers/shell-words.js';
import { FakeClock } from './fake-clock.js';

let dir: string;
let sandbox: Sandbox | undefined;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mediabatch-schedule-cli-'));
});
afterEach(async () => {
  await sandbox?.close();
  sandbox = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** Two flat-image tasks (0.2 tokens each), fired every minute at second 0. */
function writeManifest(extra = ''): string {
  writeFileSync(
    join(dir, 'nightly.yaml'),
    [
      'version: 1',
      'name: nightly',
      'run: "{{name}}-{{datetime}}"',
      'schedule: "0 * * * * *"',
      'timezone: Europe/Berlin',
      'output: out',
      extra,
      'tasks:',
      '  - id: "shot-{{n}}"',
      '    model: flat-image',
      '    matrix: { n: [1, 2] }',
      '    input: { prompt: "A studio photo of mug {{n}}" }',
      '',
    ].join('\n'),
  );
  return 'nightly.yaml';
}

interface Started {
  done: Promise<number>;
  scheduler: Scheduler;
  clock: FakeClock;
  io: CliIO & { signals: EventEmitter };
  stdout: () => string;
  logLines: string[];
}

/** Starts `schedule` in-process on a fake clock near the real time (the ledger's period comes from the real one). */
async function startSchedule(
  manifest: string,
  sb: Sandbox,
  flags: { probe: false; allowPartial?: boolean } = { probe: false },
): Promise<Started> {
  const start = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 30_000);
  const clock = new FakeClock(start);
  let out = '';
  const env = { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: sb.baseUrl };
  const io = {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (out += s) },
    env,
    cwd: dir,
    now: clock.now,
    interactive: false,
    signals: new EventEmitter(),
  };
  const logLines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logLines.push(line) });
  const config = await loadConfig({ cwd: dir, env });
  let scheduler: Scheduler | undefined;
  const done = scheduleCommand([manifest], flags, {
    io,
    config,
    statePath: 'state/mediabatch.db',
    logger,
    timers: clock,
    pollScale: 0.01,
    onStarted: (s) => {
      scheduler = s;
    },
  });
  while (scheduler === undefined) await new Promise((r) => setImmediate(r));
  return { done, scheduler, clock, io, stdout: () => out, logLines };
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('mediabatch schedule against the sandbox', () => {
  it('with --allow-partial, a firing over what is left of budget_per_period runs and stops at the cap', async () => {
    sandbox = await startSandbox({ port: 0, speed: 0 });
    // Five images (1 token worst case) against a period cap of 0.5: refused without --allow-partial.
    writeFileSync(
      join(dir, 'capped.yaml'),
      [
        'version: 1',
        'name: capped',
        'run: "{{name}}-{{datetime}}"',
        'schedule: "0 * * * * *"',
        'output: out',
        'budget_per_period: 0.5',
        'concurrency: 1',
        'tasks:',
        '  - id: "shot-{{index}}"',
        '    model: flat-image',
        '    repeat: 5',
        '    input: { prompt: "A studio photo of mug {{index}}" }',
        '',
      ].join('\n'),
    );
    const s = await startSchedule('capped.yaml', sandbox, { probe: false, allowPartial: true });
    await s.clock.advance(30_000);
    await s.scheduler.idle();
    // Two images fit under 0.5 (0.4); the other three would pass it: left pending, the run stops resumable.
    expect(sandbox.state().jobs).toHaveLength(2);
    expect(1000 - sandbox.state().balance).toBeCloseTo(0.4, 6);
    expect(s.stdout()).toMatch(
      /3 task\(s\) did not fit under budget_per_period of 0\.5 tokens in \d{4}-\d\d \(0\.1 tokens left; they need up to 0\.6 tokens\)/,
    );
    s.io.signals.emit('SIGTERM');
    expect(await s.done).toBe(0);
    // The run keeps which limit stopped it: the manifest's budget_per_period, not a budget of its own.
    const store = openStore(join(dir, 'state/mediabatch.db'));
    try {
      expect(store.runs.listRuns().map((r) => r.stop?.reason)).toEqual(['period-budget']);
    } finally {
      store.close();
    }
  });

  it('the period budget stops a run: the second firing would pass budget_per_period and is refused, not fatal', async () => {
    sandbox = await startSandbox({ port: 0, speed: 0 });
    const file = writeManifest('budget_per_period: 0.5');
    const s = await startSchedule(file, sandbox);

    await s.clock.advance(30_000);
    await s.scheduler.idle();
    await s.clock.advance(60_000);
    await s.scheduler.idle();
    await s.clock.advance(60_000);
    await s.scheduler.idle();

    const store = openStore(join(dir, 'state/mediabatch.db'));
    try {
      const runs = store.runs.listRuns({ manifestPath: join(dir, file) });
      expect(runs.map((r) => r.state)).toEqual(['finished']);
      expect(
        store.ledger.manifestSpent(join(dir, file), runs[0]!.createdAt.toISOString().slice(0, 7)).net,
      ).toBeCloseTo(0.4);
    } finally {
      store.close();
    }
    expect(sandbox.state().jobs).toHaveLength(2);
    const refusals = s
      .stdout()
      .match(
        /run nightly-\S+ refused: budget_per_period: 0\.4 of 0\.5 tokens spent in \d{4}-\d\d, 0\.1 tokens left, but the run can cost up to 0\.4 tokens/g,
      );
    expect(refusals).toHaveLength(2);
    // It keeps running after a refusal: the next firing is announced, and a stop ends it cleanly.
    expect(s.stdout()).toMatch(/nightly\.yaml: next firing \S+\+01:00\n$/);
    expect(s.logLines.some((l) => JSON.parse(l).next_fire_at !== undefined)).toBe(true);
    s.io.signals.emit('SIGTERM');
    expect(await s.done).toBe(0);
  });

  it("two runs fired in one period: a re-roll each run's budget allows is refused by budget_per_period", async () => {
    sandbox = await startSandbox({ port: 0, speed: 0 });
    // Two reviewed images (0.4) a run, each run with a budget of 1; the period holds 0.9 for them all.
    const file = writeManifest('budget: 1\nbudget_per_period: 0.9\nreview: true');
    const s = await startSchedule(file, sandbox);
    const env = { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: sandbox.baseUrl };
    const review = (args: string[]) =>
      cli(['review', ...args, '--state', 'state/mediabatch.db'], {
        env,
        cwd: dir,
        now: s.clock.now,
        ask: async () => true,
      });
    const runs = () => {
      const store = openStore(join(dir, 'state/mediabatch.db'));
      try {
        return store.runs.listRuns({ manifestPath: join(dir, file) }).map((r) => [r.id, r.state]);
      } finally {
        store.close();
      }
    };

    // The first firing's run sends its images and waits for review; approved, the next firing finishes it.
    await s.clock.advance(30_000);
    await s.scheduler.idle();
    const first = runs()[0]?.[0] ?? '';
    expect((await review([first, '--approve', 'shot-1,shot-2'])).code).toBe(0);
    await s.clock.advance(60_000);
    await s.scheduler.idle();
    // The third firing starts a second run: 0.4 spent and 0.4 at worst fit 0.9.
    await s.clock.advance(60_000);
    await s.scheduler.idle();
    expect(runs()).toHaveLength(2);
    expect(sandbox.state().jobs).toHaveLength(4);

    // The first run's own budget holds a re-roll (0.4 + 0.2 of 1); the period does not (0.8 + 0.2 > 0.9).
    const refused = await review([first, '--reroll', 'shot-1']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(
      /^mediabatch: 1 decision\(s\) refused: shot-1 may cost up to 0\.2 tokens and budget_per_period of 0\.9 tokens leaves 0\.1 tokens in \d{4}-\d\d \(0\.8 tokens spent by the manifest's runs in \d{4}-\d\d, 0 tokens reserved for their tasks asked for, in flight or in doubt\): nothing was sent\n$/,
    );
    await s.clock.advance(60_000);
    await s.scheduler.idle();
    // Nothing was recorded, so nothing more was sent: 0.8 of 0.9 charged in the period.
    expect(sandbox.state().jobs).toHaveLength(4);
    expect(1000 - sandbox.state().balance).toBeCloseTo(0.8, 6);
    s.io.signals.emit('SIGTERM');
    expect(await s.done).toBe(0);
  });

  it('SIGTERM mid-run leaves a resumable run; `run` then resumes it and a second `run` says already complete', async () => {
    let sandboxNow = Date.now();
    sandbox = await startSandbox({ port: 0, speed: 1, now: () => sandboxNow });
    const file = writeManifest();
    const s = await startSchedule(file, sandbox);
    await s.clock.advance(30_000);
    const firedAt = s.clock.now();
    const sb = sandbox;
    await until('both tasks submitted', () => sb.state().jobs.length === 2);

    s.io.signals.emit('SIGTERM');
    const stopped = await s.done.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(stopped).toBeInstanceOf(ExitError);
    expect((stopped as ExitError).exitCode).toBe(4);
    expect((stopped as ExitError).message).toMatch(
      /interrupted run\(s\) nightly-\d{4}-\d\d-\d\dT\d{6} are resumable/,
    );

    const runId = (stopped as ExitError).message.match(/nightly-\d{4}-\d\d-\d\dT\d{6}/)![0];
    const store = openStore(join(dir, 'state/mediabatch.db'));
    try {
      expect(store.runs.getRun(runId)?.state).toBe('interrupted');
      expect(store.tasks.countTasksByState(runId).submitted).toBe(2);
      expect(store.schedules.getSchedule(join(dir, file))?.lastRunId).toBe(runId);
    } finally {
      store.close();
    }

    // The jobs finish while nobody watches; `run` under cron (no terminal) picks the run up again.
    sandboxNow += 60_000;
    const env = { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: sb.baseUrl };
    // The command the stop line printed, typed as printed (a person confirms: nothing is left to pay).
    const printed = /`(mediabatch run [^`]*)`/.exec((stopped as ExitError).message)?.[1] ?? '';
    expect(printed).toBe(`mediabatch run ${file} --run-id ${runId}`);
    const resumed = await cli(shellWords(printed).slice(1), { env, cwd: dir, now: () => firedAt });
    expect(resumed.stderr).toBe('');
    expect(resumed.stdout).toContain(`Resuming run ${runId}`);
    expect(resumed.code).toBe(0);
    const again = await cli(['run', file, '--no-probe'], { env, cwd: dir, now: () => firedAt });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`Run ${runId} is already complete: 2 done.`);
    expect(sb.state().jobs).toHaveLength(2);
  });
});

describe('a daily schedule with `run: "{{name}}-{{date}}"`', () => {
  it('fires a run of its own each day: two days, two runs, each sending its tasks', async () => {
    sandbox = await startSandbox({ port: 0, speed: 0 });
    writeFileSync(
      join(dir, 'daily.yaml'),
      [
        'version: 1',
        'name: daily',
        'run: "{{name}}-{{date}}"',
        'schedule: "0 3 * * *"',
        'timezone: Europe/Berlin',
        'output: out',
        'tasks:',
        '  - id: "shot-{{n}}"',
        '    model: flat-image',
        '    matrix: { n: [1, 2] }',
        '    input: { prompt: "A studio photo of mug {{n}}" }',
        '',
      ].join('\n'),
    );
    const s = await startSchedule('daily.yaml', sandbox);
    const parsed = CronSchedule.parse('0 3 * * *', 'Europe/Berlin');
    if (!parsed.ok) throw new Error(parsed.message);
    const [first, second] = parsed.schedule.upcoming(s.clock.now(), 2);
    for (const at of [first, second]) {
      await s.clock.advanceTo(at as Date);
      await s.scheduler.idle();
    }
    const dates = [first, second].map((at) => stampOf(at as Date, 'Europe/Berlin').date);
    const store = openStore(join(dir, 'state/mediabatch.db'));
    try {
      const runs = store.runs
        .listRuns()
        .map((r) => [r.id, r.state, store.tasks.countTasksByState(r.id).done]);
      expect(runs.sort()).toEqual(dates.map((d) => [`daily-${d}`, 'finished', 2]));
    } finally {
      store.close();
    }
    expect(sandbox.state().jobs).toHaveLength(4);
    expect(s.stdout()).toContain(`: run daily-${dates[1]}`);
    s.io.signals.emit('SIGTERM');
    expect(await s.done).toBe(0);
  });
});

describe('mediabatch schedule refuses to start', () => {
  it('lists every manifest that cannot be scheduled, with exit 1', async () => {
    writeFileSync(
      join(dir, 'plain.yaml'),
      'version: 1\nname: plain\ntasks:\n  - { id: a, model: flat-image, input: { prompt: hi } }\n',
    );
    writeFileSync(
      join(dir, 'bad.yaml'),
      'version: 1\nname: bad\nschedule: "61 * * * *"\ntasks:\n  - { id: a, model: flat-image, input: { prompt: hi } }\n',
    );
    const env = { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: 'http://127.0.0.1:9' };
    const result = await cli(['--state', 'nightly.db', 'schedule', 'plain.yaml', 'bad.yaml'], {
      env,
      cwd: dir,
    });
    expect(result.code).toBe(1);
    // The run it offers lands in the state the schedule would use.
    expect(result.stderr).toContain(
      'plain.yaml: schedule: missing: add e.g. `schedule: "0 3 * * *"` to the manifest, or start it with `mediabatch run plain.yaml --state nightly.db`',
    );
    expect(result.stderr).toContain(
      'bad.yaml: schedule: must be a valid cron expression, like "0 3 * * *", got "61 * * * *"',
    );
    expect(result.stderr).toContain(
      'mediabatch: 2 problem(s) in the manifests to schedule; fix them and start again',
    );
  });

  it('a manifest whose firings would share one run id: no `run:`, or `{{date}}` fired hourly', async () => {
    const tasks = 'tasks:\n  - { id: a, model: flat-image, input: { prompt: hi } }\n';
    writeFileSync(join(dir, 'same.yaml'), `version: 1\nname: same\nschedule: "30 2 * * *"\n${tasks}`);
    writeFileSync(
      join(dir, 'hourly.yaml'),
      `version: 1\nname: hourly\nrun: "{{name}}-{{date}}"\nschedule: "0 * * * *"\ntimezone: UTC\n${tasks}`,
    );
    const env = { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: 'http://127.0.0.1:9' };
    const now = () => new Date('2026-11-21T09:20:00Z');
    const result = await cli(['--state', 'nightly.db', 'schedule', 'same.yaml', 'hourly.yaml'], {
      env,
      cwd: dir,
      now,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      [
        'same.yaml: run: missing, so every firing is run same: the first firing finishes it and each later one finds it done and sends nothing; add e.g. `run: "{{name}}-{{date}}"` (`{{datetime}}` when it fires more than once a day) to the manifest',
        'hourly.yaml: run: "{{name}}-{{date}}" names the firings due 2026-11-21T10:00:00+00:00 and 2026-11-21T11:00:00+00:00 alike ({{date}} is 2026-11-21 for both): the second would find the first\'s run done and send nothing; use {{datetime}} instead of {{date}}',
        'mediabatch: 2 problem(s) in the manifests to schedule; fix them and start again',
        '',
      ].join('\n'),
    );
    // Refused before anything: no state was made.
    expect(existsSync(join(dir, 'nightly.db'))).toBe(false);
    // `validate` judges a manifest for `run`, which takes it: valid, with what `schedule` would refuse.
    const validated = await cli(['validate', 'same.yaml', 'hourly.yaml', '--json'], { env, cwd: dir, now });
    expect(validated.code).toBe(0);
    const verdicts = (JSON.parse(validated.stdout) as { manifests: Array<{ schedule?: string }> }).manifests;
    expect(verdicts[0]?.schedule).toMatch(/^run: missing, so every firing is run same: /);
    expect(verdicts[1]?.schedule).toMatch(/^run: "\{\{name\}\}-\{\{date\}\}" names the firings due /);
    const text = await cli(['validate', 'same.yaml'], { env, cwd: dir, now });
    expect(text.stdout).toBe(
      'same.yaml: valid, 1 task (1 flat-image)\n  `mediabatch schedule` refuses it: run: missing, so every firing is run same: the first firing finishes it and each later one finds it done and sends nothing; add e.g. `run: "{{name}}-{{date}}"` (`{{datetime}}` when it fires more than once a day) to the manifest\n',
    );
  });

  it('without an API key', async () => {
    writeManifest();
    const result = await cli(['schedule', 'nightly.yaml'], { env: {}, cwd: dir });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no API key: set MEDIABATCH_API_KEY');
  });
});
