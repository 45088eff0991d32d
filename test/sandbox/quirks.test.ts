// The real service's habits (`--quirks`), each met over real HTTP as our client would meet it: the
// wire bytes, the headers, the sequences, and the money in /_sandbox/state afterwards.
import { gunzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { QUIRKS } from '../../src/sandbox/quirks.js';
import { startSandbox } from '../../src/sandbox/server.js';
import { type Client, closeAll, KEY, openSandbox, PATHS, serveFixtures } from './helpers.js';

afterEach(closeAll);

const IMAGE = { model: 'flat-image', prompt: 'a mug' };
const VIDEO = { model: 'flow22_spicy', prompt: 'x', resolution: '480p' };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  bytes: Buffer;
}

/** The answer as it crossed the wire: undici's `request` neither decompresses nor strips a BOM. */
async function raw(url: string, headers: Record<string, string> = {}): Promise<Raw> {
  const res = await request(url, { headers: { authorization: `Bearer ${KEY}`, ...headers } });
  return { status: res.statusCode, headers: res.headers, bytes: Buffer.from(await res.body.arrayBuffer()) };
}

async function submitId(api: Client, path: string, body: unknown): Promise<string> {
  const answer = await api.submit(path, body);
  expect(answer.body.code).toBe(0);
  return answer.body.data.img_uuid;
}

describe('quirk names', () => {
  it('refuses an unknown quirk before listening, naming the known ones', async () => {
    await expect(startSandbox({ port: 0, quirks: ['gzip', 'teapot'] })).rejects.toThrow(
      `sandbox: quirks: unknown quirk "teapot"; known quirks are: ${QUIRKS.join(', ')}, or all`,
    );
  });

  it('switches nothing on by default', async () => {
    const { sandbox, api } = await openSandbox({ speed: 0 });
    const submitted = await api.submit(PATHS.images, IMAGE);
    expect(Object.keys(submitted.body)).toEqual(['code', 'msg', 'data']);
    expect((await api.poll(submitted.body.data.img_uuid)).body.data.status).toBe('success');
    expect(sandbox.state().quirks).toEqual({ enabled: [], throttled: 0, busy: 0 });
  });
});

describe('status quirks', () => {
  it('completed: a finished job says completed, with its results', async () => {
    const { api } = await openSandbox({ speed: 0, quirks: ['completed'] });
    const id = await submitId(api, PATHS.images, IMAGE);
    const { body } = await api.poll(id);
    expect(body.data.status).toBe('completed');
    expect(body.data.json).toHaveLength(1);
  });

  it('waiting: a queued job says WAITING, then processing', async () => {
    const { api, clock } = await openSandbox({ quirks: new Set(['waiting']) });
    const id = await submitId(api, PATHS.videos, VIDEO);
    expect((await api.poll(id)).body.data.status).toBe('WAITING');
    clock.advance(20);
    expect((await api.poll(id)).body.data.status).toBe('processing');
  });

  it('success-before-json: success with json null first, the results a moment later', async () => {
    const { api, clock } = await openSandbox({ speed: 0, quirks: ['success-before-json'] });
    const id = await submitId(api, PATHS.images, IMAGE);
    const early = (await api.poll(id)).body.data;
    expect(early).toMatchObject({ status: 'success', json: null });
    expect(early).not.toHaveProperty('link_expired_at');
    clock.advance(0.3);
    const late = (await api.poll(id)).body.data;
    expect(late.status).toBe('success');
    expect(late.json).toHaveLength(1);
    expect(late.link_expired_at).toMatch(/Z$/);
  });

  it('success-before-json lasts 1-2 s at speed 1', async () => {
    const { api, clock } = await openSandbox({ quirks: ['success-before-json'] });
    const id = await submitId(api, PATHS.images, IMAGE);
    let status = 'pending';
    while (status !== 'success') {
      clock.advance(0.1);
      status = (await api.poll(id)).body.data.status;
    }
    expect((await api.poll(id)).body.data.json).toBeNull();
    clock.advance(0.9);
    expect((await api.poll(id)).body.data.json).toBeNull();
    clock.advance(1.2);
    expect((await api.poll(id)).body.data.json).toHaveLength(1);
  });
});

describe('shape quirks', () => {
  it('string-numbers: every number is a numeric string and msg of a success is null', async () => {
    const media = await serveFixtures();
    const { api } = await openSandbox({ speed: 0, quirks: ['string-numbers'] });
    const submitted = await api.submit(PATHS.audio, {
      model: 'song-replace-section',
      audio_url: media.url('song-30s.mp3'),
      infill_start_s: 0,
      infill_end_s: 12,
      lyrics: '[Verse] new',
      full_lyrics: '[Verse] new',
      style: 'pop',
      title: 'Song',
    });
    expect(submitted.body).toEqual({
      code: '0',
      msg: null,
      data: { img_uuid: expect.stringMatching(UUID), cost: '1.63' },
    });
    const job = (await api.poll(submitted.body.data.img_uuid)).body;
    expect(job.code).toBe('0');
    expect(job.data.duration).toMatch(/^\d+(\.\d+)?$/);
    expect(job.data.json.map((item: { audio_duration: unknown }) => typeof item.audio_duration)).toEqual([
      'string',
      'string',
    ]);
    expect((await api.get('/api/v1/user/tokens')).body).toEqual({
      code: '0',
      msg: null,
      data: { count: '998' },
    });
    // Errors keep their message, and their code is a string too.
    expect((await api.submit(PATHS.images, { model: 'flat-image' })).body).toMatchObject({
      code: '400',
      msg: expect.stringContaining('prompt'),
    });
  });

  it('per-item-expiry: link_expired_at and duration move from the job onto each item', async () => {
    const { api } = await openSandbox({ speed: 0, quirks: ['per-item-expiry'] });
    const id = await submitId(api, PATHS.images, {
      model: 'oc-maker',
      prompt: 'Return JSON with oc_prompt',
      image_render_model: 'render-a',
    });
    const { data } = (await api.poll(id)).body;
    expect(data).not.toHaveProperty('link_expired_at');
    expect(data).not.toHaveProperty('duration');
    expect(data.json).toHaveLength(2);
    for (const item of data.json) {
      expect(item.link_expired_at).toBe('2024-10-11T22:00:00.000Z');
      expect(typeof item.duration).toBe('number');
    }
  });

  it('wrong-extension: a video is served at …/1.png and typed image', async () => {
    const { api } = await openSandbox({ speed: 0, quirks: ['wrong-extension'] });
    const id = await submitId(api, PATHS.videos, VIDEO);
    const [item] = (await api.poll(id)).body.data.json;
    expect(item.type).toBe('image');
    expect(item.value).toMatch(/\/files\/[0-9a-f]{32}\/1\.png$/);
    const file = await raw(item.value);
    expect(file.status).toBe(200);
    // An MP4 whatever the name says: its first box is `ftyp`.
    expect(file.bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
  });

  it('request-id: every envelope carries its own uuid, errors included', async () => {
    const { api } = await openSandbox({ speed: 0, quirks: ['request-id'] });
    const answers = [
      await api.submit(PATHS.images, IMAGE),
      await api.get('/api/v1/user/tokens'),
      await api.poll('no-such-job'),
      await api.get('/api/v1/user/tokens', null),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 404, 401]);
    const ids = answers.map((a) => a.body.request_id);
    for (const id of ids) expect(id).toMatch(UUID);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('encoding quirks', () => {
  it('gzip: compressed when the request accepts gzip, plain otherwise', async () => {
    const { sandbox } = await openSandbox({ quirks: ['gzip'] });
    const url = `${sandbox.baseUrl}/api/v1/user/tokens`;
    const zipped = await raw(url, { 'accept-encoding': 'gzip, deflate' });
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect([...zipped.bytes.subarray(0, 2)]).toEqual([0x1f, 0x8b]);
    expect(JSON.parse(gunzipSync(zipped.bytes).toString('utf8'))).toEqual({
      code: 0,
      msg: 'Success',
      data: { count: 1000 },
    });
    const refusals: Array<Record<string, string>> = [
      {},
      { 'accept-encoding': 'identity' },
      { 'accept-encoding': 'gzip;q=0, *' },
    ];
    for (const headers of refusals) {
      const plain = await raw(url, headers);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(JSON.parse(plain.bytes.toString('utf8')).data).toEqual({ count: 1000 });
    }
  });

  it('bom: JSON answers start with EF BB BF, inside the gzip too', async () => {
    const { sandbox } = await openSandbox({ quirks: ['bom', 'gzip'] });
    const url = `${sandbox.baseUrl}/api/v1/user/tokens`;
    const plain = await raw(url);
    expect([...plain.bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    expect(JSON.parse(plain.bytes.subarray(3).toString('utf8')).data).toEqual({ count: 1000 });
    const unzipped = gunzipSync((await raw(url, { 'accept-encoding': 'gzip' })).bytes);
    expect([...unzipped.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
  });

  it('leaves /_sandbox/state plain under every quirk', async () => {
    const { sandbox } = await openSandbox({ quirks: ['all'] });
    const state = await raw(`${sandbox.baseUrl}/_sandbox/state`, { 'accept-encoding': 'gzip' });
    expect(state.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(state.bytes.toString('utf8')).quirks.enabled).toEqual(QUIRKS);
  });
});

describe('refusal quirks', () => {
  it('retry-after: some submits and reads get 429 with Retry-After: 1, and nothing is charged', async () => {
    const { sandbox, api } = await openSandbox({ seed: 11, quirks: ['retry-after'] });
    const seen: Array<{ kind: string; status: number; body: { code: number; data?: { cost: number } } }> = [];
    const headers: unknown[] = [];
    for (let i = 0; i < 40; i++) {
      const read = await raw(`${sandbox.baseUrl}/api/v1/user/tokens`);
      if (read.status === 429) headers.push(read.headers['retry-after']);
      seen.push({ kind: 'read', status: read.status, body: JSON.parse(read.bytes.toString('utf8')) });
      seen.push({ kind: 'submit', ...(await api.submit(PATHS.videos, VIDEO)) });
    }
    const throttled = seen.filter((s) => s.status === 429);
    expect(new Set(throttled.map((s) => s.kind))).toEqual(new Set(['read', 'submit']));
    expect(throttled.length).toBeGreaterThan(4);
    expect(throttled.length).toBeLessThan(25);
    for (const s of throttled) expect(s.body).toEqual({ code: 429, msg: 'too many requests' });
    expect(headers.every((h) => h === '1')).toBe(true);
    const accepted = seen.filter((s) => s.kind === 'submit' && s.status === 200);
    const state = sandbox.state();
    expect(state.jobs).toHaveLength(accepted.length);
    expect(state.balance).toBe(1000 - 5 * accepted.length);
    expect(state.quirks.throttled).toBe(throttled.length);
  });

  it('code-in-200: some submissions answer 200 {code: 500, msg: "busy"} and charge nothing', async () => {
    const { sandbox, api } = await openSandbox({ seed: 4, quirks: ['code-in-200'] });
    const answers = [];
    for (let i = 0; i < 40; i++) answers.push(await api.submit(PATHS.videos, VIDEO));
    const busy = answers.filter((a) => a.body.code === 500);
    expect(busy.length).toBeGreaterThan(0);
    for (const a of busy) expect(a).toEqual({ status: 200, body: { code: 500, msg: 'busy' } });
    const state = sandbox.state();
    expect(state.jobs).toHaveLength(40 - busy.length);
    expect(state.balance).toBe(1000 - 5 * (40 - busy.length));
    expect(state.quirks.busy).toBe(busy.length);
  });

  it('detail-404-window: a new job is unknown for its first 3 s at speed 1', async () => {
    const { api, clock } = await openSandbox({ quirks: ['detail-404-window'] });
    const id = await submitId(api, PATHS.videos, VIDEO);
    const unknown = { status: 404, body: { code: 404, msg: `img_uuid: no job "${id}"` } };
    expect(await api.poll(id)).toEqual(unknown);
    expect(await api.poll('never-submitted')).toEqual({
      status: 404,
      body: { code: 404, msg: 'img_uuid: no job "never-submitted"' },
    });
    clock.advance(2.9);
    expect(await api.poll(id)).toEqual(unknown);
    clock.advance(0.2);
    expect((await api.poll(id)).body.data.img_uuid).toBe(id);
  });

  it('detail-404-window: still 300 ms at speed 0', async () => {
    const { api, clock } = await openSandbox({ speed: 0, quirks: ['detail-404-window'] });
    const id = await submitId(api, PATHS.images, IMAGE);
    expect((await api.poll(id)).status).toBe(404);
    clock.advance(0.3);
    expect((await api.poll(id)).body.data.status).toBe('success');
  });

  it('link-403: the first link is stale for good; a fresh jobs/detail re-signs it; expiry still 410', async () => {
    const { api, clock } = await openSandbox({ speed: 0, linkTtlSeconds: 60, quirks: ['link-403'] });
    const id = await submitId(api, PATHS.images, IMAGE);
    const first: string = (await api.poll(id)).body.data.json[0].value;
    expect(first).toMatch(/\/files\/[0-9a-f]{32}\?sig=[0-9a-f]{24}$/);
    // Polling again before any download hands out the same link.
    expect((await api.poll(id)).body.data.json[0].value).toBe(first);
    expect((await raw(first)).status).toBe(403);
    const second: string = (await api.poll(id)).body.data.json[0].value;
    expect(second).not.toBe(first);
    expect(second.split('?')[0]).toBe(first.split('?')[0]);
    const file = await raw(second);
    expect(file.status).toBe(200);
    expect([...file.bytes.subarray(1, 4)]).toEqual([0x50, 0x4e, 0x47]);
    expect((await raw(first)).status).toBe(403);
    expect((await api.poll(id)).body.data.json[0].value).toBe(second);
    expect((await raw(second)).status).toBe(200);
    expect((await raw(first.split('?')[0] ?? '')).status).toBe(403);
    clock.advance(61);
    expect((await raw(second)).status).toBe(410);
  });

  it('link-403: a failed job has no file to sign, its links stay unknown (404)', async () => {
    const { sandbox, api } = await openSandbox({ speed: 0, quirks: ['link-403'] });
    const id = await submitId(api, PATHS.videos, { ...VIDEO, prompt: 'SANDBOX_FAIL' });
    const { data } = (await api.poll(id)).body;
    expect(data).toMatchObject({ status: 'failed', json: null });
    expect((await raw(`${sandbox.baseUrl}/files/${'0'.repeat(32)}?sig=x`)).status).toBe(404);
    expect(sandbox.state()).toMatchObject({ balance: 1000, jobs: [{ refunded: 5 }] });
  });
});

describe('account concurrency', () => {
  it('keeps jobs beyond the limit WAITING until a slot frees, and never runs more', async () => {
    const { sandbox, api, clock } = await openSandbox({ accountConcurrency: 1, quirks: ['waiting'] });
    const ids = [
      await submitId(api, PATHS.images, IMAGE),
      await submitId(api, PATHS.images, IMAGE),
      await submitId(api, PATHS.images, IMAGE),
    ];
    expect(sandbox.state().concurrency).toEqual({ limit: 1, running: 0, waiting: 3, peak: 0 });
    const timelines: string[][] = [[], [], []];
    // Three image jobs of at most 8 s each, one after the other, end within 25 s.
    for (let t = 0; t < 26; t += 0.5) {
      clock.advance(0.5);
      const statuses: string[] = [];
      for (const id of ids) statuses.push((await api.poll(id)).body.data.status);
      expect(statuses.filter((s) => s === 'processing').length).toBeLessThanOrEqual(1);
      statuses.forEach((s, i) => {
        if (timelines[i]?.at(-1) !== s) timelines[i]?.push(s);
      });
      if (t === 1.5) {
        // The first job ready has started (queue time is a fifth of 3-8 s) and none can have ended.
        expect(statuses.filter((s) => s === 'WAITING')).toHaveLength(2);
        expect(sandbox.state().concurrency).toMatchObject({ running: 1, waiting: 2 });
      }
    }
    for (const timeline of timelines) expect(timeline).toEqual(['WAITING', 'processing', 'success']);
    const jobs = (await Promise.all(ids.map(async (id) => (await api.poll(id)).body.data))).sort(
      (a, b) => Date.parse(a.end_time) - Date.parse(b.end_time),
    );
    // Each job starts when the one before it ends, to the millisecond, whatever the polling rate.
    for (let i = 1; i < jobs.length; i++) {
      const previousEnd = Date.parse(jobs[i - 1].end_time);
      const end = Date.parse(jobs[i].end_time);
      expect(end - previousEnd).toBeCloseTo(jobs[i].duration * 1000, 0);
    }
    expect(sandbox.state().concurrency).toEqual({ limit: 1, running: 0, waiting: 0, peak: 1 });
  });

  it('runs jobs side by side without a limit', async () => {
    const { sandbox, api, clock } = await openSandbox();
    for (let i = 0; i < 3; i++) await submitId(api, PATHS.videos, VIDEO);
    clock.advance(25);
    sandbox.advance();
    expect(sandbox.state().concurrency).toMatchObject({ limit: null, running: 3, waiting: 0 });
  });
});

describe('ids and request bodies', () => {
  it('hands out new job ids at every start, the same ones under one --seed', async () => {
    const idsOf = async (seed?: number): Promise<string[]> => {
      const { api } = await openSandbox(seed === undefined ? {} : { seed });
      return [await submitId(api, PATHS.images, IMAGE), await submitId(api, PATHS.images, IMAGE)];
    };
    const a = await idsOf();
    const b = await idsOf();
    for (const id of [...a, ...b]) expect(id).toMatch(UUID);
    expect(new Set([...a, ...b]).size).toBe(4);
    expect(await idsOf(5)).toEqual(await idsOf(5));
  });

  it('keeps each job request body as sent in /_sandbox/state, and never the key', async () => {
    const key = 'sk-live-do-not-store-0123456789';
    const { sandbox } = await openSandbox({ apiKey: key, speed: 0 });
    const body = {
      model: 'stream-2-0-fast',
      prompt: 'waves',
      duration: 5,
      ratio: '16:9',
      custom_callback_url: 'http://127.0.0.1:9/cb?token=abc',
    };
    const res = await request(`${sandbox.baseUrl}${PATHS.videos}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    const text = await (await request(`${sandbox.baseUrl}/_sandbox/state`)).body.text();
    expect(JSON.parse(text).jobs[0].request).toEqual(body);
    expect(text).not.toContain(key);
  });
});

describe('all quirks at once', () => {
  it('keeps the money exact: charges of accepted jobs, refunds of failed ones, nothing for 429 or busy', async () => {
    const { sandbox, clock } = await openSandbox({ seed: 8, speed: 0, failRate: 0.3, quirks: ['all'] });
    let answered = 0;
    for (let i = 0; i < 30; i++) {
      const res = await request(`${sandbox.baseUrl}${PATHS.videos}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(VIDEO),
      });
      const bytes = Buffer.from(await res.body.arrayBuffer());
      expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
      const body = JSON.parse(bytes.subarray(3).toString('utf8'));
      expect(body.request_id).toMatch(UUID);
      if (res.statusCode === 200 && body.code === '0') {
        answered++;
        expect(body.data.cost).toBe('5');
      }
    }
    clock.advance(5);
    sandbox.advance();
    const state = sandbox.state();
    expect(state.jobs).toHaveLength(answered);
    const failed = state.jobs.filter((j) => j.status === 'failed');
    expect(failed.length).toBeGreaterThan(0);
    for (const job of failed) expect(job.refunded).toBe(5);
    expect(state.balance).toBe(1000 - 5 * (answered - failed.length));
    expect(state.quirks.throttled + state.quirks.busy + answered).toBe(30);
  });
});
