// Every command mediabatch prints for a person works as printed: each hint is taken from the
// output, split into words by /bin/sh, and run in-process in the same folder, with the sandbox's key and
// base URL in the environment only where the user keeps them. It does what it says, against the same run,
// and never submits a task it did not promise: the sandbox's own books (POSTs, jobs) say so.
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { cli } from '../helpers/cli.js';
import { VARIANTS } from '../helpers/review-chain.js';
import { FAST_POLLS, hintIn, images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';
import { shellWords } from '../helpers/shell-words.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const lastLine = (text: string) => text.trim().split('\n').at(-1) ?? '';
const posts = (e: RunEnv) => e.state().requests.submit;
const jobsOf = (e: RunEnv, model: string) => e.state().jobs.filter((j) => j.model === model).length;

/** The person's shell in the run's folder: the key in the environment, the base URL in a config file. */
function shell(e: RunEnv) {
  const io = {
    cwd: e.dir,
    env: { MEDIABATCH_API_KEY: SANDBOX_KEY, MEDIABATCH_POLL_SCALE: FAST_POLLS },
    now: () => new Date(),
  };
  return {
    run: (args: string[]) => cli(args, io),
    /** A printed command, typed: a person at the terminal confirms when asked. */
    type: (line: string) => {
      const words = shellWords(line);
      expect(words[0]).toBe('mediabatch');
      return cli(words.slice(1), { ...io, ask: async () => true });
    },
  };
}

describe('hints typed as printed', () => {
  it('a reviewed chain with --state and --config: review, decide, continue, each as printed', async () => {
    env = await makeRunEnv();
    await writeFile(join(env.dir, 'acct.yaml'), stringify({ base_url: env.sandbox.baseUrl }));
    await mkdir(join(env.dir, 'my state'));
    const file = await env.manifest({ tasks: VARIANTS, concurrency: 8, budget: 400 });
    const sh = shell(env);
    const state = 'my state/chain.db';
    const first = await sh.run(['run', file, '--yes', '--state', state, '--config', 'acct.yaml']);
    expect(first.code).toBe(4);
    expect(posts(env)).toBe(4);
    const line = lastLine(first.stderr);
    expect(hintIn(line, 0)).toBe("mediabatch review batch --state 'my state/chain.db'");
    expect(hintIn(line, 1)).toBe(
      "mediabatch run batch.yaml --run-id batch --state 'my state/chain.db' --config acct.yaml",
    );

    // The review command lists what awaits, and ends with a decision that works as printed.
    const listed = await sh.type(hintIn(line, 0));
    expect(listed.code).toBe(0);
    const decideLine = listed.stdout.split('\n').find((l) => l.startsWith('Decide with: ')) ?? '';
    const decideCommand = decideLine.slice('Decide with: '.length);
    expect(decideCommand).toBe(
      "mediabatch review batch --state 'my state/chain.db' --approve still-mug-1,still-mug-2,still-mug-3",
    );
    const decided = await sh.type(decideCommand);
    expect(decided.code).toBe(0);
    expect(decided.stdout).toContain('approved still-mug-1\napproved still-mug-2\napproved still-mug-3\n');
    expect(posts(env)).toBe(4);

    // Its next step continues the same run: exactly the three approved stills' clips are sent.
    const cont = await sh.type(hintIn(decided.stdout));
    expect(cont.stdout).toContain('Resuming run batch');
    expect(posts(env)).toBe(7);
    expect(jobsOf(env, 'studio-2-6')).toBe(3);
    expect(cont.code).toBe(4);

    // The status hint names the review left; the report's too; both reach the run as printed.
    const status = await sh.type(`mediabatch status batch --state 'my state/chain.db'`);
    const reviewHint = hintIn(status.stdout.split('\n').find((l) => l.includes('Review:')) ?? '');
    expect(reviewHint).toBe("mediabatch review batch --state 'my state/chain.db'");
    const report = JSON.parse(await readFile(join(env.dir, 'out/batch/report.json'), 'utf8'));
    expect(report.run.invocation).toEqual({
      manifest: 'batch.yaml',
      state: 'my state/chain.db',
      config: 'acct.yaml',
    });
    const rejectAll = `${reviewHint} --reject still-mug-4`;
    expect((await sh.type(rejectAll)).code).toBe(0);
    // Nothing is left to send: the run command the report prints finishes the run, charging nothing.
    const advice = report.advice.find((a: string) => /awaits? review/.test(a)) ?? '';
    const done = await sh.type(hintIn(advice, 1));
    expect(done.code).toBe(0);
    expect(posts(env)).toBe(7);
  });

  it('a state with no run yet: the run it offers, its manifest filled in, starts there and nowhere else', async () => {
    env = await makeRunEnv();
    await writeFile(join(env.dir, 'acct.yaml'), stringify({ base_url: env.sandbox.baseUrl }));
    const file = await env.manifest({ tasks: images(3) });
    const sh = shell(env);
    const empty = await sh.run(['status', '--state', 'nightly/s.db', '--config', 'acct.yaml']);
    expect(empty.code).toBe(0);
    const offered = hintIn(empty.stdout);
    expect(offered).toBe('mediabatch run <manifest> --state nightly/s.db --config acct.yaml');
    const started = await sh.type(offered.replace('<manifest>', file));
    expect(started.code, started.stderr).toBe(0);
    expect(posts(env)).toBe(3);
    const listed = await sh.run(['status', '--state', 'nightly/s.db', '--json']);
    expect(
      (JSON.parse(listed.stdout).runs as Array<{ id: string; tasks: number }>).map((r) => r.tasks),
    ).toEqual([3]);
    // The default state file was not touched: the run is where the person was looking.
    const elsewhere = await sh.run(['status']);
    expect(elsewhere.stdout).toContain('No runs yet in state/mediabatch.db');
  });

  it('a re-roll of a still whose clip is done: the next run as printed sends the still alone', async () => {
    env = await makeRunEnv();
    const tasks = [
      { id: 'still', model: 'flat-image', review: true, input: { prompt: 'a mug' } },
      {
        id: 'clip',
        model: 'studio-2-6',
        after: 'still',
        input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
      },
    ];
    const file = await env.manifest({ tasks });
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    await env.run(['review', 'batch', '--approve', 'still']);
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    expect(posts(env)).toBe(2);
    // The clip is done: a re-roll of the still sends the still alone (the clip stays as it is).
    const asked: string[] = [];
    const reroll = await env.type(`mediabatch review batch --state ${env.db} --reroll still`, {
      ask: async (q) => {
        asked.push(q);
        return true;
      },
    });
    expect(reroll.code).toBe(0);
    expect(asked[0]).toMatch(
      /^Re-roll 1 result\(s\): up to [\d.]+ tokens? for the re-roll; the run's worst case goes from [\d.]+ to [\d.]+ tokens?; no budget is set\. Re-roll\? \[y\/N\] $/,
    );
    const next = await env.type(hintIn(reroll.stdout));
    expect(next.code).toBe(4);
    expect(posts(env)).toBe(3);
    expect(jobsOf(env, 'studio-2-6')).toBe(1);
  });

  it('a re-roll of a rejected still: its prompt counts the clip priced again and says the next run would refuse', async () => {
    env = await makeRunEnv();
    const tasks = [
      { id: 'still', model: 'flat-image', review: true, input: { prompt: 'a mug' } },
      {
        id: 'clip',
        model: 'studio-2-6',
        after: 'still',
        input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
      },
    ];
    const file = await env.manifest({ tasks, budget: 0.5 });
    expect((await env.run(['run', file, '--yes', '--allow-partial'])).code).toBe(4);
    await env.run(['review', 'batch', '--reject', 'still']);
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    expect(posts(env)).toBe(1);
    const asked: string[] = [];
    const reroll = await env.type(`mediabatch review batch --state ${env.db} --reroll still`, {
      ask: async (q) => {
        asked.push(q);
        return false;
      },
    });
    expect(reroll.code).toBe(3);
    const m =
      /^Re-roll 1 result\(s\): up to ([\d.]+) tokens? for the re-roll and 1 downstream task\(s\) priced again \(up to ([\d.]+) tokens? more\); the run's worst case goes from ([\d.]+) to ([\d.]+) tokens?; over the budget of 0\.5 tokens by ([\d.]+) tokens?: the next `run` would refuse to start \(it could cost up to ([\d.]+) tokens?\); re-roll fewer, reject the downstreams you do not need, or raise budget\. Re-roll\? \[y\/N\] $/.exec(
        asked[0] ?? '',
      );
    expect(m, asked[0]).not.toBeNull();
    const [own, clip, now, after] = [m?.[1], m?.[2], m?.[3], m?.[4]].map(Number);
    expect(now).toBe(own);
    expect(after).toBeCloseTo((own ?? 0) * 2 + (clip ?? 0), 6);
    // Not confirmed: nothing recorded, nothing sent; the run as printed has nothing to send.
    expect(env.query("SELECT verdict FROM decisions WHERE verdict = 'reroll'")).toEqual([]);
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    expect(posts(env)).toBe(1);
    // Confirmed anyway (--yes, warned): the next run refuses exactly as the prompt said, sending nothing.
    const forced = await env.run(['review', 'batch', '--reroll', 'still', '--yes']);
    expect(forced.stderr).toContain('warning: Re-roll 1 result(s)');
    const refused = await env.run(['run', file, '--yes']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(
      `the run can cost up to ${Math.round(((after ?? 0) - (own ?? 0)) * 1e6) / 1e6} tokens`,
    );
    expect(posts(env)).toBe(1);
  });

  it('tasks in doubt: status names the command that submits them again, and it submits those only', async () => {
    env = await makeRunEnv({ chargeThenErrorRate: 1, seed: 1 });
    const file = await env.manifest({ tasks: images(2), concurrency: 1 });
    const first = await env.run(['run', file, '--yes']);
    expect(first.code).toBe(2);
    env.sandbox.configure({ chargeThenErrorRate: 0 });
    const status = await env.type(hintIn(lastLine(first.stderr)));
    expect(status.code).toBe(0);
    const retry = hintIn(status.stdout.split('\n').find((l) => l.includes('in doubt: sent')) ?? '');
    expect(retry).toBe(`mediabatch run batch.yaml --run-id batch --state ${env.db} --retry-in-doubt`);
    expect(posts(env)).toBe(2);
    const again = await env.type(retry);
    expect(again.code).toBe(0);
    expect(posts(env)).toBe(4);
  });

  it('a run stopped by --limit: the printed command continues it without the limit', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(5), concurrency: 1 });
    const first = await env.run(['run', file, '--yes', '--limit', '2']);
    expect(first.code).toBe(4);
    const command = hintIn(lastLine(first.stderr));
    expect(command).toBe(`mediabatch run batch.yaml --run-id batch --state ${env.db}`);
    const rest = await env.type(command);
    expect(rest.code).toBe(0);
    expect(posts(env)).toBe(5);
  });

  it('a run started with --allow-partial: the printed command carries it, and continues within the budget', async () => {
    env = await makeRunEnv();
    // The budget holds three of the five images: the run is refused without --allow-partial.
    const file = await env.manifest({ tasks: images(5), concurrency: 1, budget: 0.6 });
    expect((await env.run(['run', file, '--yes'])).code).toBe(3);
    const first = await env.run(['run', file, '--yes', '--limit', '2', '--allow-partial']);
    expect(first.code).toBe(4);
    const command = hintIn(lastLine(first.stderr));
    expect(command).toBe(`mediabatch run batch.yaml --run-id batch --state ${env.db} --allow-partial`);
    const rest = await env.type(command);
    // It went on where the budget let it, and stopped there: three images paid, not five.
    expect(rest.stdout).not.toMatch(/refused/);
    expect(posts(env)).toBe(3);
    expect(rest.code).not.toBe(3);
  });

  it('three shards merged: inputs left byte-identical, and each missing or unfinished shard run as printed', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(12), concurrency: 2 });
    const shard = (i: number, ...more: string[]) =>
      cli(['run', file, '--yes', '--shard', `${i}/3`, '--state', `shard-${i}.db`, ...more], {
        cwd: env?.dir ?? '',
        env: {
          MEDIABATCH_API_KEY: SANDBOX_KEY,
          MEDIABATCH_BASE_URL: env?.sandbox.baseUrl ?? '',
          MEDIABATCH_POLL_SCALE: FAST_POLLS,
        },
        now: () => new Date(),
      });
    expect((await shard(1)).code).toBe(0);
    expect((await shard(2, '--limit', '1')).code).toBe(4);
    const sent = posts(env);
    // Kept as CI artifacts arrive: one folder per shard, each with its report.json.
    for (const i of [1, 2]) {
      await mkdir(join(env.dir, `shard-${i}`));
      await copyFile(
        join(env.dir, `out/batch/report.shard-${i}-of-3.json`),
        join(env.dir, `shard-${i}/report.json`),
      );
    }
    const inputs = ['shard-1/report.json', 'shard-2/report.json'];
    const before = await Promise.all(inputs.map((f) => readFile(join(env?.dir ?? '', f))));
    const refused = await env.run(['report', '--merge', ...inputs]);
    expect(refused.code).toBe(1);
    const elsewhere = hintIn(lastLine(refused.stderr));
    expect(elsewhere).toBe(
      'mediabatch report --merge shard-1/report.json shard-2/report.json --out batch-merged',
    );
    const merged = await env.type(elsewhere);
    expect(merged.code).toBe(4);
    const after = await Promise.all(inputs.map((f) => readFile(join(env?.dir ?? '', f))));
    expect(after).toEqual(before);
    const report = JSON.parse(await readFile(join(env.dir, 'batch-merged/report.json'), 'utf8'));
    expect(report.shards.commands).toEqual({
      '2': 'mediabatch run batch.yaml --shard 2/3 --run-id batch --state shard-2.db',
      '3': 'mediabatch run batch.yaml --shard 3/3 --run-id batch --state shard-1.db',
    });
    expect(lastLine(merged.stderr)).toContain(
      '`mediabatch run batch.yaml --shard 2/3 --run-id batch --state shard-2.db`',
    );
    expect(posts(env)).toBe(sent);
    // Each as printed: shard 2 goes on, shard 3 runs its own tasks; no task is sent twice, none left.
    for (const i of ['2', '3']) expect((await env.type(report.shards.commands[i])).code).toBe(0);
    expect(posts(env)).toBe(12);
    expect(new Set(env.state().jobs.map((j) => JSON.stringify(j.request))).size).toBe(12);
  });
});

describe('the embedded sandbox, typed as printed', () => {
  it('review --sandbox hints carry --sandbox; balance --sandbox shows the spend of both runs', async () => {
    env = await makeRunEnv();
    const reviewed = { id: 'still', model: 'flat-image', review: true, input: { prompt: 'a mug' } };
    const file = await env.manifest({ tasks: [reviewed, ...images(2)] });
    const other = await env.manifest({ name: 'other', tasks: images(3, 'pic') }, 'other.yaml');
    // No key, no base URL: a person trying the sandbox has none.
    const io = { cwd: env.dir, env: { MEDIABATCH_POLL_SCALE: FAST_POLLS }, now: () => new Date() };
    const words = (line: string) => shellWords(line).slice(1);
    const balanceNow = (out: string) =>
      Number(/Balance now: ([\d.,]+) tokens/.exec(out)?.[1]?.replaceAll(',', '') ?? Number.NaN);
    const first = await cli(['run', file, '--sandbox', '--sandbox-speed', '0', '--yes'], io);
    expect(first.code).toBe(4);
    const review = hintIn(lastLine(first.stderr));
    expect(review).toBe('mediabatch review batch --sandbox');
    const listed = await cli(words(review), io);
    const decide = listed.stdout.split('\n').find((l) => l.startsWith('Decide with: ')) ?? '';
    expect(decide).toBe('Decide with: mediabatch review batch --sandbox --approve still');
    expect((await cli(words(decide.slice('Decide with: '.length)), io)).code).toBe(0);

    const second = await cli(['run', other, '--sandbox', '--sandbox-speed', '0', '--yes'], io);
    expect(second.code).toBe(0);
    const [afterFirst, afterSecond] = [balanceNow(first.stdout), balanceNow(second.stdout)];
    expect(afterFirst).toBeLessThan(1000);
    expect(afterSecond).toBeLessThan(afterFirst);
    const balance = await cli(['balance', '--sandbox', '--json'], io);
    expect(balance.code).toBe(0);
    const shown = JSON.parse(balance.stdout) as { balance: number; ledger: Array<{ net: number }> };
    // Both runs' spend: 1,000 less the sandbox ledger of both (whole tokens, as the API answers).
    const spent = shown.ledger.reduce((n, p) => n + p.net, 0);
    expect(shown.balance).toBe(Math.floor(1000 - spent));
    expect(shown.balance).toBe(afterSecond);
    const text = await cli(['balance', '--sandbox'], io);
    expect(text.stdout.split('\n')[0]).toMatch(
      /^Balance: [\d,]+ tokens \(\$[\d.,]+\) in the embedded sandbox$/,
    );

    // --sandbox-reset starts the account afresh.
    const reset = await cli(['run', other, '--sandbox', '--sandbox-reset', '--yes'], io);
    expect(reset.code).toBe(0);
    expect(JSON.parse((await cli(['balance', '--sandbox', '--json'], io)).stdout).balance).toBe(1000);
  });
});
