// "already complete" is quick at any size because a report that is current is not written
// again; anything that moved since (a task, a charge, a file, a report file gone) writes it anew.
import { existsSync } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('a run found complete', () => {
  it('leaves a current report as it is, and writes it again once something changed', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(3) });
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    const report = join(env.dir, 'out/batch/report.json');
    const written = (await stat(report)).mtimeMs;

    const again = await env.run(['run', file, '--yes']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('Run batch is already complete: 3 done.');
    expect(again.stdout).toContain('Report: out/batch/report.md · gallery: out/batch/index.html');
    expect((await stat(report)).mtimeMs).toBe(written);

    // A report file that went missing is written again, all four of them.
    await rm(join(env.dir, 'out/batch/index.html'));
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    expect(existsSync(join(env.dir, 'out/batch/index.html'))).toBe(true);
    const rewritten = (await stat(report)).mtimeMs;
    expect(rewritten).toBeGreaterThan(written);

    // A new task runs, and the report that follows lists it.
    const more = await env.manifest({ tasks: images(4) });
    expect((await env.run(['run', more, '--yes'])).code).toBe(0);
    const json = JSON.parse(await import('node:fs/promises').then((fs) => fs.readFile(report, 'utf8'))) as {
      tasks: unknown[];
    };
    expect(json.tasks).toHaveLength(4);

    // Prices changed in the configuration: the estimates move, so the report is written again.
    const before = (await stat(report)).mtimeMs;
    await import('node:fs/promises').then((fs) =>
      fs.writeFile(
        join(env?.dir ?? '', 'mediabatch.config.yaml'),
        'prices:\n  flat-image: { perImage: 0.3 }\n',
      ),
    );
    const repriced = await env.run(['run', more, '--yes']);
    expect(repriced.code).toBe(0);
    expect((await stat(report)).mtimeMs).toBeGreaterThan(before);
  });
});
