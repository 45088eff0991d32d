// The sample media under /_sandbox/media/: real files whose measured lengths fit the models that use them.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProber } from '../../src/media/probe.js';
import { SANDBOX_MEDIA, sandboxVars } from '../../src/sandbox/media.js';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, speed: 0 });
});
afterAll(async () => {
  await sandbox.close();
});

const url = (name: string) => `${sandbox.baseUrl}/_sandbox/media/${name}`;

describe('sandbox sample media', () => {
  it.each(SANDBOX_MEDIA.filter((m) => m.seconds !== undefined))(
    '$name measures $seconds s over HTTP',
    async (sample) => {
      const kind = sample.contentType.startsWith('video/') ? 'video' : 'audio';
      const probe = await createProber()(url(sample.name), kind);
      expect(probe.ok).toBe(true);
      if (probe.ok) expect(probe.seconds).toBeCloseTo(sample.seconds ?? Number.NaN, 2);
    },
  );

  it('fit the limits of the models that use them', () => {
    const seconds = Object.fromEntries(SANDBOX_MEDIA.map((m) => [m.name, m.seconds]));
    const talking = seconds['talking-head.mp4'] ?? 0;
    expect(talking).toBeGreaterThanOrEqual(3);
    expect(talking).toBeLessThanOrEqual(60);
    expect(seconds['dance.mp4']).toBeLessThanOrEqual(30);
    expect(seconds['song.mp3']).toBeGreaterThanOrEqual(5);
    expect(seconds['song.mp3']).toBeLessThanOrEqual(360);
    expect(seconds['voice.wav']).toBeGreaterThanOrEqual(3);
  });

  it('serves the images as PNG', async () => {
    for (const name of ['face.png', 'full-body.png']) {
      const res = await request(url(name));
      const bytes = Buffer.from(await res.body.arrayBuffer());
      expect([res.statusCode, res.headers['content-type']]).toEqual([200, 'image/png']);
      expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
    }
  });

  it('answers a Range request with those bytes only', async () => {
    const whole = Buffer.from(await (await request(url('song.mp3'))).body.arrayBuffer());
    const res = await request(url('song.mp3'), { headers: { range: 'bytes=100-199' } });
    const part = Buffer.from(await res.body.arrayBuffer());
    expect(res.statusCode).toBe(206);
    expect(res.headers['content-range']).toBe(`bytes 100-199/${whole.length}`);
    expect(part.equals(whole.subarray(100, 200))).toBe(true);
    const past = await request(url('song.mp3'), { headers: { range: `bytes=${whole.length}-` } });
    await past.body.dump();
    expect(past.statusCode).toBe(416);
  });

  it('lists the samples, and names them when asked for one that does not exist', async () => {
    const list = await request(`${sandbox.baseUrl}/_sandbox/media`);
    const body = (await list.body.json()) as { url: string }[];
    expect(body.map((m) => m.url)).toEqual(SANDBOX_MEDIA.map((m) => url(m.name)));
    const missing = await request(url('song.wav'));
    expect(missing.statusCode).toBe(404);
    expect(await missing.body.text()).toBe(
      `no such sample; the samples are: ${SANDBOX_MEDIA.map((m) => m.name).join(', ')}\n`,
    );
  });

  it('sandboxVars gives the base URL without a trailing slash', () => {
    expect(sandboxVars('http://127.0.0.1:4321/')).toEqual({ sandbox: 'http://127.0.0.1:4321' });
  });
});
