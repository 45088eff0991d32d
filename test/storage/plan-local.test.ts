// `plan` with `file:` inputs: measured on the local disk (no network) and priced exactly.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWav } from '../../src/media/synth.js';
import { mediaMeasure, planManifest } from '../../src/plan/build.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-plan-local-'));
  await writeFile(join(dir, 'song.wav'), makeWav(12));
  await writeFile(join(dir, 'voice.wav'), makeWav(4));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const manifest = (song: string) => `version: 1
name: local
tasks:
  - id: cover
    model: voice-cover
    input: { audio_url: "${song}", reference_audio_url: "file:voice.wav" }
`;

describe('plan with local inputs', () => {
  it('measures file: inputs locally and prices them exactly', async () => {
    await writeFile(join(dir, 'm.yaml'), manifest('file:song.wav'));
    const plan = await planManifest('m.yaml', { cwd: dir, now: new Date(), measure: mediaMeasure() });
    const e = plan.tasks[0]?.estimate;
    expect(e).toMatchObject({ min: 0.24, max: 0.24, basis: '12 s (measured) × 0.02 tokens' });
  });

  it('a missing file is a located problem of the task', async () => {
    await writeFile(join(dir, 'm2.yaml'), manifest('file:nope.wav'));
    const plan = await planManifest('m2.yaml', { cwd: dir, now: new Date(), measure: mediaMeasure() }).catch(
      (e: unknown) => e,
    );
    expect((plan as { problems: unknown }).problems).toEqual([
      expect.objectContaining({
        taskId: 'cover',
        path: 'input.audio_url',
        message: 'file:nope.wav: no such file',
      }),
    ]);
  });
});
