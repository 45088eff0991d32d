// Issue 17: chains before the run. Every problem of a chain is located (missing upstreams, cycles, a task
// waiting for itself, references to what the upstream does not make, references without `after`), and a
// downstream is priced exactly where its upstream's request decides the length, else as a range.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatProblem } from '../../src/manifest/index.js';
import { loadChecked, ManifestProblemsError, planStreamed } from '../../src/plan/build.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-chains-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const NOW = new Date('2026-11-25T00:00:00Z');

async function problems(text: string, via: 'validate' | 'plan'): Promise<string[]> {
  await writeFile(join(dir, 'm.yaml'), text);
  try {
    if (via === 'validate') await loadChecked('m.yaml', { cwd: dir, now: NOW });
    else await planStreamed('m.yaml', { cwd: dir, now: NOW });
  } catch (error) {
    // In file order, as the CLI prints them.
    if (error instanceof ManifestProblemsError)
      return [...error.problems]
        .sort((a, b) => a.pos.line - b.pos.line || a.pos.col - b.pos.col)
        .map(formatProblem);
    throw error;
  }
  throw new Error('expected problems');
}

const BAD = `version: 1
name: bad
tasks:
  - id: voice
    model: speech-v3
    input: { text: "Hello" }
  - id: clip
    model: studio-2-6
    after: voice
    input: { prompt: "x", image_url: "{{after.video}}", duration: 5, resolution: 720p }
  - id: "avatar-{{row.n}}"
    model: ai-talking-avatar-video
    foreach: lines.csv
    after: "voices-{{row.n}}"
    input: { video_url: "https://example.org/a.mp4", audio_url: "{{after.audio}}" }
  - id: loop-a
    model: flat-image
    after: loop-b
    input: { prompt: "a" }
  - id: loop-b
    model: flat-image
    after: loop-a
    input: { prompt: "b" }
  - id: lone
    model: flat-image
    input: { prompt: "{{after.sheet.name}}" }
  - id: named
    model: flat-image
    after: { hero: voice }
    input: { prompt: "{{after.still.image}}" }
  - id: song2
    model: song-replace-section
    after: voice
    input: { task_id: "{{after.img_uuid}}", audio_id: "{{after.songs.1.audio_id}}", infill_start_s: 0, infill_end_s: 10, lyrics: a, full_lyrics: b, style: c, title: d }
  - id: self
    model: flat-image
    after: self
    input: { prompt: "{{after.files.2}}" }
`;

describe('chains: problems', () => {
  for (const via of ['validate', 'plan'] as const) {
    it(`are every one located, in file order (${via})`, async () => {
      await writeFile(join(dir, 'lines.csv'), 'n\n1\n2\n');
      expect(await problems(BAD, via)).toEqual([
        'm.yaml:10:39  task clip  input.image_url: {{after.video}} cannot be filled in: voice is a speech-v3 task, which makes one audio, not a video',
        'm.yaml:14:12  task avatar-1  after: names task "voices-1", which this manifest does not make (after expansion); check the id template (and 1 more task)',
        'm.yaml:22:12  task loop-b  after: makes a cycle: loop-a → loop-b → loop-a; a task cannot wait for a task that waits for it',
        'm.yaml:26:23  task lone  input.prompt: "after.sheet.name" takes the result of an earlier task, which this task does not name: add after: "<task id>" to it',
        'm.yaml:30:23  task named  input.prompt: "after.still.image" must name one of this task\'s upstreams (after.hero), like {{after.hero.image}}',
        'm.yaml:34:56  task song2  input.audio_id: {{after.songs.1.audio_id}} cannot be filled in: voice is a speech-v3 task, which makes one audio, not songs',
        'm.yaml:37:12  task self  after: names the task itself; a task cannot wait for its own result',
        'm.yaml:38:23  task self  input.prompt: {{after.files.2}} cannot be filled in: self is a flat-image task, which makes one image: there is no file 2 (files.1)',
      ]);
    });
  }

  it('say which part of a result a placeholder may name', async () => {
    const text = `version: 1
name: m
tasks:
  - { id: a, model: flat-image, input: { prompt: a } }
  - { id: b, model: flat-image, after: a, input: { prompt: "{{after.picture}}" } }
`;
    expect(await problems(text, 'validate')).toEqual([
      'm.yaml:5:61  task b  input.prompt: "after.picture" names no part of a result; after after comes image, video, audio, files.N, img_uuid, songs.N.audio_id (or .title, .style, .lyrics, .audio_duration) or sheet.<key>',
    ]);
  });
});

describe('chains: prices before the run', () => {
  it('are exact where the upstream decides the length, a range up to the maximum otherwise, naming the upstream', async () => {
    await writeFile(
      join(dir, 'm.yaml'),
      `version: 1
name: m
tasks:
  - { id: dance, model: ai_dance_move, after: clip, input: { image_url: "https://example.org/p.png", video_url: "{{after.video}}", resolution: 720p } }
  - { id: clip, model: studio-2-6, input: { prompt: "spin", duration: 10, resolution: 720p } }
  - { id: voice, model: speech-v3, input: { text: "Hello there" } }
  - { id: avatar, model: ai-talking-avatar-video, after: voice, input: { video_url: "https://example.org/a.mp4", audio_url: "{{after.audio}}", video_mode: loop, resolution: 540p } }
`,
    );
    const plan = await planStreamed('m.yaml', { cwd: dir, now: NOW });
    const byId = new Map([...plan.tasks].map((t) => [t.spec.id, t]));
    // A 10 s clip makes the dance 10 s at 720p; but a dance is at most 30 s: 10 is within.
    const dance = byId.get('dance')?.estimate;
    expect(dance?.min).toBe(dance?.max);
    expect(dance?.basis).toContain('{{after.video}}: 10 s, as clip (studio-2-6) is asked to make');
    expect(byId.get('dance')?.wire.video_url).toBe('{{after.video}}');
    const avatar = byId.get('avatar')?.estimate;
    expect(avatar).toMatchObject({ min: 3, max: 60, tokens: 60 });
    expect(avatar?.basis).toContain(
      'length of {{after.audio}} known once voice (speech-v3) is done, priced exactly then',
    );
    // Budget and preflight weigh the worst case.
    expect(plan.totals.max).toBeGreaterThanOrEqual(60);
  });
});
