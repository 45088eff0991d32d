// The job life cycle on the injected clock, refunds, result items and files, and link expiry.

import { parseBuffer } from 'music-metadata';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, KEY, openSandbox, PATHS, serveFixtures, T0 } from './helpers.js';

afterEach(closeAll);

async function download(url: string): Promise<{ status: number; type: string; bytes: Buffer }> {
  const res = await request(url);
  const bytes = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, type: String(res.headers['content-type']), bytes };
}

describe('life cycle', () => {
  it('goes pending -> processing -> success as the clock moves, within the realistic image timing', async () => {
    const { api, clock } = await openSandbox({ seed: 3 });
    const { body } = await api.submit(PATHS.images, { model: 'flat-image', prompt: 'a mug' });
    const id = body.data.img_uuid;
    const first = await api.poll(id);
    expect(first.body).toMatchObject({
      code: 0,
      msg: 'Success',
      data: { img_uuid: id, status: 'pending', json: null },
    });
    expect(first.body.data.start_time).toBe('2024-10-11T10:00:00.000Z');
    expect(first.body.data).not.toHaveProperty('end_time');

    const seen: string[] = [];
    // The queue takes a fifth of 3-8 s: still pending at 0.5 s.
    for (let s = 0; s <= 10; s += 0.5) {
      clock.advance(0.5);
      const { body: polled } = await api.poll(id);
      if (seen.at(-1) !== polled.data.status) seen.push(polled.data.status);
    }
    expect(seen).toEqual(['pending', 'processing', 'success']);
    const { body: done } = await api.poll(id);
    const end = Date.parse(done.data.end_time);
    expect(end - T0).toBeGreaterThanOrEqual(3000);
    expect(end - T0).toBeLessThanOrEqual(8000);
    expect(done.data).toMatchObject({ type: 'image', job_type: 'image', model_id: 'flat-image' });
    expect(done.data.end_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(typeof done.data.duration).toBe('number');
  });

  it.each([
    ['video', PATHS.videos, { model: 'flow22_spicy', prompt: 'x', resolution: '480p' }, 30, 90],
    ['audio', PATHS.audio, { model: 'speech-v3', text: 'hello' }, 5, 15],
  ])(
    'a %s job takes its realistic time at speed 1 and a tenth of it at speed 0.1',
    async (_k, path, body, min, max) => {
      for (const speed of [1, 0.1]) {
        const { api, clock } = await openSandbox({ speed });
        const id = (await api.submit(path, body)).body.data.img_uuid;
        clock.advance(min * speed - 0.01);
        expect((await api.poll(id)).body.data.status).not.toBe('success');
        clock.advance((max - min) * speed + 0.02);
        expect((await api.poll(id)).body.data.status).toBe('success');
      }
    },
  );

  it('finishes at the next look with --speed 0', async () => {
    const { api } = await openSandbox({ speed: 0 });
    const id = (await api.submit(PATHS.videos, { model: 'flow22_spicy', prompt: 'x', resolution: '480p' }))
      .body.data.img_uuid;
    expect((await api.poll(id)).body.data.status).toBe('success');
  });

  it('fails every job at --fail-rate 1 and refunds it, in the balance and in the quota', async () => {
    const { sandbox, api, clock } = await openSandbox({ failRate: 1, balance: 50, quota: 100 });
    const { body } = await api.submit(PATHS.videos, {
      model: 'flow22_spicy',
      prompt: 'x',
      resolution: '720p',
    });
    expect(body.data.cost).toBe(10);
    expect(sandbox.state()).toMatchObject({ balance: 40, quota: { used: 10 } });
    clock.advance(100);
    const { body: polled } = await api.poll(body.data.img_uuid);
    expect(polled.data).toMatchObject({ status: 'failed', json: null });
    expect(polled.data.end_time).toBeDefined();
    expect(sandbox.state()).toMatchObject({
      balance: 50,
      quota: { used: 0, limit: 100, period: 'monthly' },
      jobs: [{ status: 'failed', cost: 10, refunded: 10 }],
    });
  });

  it.each([
    ['SANDBOX_FAIL', 'flat-image', { prompt: 'please SANDBOX_FAIL' }],
    [
      'NOJSON (oc-maker text stage not JSON)',
      'oc-maker',
      { prompt: 'JSON with oc_prompt NOJSON', image_render_model: 'render-b' },
    ],
    [
      'NOPROMPT (oc-maker JSON without oc_prompt)',
      'oc-maker',
      { prompt: 'JSON with oc_prompt NOPROMPT', image_render_model: 'render-a' },
    ],
  ])('fails on the prompt keyword %s and refunds', async (_k, model, input) => {
    const { sandbox, api } = await openSandbox({ speed: 0 });
    const { body } = await api.submit(PATHS.images, { model, ...input });
    expect((await api.poll(body.data.img_uuid)).body.data.status).toBe('failed');
    expect(sandbox.state()).toMatchObject({ balance: 1000, jobs: [{ refunded: body.data.cost }] });
  });

  it('answers 404 code 404 for an unknown img_uuid and 400 without one', async () => {
    const { api } = await openSandbox();
    expect(await api.poll('nope')).toMatchObject({ status: 404, body: { code: 404 } });
    expect(await api.get('/api/v1/jobs/detail')).toMatchObject({ status: 400, body: { code: 400 } });
  });
});

describe('results', () => {
  it('links a real PNG for images, expiring after --link-ttl (then 410)', async () => {
    const { sandbox, api, clock } = await openSandbox({ speed: 0, linkTtlSeconds: 60 });
    const id = (await api.submit(PATHS.images, { model: 'pixel-lite', prompt: 'x' })).body.data.img_uuid;
    const { body } = await api.poll(id);
    expect(body.data.json).toEqual([
      { type: 'image', value: expect.stringMatching(`^${sandbox.baseUrl}/files/[0-9a-f]{32}$`) },
    ]);
    expect(body.data.link_expired_at).toBe(new Date(T0 + 60_000).toISOString());
    const file = await download(body.data.json[0].value);
    expect(file).toMatchObject({ status: 200, type: 'image/png' });
    expect(file.bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
    clock.advance(60);
    const expired = await download(body.data.json[0].value);
    expect(expired.status).toBe(410);
    expect(expired.bytes.toString()).toMatch(/expired/);
    expect((await download(`${sandbox.baseUrl}/files/0000`)).status).toBe(404);
    expect(sandbox.state().requests.download).toBe(3);
  });

  it('gives a video job an MP4 item typed video', async () => {
    const { api } = await openSandbox({ speed: 0 });
    const id = (await api.submit(PATHS.videos, { model: 'stream-2-0-fast', prompt: 'x', duration: 4 })).body
      .data.img_uuid;
    const { body } = await api.poll(id);
    expect(body.data.json).toEqual([{ type: 'video', value: expect.any(String) }]);
    const file = await download(body.data.json[0].value);
    expect(file.type).toBe('video/mp4');
    expect(file.bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
  });

  it('gives speech an MP3 of a plausible length for the text', async () => {
    const { api } = await openSandbox({ speed: 0 });
    const text = 'word '.repeat(60); // 300 characters: about 20 s of speech
    const id = (await api.submit(PATHS.audio, { model: 'speech-v3', text })).body.data.img_uuid;
    const { body } = await api.poll(id);
    expect(body.data.json).toEqual([{ type: 'audio', value: expect.any(String) }]);
    const file = await download(body.data.json[0].value);
    expect(file.type).toBe('audio/mpeg');
    const meta = await parseBuffer(file.bytes, 'audio/mpeg');
    expect(meta.format.duration).toBeGreaterThan(15);
    expect(meta.format.duration).toBeLessThan(25);
  });

  it.each([
    ['mp3', 'audio/mpeg'],
    ['wav', 'audio/wav'],
  ])('gives a voice cover as long as the measured song, as %s', async (format, type) => {
    const media = await serveFixtures();
    const { api } = await openSandbox({ speed: 0 });
    const id = (
      await api.submit(PATHS.audio, {
        model: 'voice-cover',
        audio_url: media.url('song-30s.mp3'),
        reference_audio_url: media.url('voice-4s.wav'),
        output_format: format,
      })
    ).body.data.img_uuid;
    const { body } = await api.poll(id);
    const file = await download(body.data.json[0].value);
    expect(file.type).toBe(type);
    const meta = await parseBuffer(file.bytes, type);
    expect(meta.format.duration).toBeCloseTo(30.07, 1);
  });

  it('gives song-replace-section two songs, and accepts one of them as the next task_id + audio_id', async () => {
    const { sandbox, api } = await openSandbox({ speed: 0 });
    const song = {
      model: 'song-replace-section',
      infill_start_s: 10,
      infill_end_s: 30,
      lyrics: '[Chorus] la',
      full_lyrics: '[Verse] a\n[Chorus] la',
      style: 'synth pop',
      title: 'Night',
    };
    const media = await serveFixtures();
    const first = await api.submit(PATHS.audio, {
      ...song,
      infill_start_s: 0,
      infill_end_s: 12,
      audio_url: media.url('song-30s.mp3'),
    });
    const { body } = await api.poll(first.body.data.img_uuid);
    expect(body.data.json).toHaveLength(2);
    for (const item of body.data.json) {
      expect(item).toMatchObject({
        type: 'audio',
        value: expect.stringContaining('/files/'),
        audio_id: expect.any(String),
        title: 'Night',
        style: 'synth pop',
        lyrics: '[Verse] a\n[Chorus] la',
      });
      expect(item.audio_duration).toBeGreaterThanOrEqual(30);
    }
    expect(body.data.json[0].audio_id).not.toBe(body.data.json[1].audio_id);
    // A 20 s section is more than half of a 30 s song: refused on the earlier song's length.
    const tooLong = await api.submit(PATHS.audio, {
      ...song,
      task_id: first.body.data.img_uuid,
      audio_id: body.data.json[1].audio_id,
    });
    expect(tooLong.body).toMatchObject({ code: 400, msg: expect.stringMatching(/50%/) });
    const next = await api.submit(PATHS.audio, {
      ...song,
      infill_start_s: 0,
      infill_end_s: 12,
      task_id: first.body.data.img_uuid,
      audio_id: body.data.json[1].audio_id,
    });
    expect(next.body).toMatchObject({ code: 0, data: { cost: 1.63 } });
    const wrongSong = await api.submit(PATHS.audio, {
      ...song,
      task_id: first.body.data.img_uuid,
      audio_id: 'x',
    });
    expect(wrongSong.body.msg).toMatch(/^audio_id: not a song of task/);
    expect(sandbox.state().jobs).toHaveLength(2);
  });

  it('gives oc-maker a json character sheet first, then the image', async () => {
    const { api } = await openSandbox({ speed: 0 });
    const id = (
      await api.submit(PATHS.images, {
        model: 'oc-maker',
        prompt: 'a knight; answer JSON with oc_prompt',
        image_render_model: 'render-a',
        ratio: '2:3',
      })
    ).body.data.img_uuid;
    const { body } = await api.poll(id);
    const [sheet, image] = body.data.json;
    expect(sheet.type).toBe('json');
    expect(sheet.value).toMatchObject({
      oc_prompt: expect.stringContaining('a knight'),
      name: expect.any(String),
      oc_ratio: '2:3',
    });
    expect(image).toEqual({ type: 'image', value: expect.stringContaining('/files/') });
  });
});

describe('state', () => {
  it('lists each job’s request as it arrived, with the key scrubbed where a client pasted it', async () => {
    const { sandbox, api } = await openSandbox({ speed: 0 });
    const sent = { model: 'flat-image', prompt: `a mug, key ${KEY} by mistake`, ratio: '1:1' };
    expect((await api.submit('/api/v1/images/generations', sent)).body.code).toBe(0);
    const [job] = sandbox.state().jobs;
    expect(job?.request).toEqual({ ...sent, prompt: 'a mug, key [key] by mistake' });
    expect(JSON.stringify(sandbox.state())).not.toContain(KEY);
  });
});
