// Chains before the run. Every problem of a chain is located (missing upstreams, cycles, a task
// waiting for itself, references to what the upstream does not make, references without `after`), and a
// downstream is priced exactly where its upstream's request decides the length, else as a range.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
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
        'm.yaml:14:12  2 tasks (avatar-1, avatar-2)  after: names task "voices-1", which this manifest does not make (after expansion); check the id template',
        'm.yaml:22:12  task loop-b  after: makes a cycle: loop-a → loop-b → loop-a; a task cannot wait for a task that waits for it',
        'm.yaml:26:23  task lone  input.prompt: "after.sheet.name" takes the result of an earlier task, which this task does not name: add after: "<task id>" to it',
        'm.yaml:30:23  task named  input.prompt: "after.still.image" must name one of this task\'s upstreams (after.hero), like {{after.hero.image}}',
        'm.yaml:34:56  task song2  input.audio_id: {{after.songs.1.audio_id}} cannot be filled in: voice is a speech-v3 task, which makes one audio, not songs',
        'm.yaml:37:12  task self  after: names the task itself; a task cannot wait for its own result',
        'm.yaml:38:23  task self  input.prompt: {{after.files.2}} cannot be filled in: self is a flat-image task, which makes one image: there is no file 2 (files.1)',
      ]);
    });
  }

  it('name a bad upstream name as such, not as a wrong kind of after', async () => {
    const text = `version: 1
name: m
tasks:
  - { id: a, model: flat-image, input: { prompt: a } }
  - { id: b, model: flat-image, after: { "the still": a }, input: { prompt: b } }
`;
    expect(await problems(text, 'validate')).toEqual([
      'm.yaml:5:55  tasks.1.after.the still: the name must contain only letters, digits, - and _, got "the still"',
    ]);
  });

  it('say which part of a result a placeholder may name', async () => {
    const text = `version: 1
name: m
tasks:
  - { id: a, model: flat-image, input: { prompt: a } }
  - { id: b, model: flat-image, after: a, input: { prompt: "{{after.picture}}" } }
`;
    expect(await problems(text, 'validate')).toEqual([
      'm.yaml:5:61  task b  input.prompt: "after.picture" names no part of a result; what follows "after." is one of image, video, audio, files.N, img_uuid, songs.N.audio_id (or .title, .style, .lyrics, .audio_duration) or sheet.<key>; N counts from 1 (files.1 is the first file, songs.1 the first song)',
    ]);
  });

  it('say that files.N counts from 1 when a placeholder asks for files.0', async () => {
    const text = `version: 1
name: m
tasks:
  - { id: a, model: flat-image, input: { prompt: a } }
  - { id: b, model: flat-image, after: { still: a }, input: { prompt: "{{after.still.files.0}}" } }
`;
    expect(await problems(text, 'validate')).toEqual([
      'm.yaml:5:72  task b  input.prompt: "after.still.files.0" names no part of a result (files.0: N counts from 1, so the first is after.still.files.1); what follows "after.still." is one of image, video, audio, files.N, img_uuid, songs.N.audio_id (or .title, .style, .lyrics, .audio_duration) or sheet.<key>; N counts from 1 (files.1 is the first file, songs.1 the first song)',
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

describe('chains: a lone reference stands for a valid value of the field it fills', () => {
  it('a sheet field for an enum or an integer, a song length for a bounded number: valid; a link for an enum: located, naming the reference', async () => {
    const text = `version: 1
name: m
tasks:
  - { id: hero, model: oc-maker, input: { prompt: "JSON with name and oc_prompt", image_render_model: render-a } }
  - { id: poster, model: flat-image, after: hero, input: { prompt: "{{after.sheet.oc_prompt}}", ratio: "{{after.sheet.oc_ratio}}" } }
  - { id: waifu, model: anime-waifu, after: hero, input: { prompt: "{{after.sheet.name}}", seed: "{{after.sheet.seed}}" } }
  - { id: song, model: song-replace-section, input: { audio_url: "https://example.org/s.mp3", infill_start_s: 0, infill_end_s: 10, lyrics: a, full_lyrics: b, style: c, title: d } }
  - { id: swap, model: video-face-swap, after: song, input: { reference_video: "https://example.org/v.mp4", reference_img: "https://example.org/f.png", start_time: 2, end_time: "{{after.songs.1.audio_duration}}", upscaler: 1 } }
  - { id: bridge, model: song-replace-section, after: song, input: { task_id: "{{after.img_uuid}}", audio_id: "{{after.songs.1.audio_id}}", infill_start_s: 20, infill_end_s: "{{after.songs.1.audio_duration}}", lyrics: a, full_lyrics: b, style: c, title: d } }
`;
    await writeFile(join(dir, 'm.yaml'), text);
    const plan = await planStreamed('m.yaml', { cwd: dir, now: NOW });
    const byId = new Map([...plan.tasks].map((t) => [t.spec.id, t]));
    // The request keeps the references as written, to be filled in at submission.
    expect(byId.get('poster')?.wire.ratio).toBe('{{after.sheet.oc_ratio}}');
    expect(byId.get('waifu')?.wire.seed).toBe('{{after.sheet.seed}}');
    expect(byId.get('swap')?.wire.end_time).toBe('{{after.songs.1.audio_duration}}');
    expect(byId.get('bridge')?.wire.infill_end_s).toBe('{{after.songs.1.audio_duration}}');

    const wrong = `version: 1
name: m
tasks:
  - { id: still, model: flat-image, input: { prompt: a } }
  - { id: clip, model: studio-2-6, after: still, input: { image_url: "{{after.image}}", resolution: "{{after.image}}", duration: 5 } }
  - { id: voice, model: speech-v3, after: still, input: { text: "{{after.img_uuid}}", speed: "{{after.img_uuid}}" } }
`;
    expect(await problems(wrong, 'validate')).toEqual([
      'm.yaml:5:101  task clip  input.resolution: must be 720p or 1080p, got {{after.image}}',
      'm.yaml:6:94  task voice  input.speed: must be a number from 0.7 to 1.2, got {{after.img_uuid}}',
    ]);
  });
});

describe('chains: a priced field filled in from the upstream', () => {
  it('is priced over every value it may take, naming the upstream; a field that does not change the price stays exact', async () => {
    await writeFile(
      join(dir, 'm.yaml'),
      `version: 1
name: m
tasks:
  - { id: song, model: song-replace-section, input: { audio_url: "https://example.org/s.mp3", infill_start_s: 0, infill_end_s: 10, lyrics: a, full_lyrics: b, style: c, title: d } }
  - { id: sing, model: speech-v3, after: song, input: { text: "{{after.songs.2.lyrics}}", voice: "{{after.songs.1.title}}" } }
  - { id: hero, model: oc-maker, input: { prompt: "JSON with name and oc_prompt", image_render_model: render-a } }
  - { id: intro, model: speech-v3, after: { who: hero }, input: { text: "Meet {{after.who.sheet.name}}." } }
  - { id: poster, model: flat-image, after: hero, input: { prompt: "{{after.sheet.oc_prompt}}", ratio: "{{after.sheet.oc_ratio}}" } }
  - { id: clip, model: studio-2-6, after: hero, input: { prompt: "{{after.sheet.oc_prompt}}", duration: "{{after.sheet.seconds}}", resolution: 720p } }
`,
    );
    const plan = await planStreamed('m.yaml', { cwd: dir, now: NOW });
    const byId = new Map([...plan.tasks].map((t) => [t.spec.id, t]));
    // 1 to 5000 characters: 1 to 25 units of 2 tokens, whatever the placeholder's own length.
    expect(byId.get('sing')?.estimate).toMatchObject({ tokens: 50, min: 2, max: 50 });
    expect(byId.get('sing')?.estimate.basis).toBe(
      'up to 5000 characters = 25 units of 200 × 2 tokens; text takes {{after.songs.2.lyrics}}: known once song (song-replace-section) is done, priced exactly then',
    );
    expect(byId.get('intro')?.estimate).toMatchObject({ min: 2, max: 50 });
    expect(byId.get('intro')?.estimate.basis).toContain(
      'text takes {{after.who.sheet.name}}: known once hero (oc-maker) is done',
    );
    expect(byId.get('poster')?.estimate).toMatchObject({ tokens: 0.2, min: 0.2, max: 0.2 });
    // 5 or 10 s at 2.1 tokens.
    expect(byId.get('clip')?.estimate).toMatchObject({ tokens: 21, min: 10.5, max: 21 });
    expect(plan.totals.max).toBe(1.63 + 50 + 2 + 50 + 0.2 + 21);
  });
});

describe('chains: long ones', () => {
  it('a chain of 20,000 tasks written downstream first is checked without running out of stack', async () => {
    const rows = ['n,prev'];
    for (let n = 20_000; n >= 1; n--) rows.push(`${n},${n - 1}`);
    await writeFile(join(dir, 'chain.csv'), `${rows.join('\n')}\n`);
    await writeFile(
      join(dir, 'm.yaml'),
      `version: 1
name: m
tasks:
  - { id: s-0, model: flat-image, input: { prompt: start } }
  - { id: "s-{{row.n}}", model: flat-image, foreach: chain.csv, after: "s-{{row.prev}}", input: { prompt: "{{after.image}} {{row.n}}" } }
`,
    );
    const checked = await loadChecked('m.yaml', { cwd: dir, now: NOW });
    expect(checked.tasks.length).toBe(20_001);
    // And a cycle at the end of such a chain is still named in full.
    await writeFile(join(dir, 'chain.csv'), 'n,prev\n3,2\n2,1\n1,3\n');
    expect(await problems(await readFile(join(dir, 'm.yaml'), 'utf8'), 'validate')).toEqual([
      'm.yaml:5:72  task s-1  after: makes a cycle: s-3 → s-2 → s-1 → s-3; a task cannot wait for a task that waits for it',
    ]);
  });
});

describe('chains: manifests/pipeline.yaml', () => {
  it('plans with the spec’s exact prices, and a range naming the speech for each talking avatar', async () => {
    const manifests = join(import.meta.dirname, '..', '..', 'manifests');
    const plan = await planStreamed('pipeline.yaml', { cwd: manifests, now: NOW });
    const prices = Object.fromEntries(
      [...plan.tasks].map((t) => [t.spec.id, `${t.estimate.min}–${t.estimate.max}`]),
    );
    expect(prices).toEqual({
      'hero-mug': '0.2–0.2', // flat-image: 0.2 per image
      'hero-cap': '0.2–0.2',
      'clip-mug': '10.5–10.5', // studio-2-6: 5 s × 2.1 (720p, no audio)
      'clip-cap': '10.5–10.5',
      'voice-1': '2–2', // speech-v3: 59 characters, one unit of 200 × 2
      'voice-2': '2–2', // 46 characters
      'avatar-1': '3–60', // loop: as long as the speech, 3 to 60 s × 1 (540p)
      'avatar-2': '3–60',
      jingle: '1.63–1.63', // song-replace-section: 1.63 per request
      'jingle-bridge': '1.63–1.63',
    });
    const avatar = [...plan.tasks].find((t) => t.spec.id === 'avatar-2');
    expect(avatar?.estimate.basis).toContain(
      'length of {{after.audio}} known once voice-2 (speech-v3) is done, priced exactly then',
    );
    expect(plan.totals).toMatchObject({ min: 34.66, max: 148.66 });
    // The worst case fits the manifest's budget of 150.
    expect(plan.settings.budget).toBe(150);
  });
});

describe('chains: an upstream with a problem of its own', () => {
  for (const via of ['validate', 'plan'] as const) {
    it(`is not also called missing for each downstream; a really missing one still is (${via})`, async () => {
      await writeFile(join(dir, 'lines.csv'), 'n,text\n1,Hello\n2,Bye\n');
      const text = `version: 1
name: m
tasks:
  - { id: "voice-{{row.n}}", model: speech-v3, foreach: lines.csv, input: { text: "{{row.words}}" } }
  - { id: "avatar-{{row.n}}", model: ai-talking-avatar-video, foreach: lines.csv, after: "voice-{{row.n}}", input: { video_url: "https://example.org/a.mp4", audio_url: "{{after.audio}}" } }
  - { id: clip, model: studio-2-6, after: stil, input: { image_url: "{{after.image}}", duration: 5, resolution: 720p } }
`;
      expect(await problems(text, via)).toEqual([
        'm.yaml:4:84  2 tasks (voice-1, voice-2)  input.text: "row" has no field "words"; its fields are: n, text',
        'm.yaml:6:43  task clip  after: names task "stil", which this manifest does not make (after expansion); check the id template',
      ]);
    });
  }
});
