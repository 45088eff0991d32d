// `run --json` writes one event per line on stdout, each valid against the versioned schema,
// ending with a summary; the human display goes to stderr. The schema file is generated and kept in sync.
import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { RUN_EVENTS_SCHEMA_FILE, runEventsSchemaText } from '../../scripts/write-schemas.js';
import { type RunEvent, runEventSchema } from '../../src/run/events.js';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

function events(stdout: string): RunEvent[] {
  return stdout
    .trim()
    .split('\n')
    .map((line) => runEventSchema.parse(JSON.parse(line)));
}

describe('run --json', () => {
  it('stdout holds only events: submitted and done per task, a failure with its refund, then the summary', async () => {
    env = await makeRunEnv({ failRate: 0.5, seed: 2 });
    const file = await env.manifest({ tasks: images(4), concurrency: 1 });
    const result = await env.run(['run', file, '--yes', '--json']);
    const list = events(result.stdout);
    expect(result.stderr).toContain('Run batch: ');
    const last = list[list.length - 1];
    expect(last).toMatchObject({ v: 1, event: 'summary', run: 'batch', exit_code: result.code });
    const submitted = list.filter((e) => e.event === 'submitted');
    expect(submitted.map((e) => e.task)).toEqual(['img-1', 'img-2', 'img-3', 'img-4']);
    const done = list.filter((e) => e.event === 'done');
    const failed = list.filter((e) => e.event === 'failed');
    expect(done.length + failed.length).toBe(4);
    expect(failed.length).toBeGreaterThan(0);
    for (const e of failed) expect(e).toMatchObject({ refunded: 0.2, retrying: false });
    for (const e of done) {
      if (e.event !== 'done') continue;
      expect(e.files).toHaveLength(1);
      expect(e.files[0]).toMatchObject({ kind: 'image' });
      expect(e.files[0]?.path).toMatch(/out\/batch\/img-\d\/1\.png$/);
    }
    if (last?.event === 'summary') expect(last.counts['done']).toBe(done.length);
  });

  it('the committed schema is the one generated from the zod schema', async () => {
    expect(await readFile(RUN_EVENTS_SCHEMA_FILE, 'utf8')).toBe(runEventsSchemaText());
  });
});
