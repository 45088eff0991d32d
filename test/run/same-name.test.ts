// Two different manifests with the same `name:` name the same run on one state. The second is another
// batch, not the first one edited: refused in one line that says what to do, never merged into the first
// run (its tasks added to the first's, its report the two batches at once). The same manifest moved is
// the same batch and goes on; `--accept-changes` says a moved manifest was edited too. On SQLite here;
// on PostgreSQL in test/postgres/same-name.test.ts.
import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeRunEnv, type RunEnv, reason, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const still = (id: string) => ({ id, model: 'flat-image', input: { prompt: `a photo of ${id}` } });

describe('two manifests with the same name on one state', () => {
  it('refuses the second (another batch) in one line, exit 1, nothing sent; its own name runs it apart', async () => {
    env = await makeRunEnv();
    const e = env;
    await e.manifest({ name: 'same', tasks: [still('mug')] }, 'mugs.yaml');
    await e.manifest({ name: 'same', tasks: [still('cap')] }, 'caps.yaml');
    expect((await e.run(['run', 'mugs.yaml', '--yes'])).code).toBe(0);

    // `plan` says so first, and weighs the manifest as a new run.
    const plan = await e.run(['plan', 'caps.yaml']);
    expect(plan.code).toBe(0);
    expect(plan.stdout).toContain(
      'Run same was started from mugs.yaml: `run` refuses another manifest under that run id (unless it is mugs.yaml moved); give this one a `name:` of its own, or --run-id and another id.',
    );
    expect(plan.stdout).not.toContain('Run same exists');
    const json = JSON.parse((await e.run(['plan', 'caps.yaml', '--json'])).stdout);
    expect(json.runOfAnotherManifest).toEqual({ id: 'same', manifest: 'mugs.yaml' });
    expect(json.existingRun).toBeUndefined();

    const second = await e.run(['run', 'caps.yaml', '--yes']);
    expect(second.code).toBe(1);
    expect(reason(second)).toBe(
      'run same was started from mugs.yaml, and caps.yaml is another batch with the same run id (its tasks or requests differ): give caps.yaml a `name:` of its own, or run it with --run-id and another id; if it is mugs.yaml moved and edited, --accept-changes goes on with run same',
    );
    expect(taskStates(e, 'same')).toEqual({ mug: 'done' });
    expect(e.state().jobs).toHaveLength(1);

    // As the line says: a run id of its own.
    const apart = await e.run(['run', 'caps.yaml', '--yes', '--run-id', 'same-2']);
    expect(apart.code).toBe(0);
    expect(taskStates(e, 'same-2')).toEqual({ cap: 'done' });
    expect(taskStates(e, 'same')).toEqual({ mug: 'done' });
    expect(e.state().jobs).toHaveLength(2);
  });

  it('refuses it while the first is unfinished too: nothing of either is sent by the second', async () => {
    env = await makeRunEnv();
    const e = env;
    await e.manifest({ name: 'same', tasks: [still('mug'), still('cup')] }, 'mugs.yaml');
    await e.manifest({ name: 'same', tasks: [still('cap')] }, 'caps.yaml');
    expect((await e.run(['run', 'mugs.yaml', '--yes', '--limit', '1'])).code).toBe(4);
    const second = await e.run(['run', 'caps.yaml', '--yes']);
    expect(second.code).toBe(1);
    expect(reason(second)).toMatch(/^run same was started from mugs\.yaml, and caps\.yaml is another batch/);
    expect(Object.keys(taskStates(e, 'same')).sort()).toEqual(['cup', 'mug']);
    expect(e.state().jobs).toHaveLength(1);
  });

  it('goes on with the same manifest moved; --accept-changes goes on with one moved and edited', async () => {
    env = await makeRunEnv();
    const e = env;
    await e.manifest({ name: 'same', tasks: [still('mug'), still('cup')] }, 'mugs.yaml');
    expect((await e.run(['run', 'mugs.yaml', '--yes', '--limit', '1'])).code).toBe(4);
    await mkdir(join(e.dir, 'moved'));
    await copyFile(join(e.dir, 'mugs.yaml'), join(e.dir, 'moved', 'mugs.yaml'));
    const moved = await e.run(['run', 'moved/mugs.yaml', '--yes']);
    expect(moved.stderr).toBe('');
    expect(moved.code).toBe(0);
    expect(taskStates(e, 'same')).toEqual({ mug: 'done', cup: 'done' });

    await e.manifest({ name: 'same', tasks: [still('mug'), still('cup'), still('bowl')] }, 'moved/mugs.yaml');
    const edited = await e.run(['run', 'moved/mugs.yaml', '--yes']);
    expect(edited.code).toBe(1);
    const accepted = await e.run(['run', 'moved/mugs.yaml', '--yes', '--accept-changes']);
    expect(accepted.code).toBe(0);
    expect(taskStates(e, 'same')).toEqual({ mug: 'done', cup: 'done', bowl: 'done' });
    expect(e.state().jobs).toHaveLength(3);
  });
});
