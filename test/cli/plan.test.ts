import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { folder, lines } from './helpers.js';

const examples = readdirSync(join(import.meta.dirname, '..', '..', 'manifests'))
  .filter((name) => name.endsWith('.yaml'))
  .map((name) => `manifests/${name}`);

const TEXT_201 = 'a'.repeat(201);
const HOOK = 'https://hooks.example.org/mediabatch';
const M = 'https://media.example.com';

// One task of most kinds, with aliases, a callback, a matrix, and one length nobody knows.
const MIXED = `version: 1
name: mixed
budget: 200
callback_url: ${HOOK}
tasks:
  - id: "shot-{{n}}"
    model: flat-image
    matrix: { n: [1, 2, 3] }
    input: { prompt: "mug {{n}}", ratio: "1:1" }
  - id: speech
    model: speech-v3
    input: { text: "${TEXT_201}", voice: Ava }
  - id: studio
    model: studio-2-6
    input:
      prompt: "@1 says hello"
      image_url: ${M}/first.png
      voice_id: narrator
      generate_audio: true
      quality: 1080p
      duration: 10
  - id: cover
    model: voice-cover
    input:
      audio_url: ${M}/song.mp3
      reference_audio_url: ${M}/voice.wav
    media_seconds: 90.2
  - id: stream
    model: stream-2-0-fast
    input:
      prompt: a wave
      image_url: ${M}/wave.png
      resolution: 720p
      ratio: "16:9"
      duration: 5
      generate_audio: false
  - id: swap
    model: video-face-swap
    input:
      reference_video: ${M}/clip.mp4
      reference_img: ${M}/face.png
      start_time: 0
      end_time: 12
      upscaler: 2
  - id: avatar
    model: ai-talking-avatar-video
    input:
      video_url: ${M}/presenter.mp4
      audio_url: ${M}/speech.mp3
`;

// Figures from the spec's price rules, by hand.
const PRICES = {
  shot: 0.2, // 0.2 tokens per image
  speech: 4, // 201 characters = 2 units of 200, x 2 tokens
  studio: 84, // 10 s x 8.4 tokens (1080p, native audio + voice)
  cover: 1.82, // 90.2 s rounded up to 91 s x 0.02 tokens
  stream: 57.585, // 5 s x 10.47 tokens (720p) x 1.1 (generate_audio false)
  swap: 18, // (12 - 0) s x 1 token x 1.5 (upscaler 2), our assumed price
  avatarMin: 3, // 3 s x 1 token (540p), nothing measured
  avatarMax: 60, // up to the 60 s maximum
};
const FIXED = 3 * PRICES.shot + PRICES.speech + PRICES.studio + PRICES.cover + PRICES.stream + PRICES.swap;

// MIXED costs up to 226.005 tokens against a budget of 200: plan prints it all, then exits 3.
const OVER_BUDGET =
  'mediabatch: the plan does not fit: the run can cost up to 226.005 tokens but the budget of 200 tokens leaves 200 tokens (0 tokens charged already)\n';

async function planJson(text: string, extra: string[] = []) {
  const cwd = await folder({ 'm.yaml': text });
  const r = await cli(['plan', 'm.yaml', '--json', '--no-probe', ...extra], { cwd });
  const overBudget = text.startsWith('version: 1\nname: mixed\nbudget: 200\n');
  expect(r.stderr).toBe(overBudget ? OVER_BUDGET : '');
  expect(r.code).toBe(overBudget ? 3 : 0);
  return JSON.parse(r.stdout);
}

describe('plan --json', () => {
  it('lists every task with its endpoint, the exact body sent, and its estimate', async () => {
    const plan = await planJson(MIXED);
    expect(plan.run).toBe('mixed');
    expect(plan.tasks.map((t: { id: string }) => t.id)).toEqual([
      'shot-1',
      'shot-2',
      'shot-3',
      'speech',
      'studio',
      'cover',
      'stream',
      'swap',
      'avatar',
    ]);
    const byId = Object.fromEntries(plan.tasks.map((t: { id: string }) => [t.id, t]));
    expect(byId['shot-2']).toEqual({
      id: 'shot-2',
      model: 'flat-image',
      endpoint: '/api/v1/images/generations',
      body: { model: 'flat-image', prompt: 'mug 2', ratio: '1:1', custom_callback_url: HOOK },
      estimate: { tokens: 0.2, min: 0.2, max: 0.2, basis: '1 image × 0.2 tokens', assumedPrice: false },
    });
    expect(byId.speech.body).toEqual({
      model: 'speech-v3',
      text: TEXT_201,
      voice: 'Ava',
      custom_callback_url: HOOK,
    });
    // aliases are sent under their canonical names
    expect(byId.studio.body).toEqual({
      model: 'studio-2-6',
      prompt: '@1 says hello',
      image_url: `${M}/first.png`,
      voice_ids: ['narrator'],
      generate_audio: true,
      resolution: '1080p',
      duration: 10,
      custom_callback_url: HOOK,
    });
    expect(byId.stream.body).toEqual({
      model: 'stream-2-0-fast',
      prompt: 'a wave',
      image_urls: [`${M}/wave.png`],
      quality: '720p',
      aspect_ratio: '16:9',
      duration: 5,
      generate_audio: false,
      custom_callback_url: HOOK,
    });
    // the face swap endpoint has no model field
    expect(byId.swap.endpoint).toBe('/api/v1/videofaceswap/generate');
    expect(byId.swap.body).toEqual({
      reference_video: `${M}/clip.mp4`,
      reference_img: `${M}/face.png`,
      start_time: 0,
      end_time: 12,
      upscaler: 2,
      custom_callback_url: HOOK,
    });
    expect(byId.swap.estimate.assumedPrice).toBe(true);
    // key order on the wire does not matter, but every field does: no extra ones
    expect(Object.keys(byId.cover.body).sort()).toEqual([
      'audio_url',
      'custom_callback_url',
      'model',
      'reference_audio_url',
    ]);

    for (const [id, tokens] of [
      ['speech', PRICES.speech],
      ['studio', PRICES.studio],
      ['cover', PRICES.cover],
      ['stream', PRICES.stream],
      ['swap', PRICES.swap],
    ] as const) {
      expect(byId[id].estimate, id).toMatchObject({ tokens, min: tokens, max: tokens });
    }
    expect(byId.avatar.estimate).toMatchObject({ tokens: 60, min: 3, max: 60 });
    expect(byId.avatar.estimate.basis).toContain('priced up to the 60 s maximum');
  });

  it('totals per model and overall, in tokens and USD', async () => {
    const plan = await planJson(MIXED);
    const max = FIXED + PRICES.avatarMax;
    const min = FIXED + PRICES.avatarMin;
    expect(plan.totals.tokens).toBeCloseTo(max, 9);
    expect(plan.totals.max).toBeCloseTo(max, 9);
    expect(plan.totals.min).toBeCloseTo(min, 9);
    expect(plan.totals.usd).toBeCloseTo(max * 0.02, 9);
    expect(plan.totals.tokens).toBe(226.005);
    expect(plan.totals.usd).toBe(4.5201);
    expect(plan.totals.byModel['flat-image']).toEqual({
      tasks: 3,
      tokens: 0.6,
      min: 0.6,
      max: 0.6,
      usd: 0.012,
    });
    expect(plan.totals.byModel['stream-2-0-fast']).toEqual({
      tasks: 1,
      tokens: 57.585,
      min: 57.585,
      max: 57.585,
      usd: 1.1517,
    });
    expect(plan.totals.byModel['ai-talking-avatar-video']).toEqual({
      tasks: 1,
      tokens: 60,
      min: 3,
      max: 60,
      usd: 1.2,
    });
    expect(Object.keys(plan.totals.byModel)).toHaveLength(7);
    expect(plan.budget).toBe(200);
    expect(plan.balance).toBeUndefined();
  });

  it('leaves custom_callback_url out when the manifest has no callback_url', async () => {
    const plan = await planJson(MIXED.replace(`callback_url: ${HOOK}\n`, ''));
    for (const task of plan.tasks) expect(task.body).not.toHaveProperty('custom_callback_url');
  });
});

describe('plan, as a person reads it', () => {
  it('shows a table with ranges, USD, totals per model, the budget and what to do about the balance, and exits 3 over budget', async () => {
    const cwd = await folder({ 'm.yaml': MIXED });
    const r = await cli(['plan', 'm.yaml', '--no-probe'], { cwd });
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(OVER_BUDGET);
    const out = lines(r.stdout);
    expect(out[0]).toBe('Plan for run mixed (m.yaml): 9 tasks');
    expect(out[2]).toBe('TASK    MODEL                    TOKENS          USD  BASIS');
    expect(out[3]).toBe('shot-1  flat-image                  0.2       $0.004  1 image × 0.2 tokens');
    expect(out).toContain(
      'stream  stream-2-0-fast          57.585        $1.15  5 s × 10.47 tokens (720p) × 1.1 (generate_audio false)',
    );
    expect(out).toContainEqual(
      expect.stringMatching(
        /^avatar {2}ai-talking-avatar-video {4}3–60 {2}\$0\.06–\$1\.20 {2}3-60 s × 1 token/,
      ),
    );
    expect(out).toContain(
      'Media not measured (--no-probe): lengths come from media_seconds or are priced up to the maximum.',
    );
    expect(out).toContain('MODEL                    TASKS           TOKENS          USD');
    expect(out).toContain('flat-image                   3              0.6        $0.01');
    expect(out).toContain('Total                        9  169.005–226.005  $3.38–$4.52');
    expect(out).toContain(
      'Cost: 169.005–226.005 tokens ($3.38–$4.52) at $0.02 per token; budget and balance are compared with the most, 226.005.',
    );
    expect(out).toContain(
      'Budget: 200 tokens; the plan can cost 26.005 tokens more: `run` would refuse it. Raise budget or trim the tasks.',
    );
    expect(out).toContain(
      'Balance: not checked; to compare the plan with your balance, set MEDIABATCH_API_KEY (and MEDIABATCH_BASE_URL) in the environment.',
    );
    expect(out.at(-1)).toBe('Nothing was submitted.');
  });

  it('says the plan fits a budget it fits, with thousands grouped', async () => {
    const cwd = await folder({
      'm.yaml': `version: 1
name: big
budget: 5000
tasks:
  - id: "img-{{index}}"
    model: pixel-lite
    repeat: 2000
    input: { prompt: x }
`,
    });
    const r = await cli(['plan', 'm.yaml'], { cwd });
    expect(r.code).toBe(0);
    const out = lines(r.stdout);
    expect(out[0]).toBe('Plan for run big (m.yaml): 2,000 tasks');
    expect(out).toContain('Total       2,000   4,000  $80.00');
    expect(out).toContain('Cost: 4,000 tokens ($80.00) at $0.02 per token.');
    expect(out).toContain('Budget: 5,000 tokens; the plan fits, leaving 1,000 tokens.');
  });

  it.each(examples)('plans the example %s without fetching anything (--no-probe)', async (file) => {
    const r = await cli(['plan', file, '--no-probe']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Nothing was submitted.');
  });

  it('refuses an invalid manifest with every problem, as validate does', async () => {
    const cwd = await folder({
      'm.yaml':
        'version: 1\nname: x\ntasks:\n  - id: a\n    model: flow22_spicy\n    input: { resolution: 4k }\n',
    });
    const r = await cli(['plan', 'm.yaml'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(lines(r.stderr)).toEqual([
      'm.yaml:6:12  task a  input.prompt: is required unless image_url (a first frame) is given',
      'm.yaml:6:26  task a  input.resolution: must be 480p or 720p, got "4k"',
      'mediabatch: 2 problems in m.yaml; fix them and run again',
    ]);
  });
});
