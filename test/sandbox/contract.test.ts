// The contract between the sandbox and the client: every kind of answer the sandbox gives is read by
// the client's own schemas and classifiers (src/api/outcome.ts) as what it means. If the sandbox
// drifts from the wire format the client expects, runs against it would prove nothing.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { jobPhase } from '../../src/api/job-status.js';
import { type ApiAnswer, classifyBalance, classifyPoll, classifySubmission } from '../../src/api/outcome.js';
import { findEntry } from '../../src/catalog/index.js';
import type { SandboxOptions } from '../../src/sandbox/options.js';
import { closeAll, KEY, type MediaServer, openSandbox, PATHS, serveFixtures } from './helpers.js';

afterEach(closeAll);

/** One exchange, handed to the classifiers exactly as the client's transport would. */
async function exchange(url: string, opts: { body?: unknown; key?: string } = {}): Promise<ApiAnswer> {
  const res = await request(url, {
    method: opts.body === undefined ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${opts.key ?? KEY}`,
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
  });
  const text = await res.body.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { kind: 'response', status: res.statusCode, body };
}

async function sandboxWithApi(opts: SandboxOptions = {}) {
  const { sandbox, clock } = await openSandbox(opts);
  const api = {
    submit: async (path: string, body: unknown, key?: string) =>
      classifySubmission(await exchange(`${sandbox.baseUrl}${path}`, { body, ...(key ? { key } : {}) })),
    poll: async (id: string, key?: string) =>
      classifyPoll(
        await exchange(
          `${sandbox.baseUrl}/api/v1/jobs/detail?img_uuid=${encodeURIComponent(id)}`,
          key ? { key } : {},
        ),
      ),
    balance: async (key?: string) =>
      classifyBalance(await exchange(`${sandbox.baseUrl}/api/v1/user/tokens`, key ? { key } : {})),
  };
  return { api, clock };
}

const FLAT = { model: 'flat-image', prompt: 'a mug', ratio: '1:1' };

describe('the sandbox answers as the client reads them', () => {
  it('an accepted submission, a balance and an unknown job', async () => {
    const { api } = await sandboxWithApi({ balance: 10 });
    const accepted = await api.submit(PATHS.images, FLAT);
    expect(accepted).toMatchObject({ type: 'accepted', cost: 0.2, mayHaveCharged: true });
    expect(await api.balance()).toMatchObject({ type: 'ok', value: 9 });
    expect(await api.poll('no-such-job')).toMatchObject({ type: 'not-found' });
  });

  it('rejections: a broken request (400), too few tokens (code 100), the quota (code 101), a refused key (401)', async () => {
    const poor = await sandboxWithApi({ balance: 0.1 });
    expect(await poor.api.submit(PATHS.images, { model: 'flat-image' })).toMatchObject({
      type: 'rejected',
      httpStatus: 400,
      message: expect.stringContaining('prompt'),
    });
    expect(await poor.api.submit(PATHS.images, FLAT)).toMatchObject({ type: 'insufficient-tokens' });

    const capped = await sandboxWithApi({ quota: 0.3 });
    expect(await capped.api.submit(PATHS.images, FLAT)).toMatchObject({ type: 'accepted' });
    expect(await capped.api.submit(PATHS.images, FLAT)).toMatchObject({
      type: 'quota-exceeded',
      used: 0.2,
      quota: 0.3,
    });

    expect(await capped.api.submit(PATHS.images, FLAT, 'not-the-key')).toMatchObject({
      type: 'unauthorized',
    });
    expect(await capped.api.poll('any', 'not-the-key')).toMatchObject({ type: 'unauthorized' });
    expect(await capped.api.balance('not-the-key')).toMatchObject({ type: 'unauthorized' });
  });

  it('a job record pending, then processing, then success; and a failed job', async () => {
    const { api, clock } = await sandboxWithApi();
    const video = { model: 'flow22_spicy', prompt: 'a wave', resolution: '720p' };
    const job = await api.submit(PATHS.videos, video);
    if (job.type !== 'accepted') throw new Error(`not accepted: ${job.type}`);
    const status = async () => {
      const polled = await api.poll(job.imgUuid);
      if (polled.type !== 'ok') throw new Error(`poll: ${polled.type}`);
      return polled.value;
    };
    expect(await status()).toMatchObject({
      img_uuid: job.imgUuid,
      status: 'pending',
      model_id: 'flow22_spicy',
    });
    clock.advance(20); // past the queue (at most 20% of 90 s), before the end (at least 30 s)
    expect((await status()).status).toBe('processing');
    expect(jobPhase((await status()).status)).toBe('waiting');
    clock.advance(600);
    const done = await status();
    expect(jobPhase(done.status)).toBe('success');
    expect(done.json?.map((i) => i.type)).toEqual(['video']);
    expect(typeof done.json?.[0]?.value).toBe('string');

    const doomed = await api.submit(PATHS.images, { ...FLAT, prompt: 'SANDBOX_FAIL' });
    if (doomed.type !== 'accepted') throw new Error(`not accepted: ${doomed.type}`);
    clock.advance(600);
    const failed = await api.poll(doomed.imgUuid);
    expect(failed.type === 'ok' && jobPhase(failed.value.status)).toBe('failed');
  });

  const perModel: Array<[string, string, (m: MediaServer) => Record<string, unknown>]> = [
    ['flat-image', PATHS.images, () => FLAT],
    [
      'oc-maker',
      PATHS.images,
      () => ({
        model: 'oc-maker',
        prompt: 'a knight; return JSON with oc_prompt',
        image_render_model: 'render-a',
      }),
    ],
    ['speech-v3', PATHS.audio, () => ({ model: 'speech-v3', text: 'hello there' })],
    [
      'voice-cover',
      PATHS.audio,
      (m) => ({
        model: 'voice-cover',
        audio_url: m.url('tone-90.2s.mp3'),
        reference_audio_url: m.url('voice-4s.wav'),
        output_format: 'wav',
      }),
    ],
    [
      'song-replace-section',
      PATHS.audio,
      (m) => ({
        model: 'song-replace-section',
        audio_url: m.url('song-30s.mp3'),
        infill_start_s: 0,
        infill_end_s: 12,
        lyrics: '[Verse] new',
        full_lyrics: '[Verse] new\n[Chorus] old',
        style: 'pop',
        title: 'Song',
      }),
    ],
  ];

  it.each(perModel)(
    '%s: a successful record has the items of the catalog result shape',
    async (model, path, body) => {
      const media = await serveFixtures();
      const { api, clock } = await sandboxWithApi({ quirks: ['string-numbers', 'completed', 'request-id'] });
      const request = body(media);
      const job = await api.submit(path, request);
      if (job.type !== 'accepted') throw new Error(`not accepted: ${job.type} ${JSON.stringify(job)}`);
      clock.advance(600);
      const polled = await api.poll(job.imgUuid);
      if (polled.type !== 'ok') throw new Error(`poll: ${polled.type}`);
      const entry = findEntry(model);
      if (entry === undefined) throw new Error(`no catalog entry ${model}`);
      const shape = entry.resultFor?.(request) ?? entry.result;
      expect(jobPhase(polled.value.status)).toBe('success');
      const items = polled.value.json ?? [];
      expect(items.map((i) => i.type)).toEqual([...shape.items]);
      for (const item of items) {
        if (item.type === 'json')
          expect(item.value).toMatchObject(model === 'oc-maker' ? { oc_prompt: expect.any(String) } : {});
        else expect(item.value).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
      }
      if (model === 'song-replace-section') {
        for (const item of items)
          expect(item).toMatchObject({ audio_id: expect.any(String), audio_duration: expect.any(Number) });
      }
    },
  );
});
