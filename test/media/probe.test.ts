import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseFile } from 'music-metadata';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProber, displayLocation } from '../../src/media/probe.js';
import type { MediaKind, ProbeResult } from '../../src/media/types.js';
import { fixtures, type Served, serveFixtures } from './serve.js';

/** Every timed fixture, with the length ffprobe reports (see test/fixtures/media/README.md). */
const timed: [file: string, kind: MediaKind, seconds: number, container: string][] = [
  ['video-5s.mp4', 'video', 5, 'mp4'],
  ['av-10s.mp4', 'video', 10.051, 'mp4'],
  ['video-12s.mp4', 'video', 12, 'mp4'],
  ['video-35s.mp4', 'video', 35, 'mp4'],
  ['video-65s.mp4', 'video', 65, 'mp4'],
  ['late-moov-7s.mp4', 'video', 7, 'mp4'],
  ['clip-3s.mov', 'video', 3, 'mov'],
  ['speech-8s.mp3', 'audio', 8.1, 'mp3'],
  ['tone-90.2s.mp3', 'audio', 90.227, 'mp3'],
  ['song-30s.mp3', 'audio', 30.067, 'mp3'],
  ['voice-4s.wav', 'audio', 4, 'wav'],
  ['voice-2s.wav', 'audio', 2, 'wav'],
  ['clip-1s.flac', 'audio', 1, 'flac'],
  ['clip-1s.ogg', 'audio', 1, 'ogg'],
  ['clip-1s.m4a', 'audio', 1, 'm4a'],
];

const supported = 'only MP4/MOV video and MP3/M4A/WAV/FLAC/OGG audio';

function expectLength(result: ProbeResult, seconds: number, container: string, bytes: number): void {
  if (!result.ok) throw new Error(`expected a length, got: ${result.reason}`);
  expect(Math.abs(result.seconds - seconds)).toBeLessThanOrEqual(0.05);
  expect(result.container).toBe(container);
  expect(result.bytes).toBe(bytes);
}

function reasonOf(result: ProbeResult): string {
  if (result.ok) throw new Error(`expected a refusal, got ${result.seconds} s`);
  return result.reason;
}

const sizeOf = async (file: string) => (await stat(join(fixtures, file))).size;

describe('measuring from the local disk', () => {
  const probe = createProber();

  it.each(timed)('%s from a path', async (file, kind, seconds, container) => {
    expectLength(await probe(join(fixtures, file), kind), seconds, container, await sizeOf(file));
  });

  it.each(timed)('%s from a file: URL', async (file, kind, seconds, container) => {
    const url = pathToFileURL(join(fixtures, file)).href;
    expectLength(await probe(url, kind), seconds, container, await sizeOf(file));
  });

  it('reports the container length of an MP4 with AAC, not the longer audio track', async () => {
    const result = await probe(join(fixtures, 'av-10s.mp4'), 'video');
    expect(result.ok && result.seconds).toBeCloseTo(10.051, 3);
    // Reading the audio track, as music-metadata does, gives about 10.10 s: the mistake this guards against.
    const audioTrack = (await parseFile(join(fixtures, 'av-10s.mp4'))).format.duration ?? 0;
    expect(audioTrack - 10.051).toBeGreaterThan(0.03);
  });

  it.each([
    ['missing.mp4', 'video', 'file not found'],
    ['face.png', 'video', `unsupported container (a PNG image; ${supported})`],
    ['clip-1s.m4a', 'video', 'it is M4A audio, and a video is needed'],
    ['speech-8s.mp3', 'video', 'it is MP3 audio, and a video is needed'],
    ['video-5s.mp4', 'audio', 'it has no audio track'],
    ['missing.png', 'image', 'file not found'],
    ['', 'video', 'it is a folder, not a file'],
  ] as const)('%s as %s is refused: %s', async (file, kind, why) => {
    const path = join(fixtures, file);
    expect(reasonOf(await probe(path, kind))).toBe(`cannot measure ${path}: ${why}`);
  });

  it('measures an image by its size only (its length means nothing)', async () => {
    const path = join(fixtures, 'person.png');
    expect(await probe(path, 'image')).toEqual({
      ok: true,
      seconds: 0,
      bytes: await sizeOf('person.png'),
      container: 'image',
    });
  });

  it('accepts a video with sound where audio is asked (its audio track is used)', async () => {
    expect(await probe(join(fixtures, 'av-10s.mp4'), 'audio')).toMatchObject({ ok: true, container: 'mp4' });
  });

  it.each([
    [
      'ftp://example.org/a.mp4',
      'ftp: links are not supported; give a local path, a file: URL or an http(s) URL',
    ],
    [
      'data:video/mp4;base64,AAAA',
      'data: links are not supported; give a local path, a file: URL or an http(s) URL',
    ],
  ])('refuses %s', async (location, why) => {
    expect(reasonOf(await probe(location, 'video'))).toBe(`cannot measure ${location}: ${why}`);
  });
});

describe.each([
  ['a server that honours Range', true],
  ['a server that ignores Range', false],
])('measuring over HTTP from %s', (_name, ranges) => {
  let server: Served;
  const probe = createProber();
  beforeAll(async () => {
    server = await serveFixtures({ ranges });
  });
  afterAll(() => server.close());

  it.each(timed)('%s', async (file, kind, seconds, container) => {
    expectLength(await probe(`${server.base}/${file}`, kind), seconds, container, await sizeOf(file));
  });

  it('gives a clear reason for a missing file', async () => {
    expect(reasonOf(await probe(`${server.base}/gone.mp4`, 'video'))).toBe(
      `cannot measure ${server.base}/gone.mp4: not found (HTTP 404)`,
    );
  });
});

describe('HTTP details', () => {
  let server: Served;
  const webm = Uint8Array.from([
    0x1a,
    0x45,
    0xdf,
    0xa3,
    0x9f,
    0x42,
    0x86,
    0x81,
    0x01,
    ...new Array(60).fill(0),
  ]);
  beforeAll(async () => {
    server = await serveFixtures({
      ranges: true,
      files: { '/a.webm': webm, '/page.mp4': new TextEncoder().encode('<!DOCTYPE html><p>sign in</p>') },
      routes(req, res) {
        const hops = /^\/hop\/(\d+)$/.exec(req.url ?? '');
        if (hops) {
          const n = Number(hops[1]);
          res.writeHead(302, { location: n === 0 ? '/video-5s.mp4' : `/hop/${n - 1}` }).end();
          return true;
        }
        if (req.url === '/to-ftp') {
          res.writeHead(301, { location: 'ftp://127.0.0.1/video-5s.mp4' }).end();
          return true;
        }
        if (req.url === '/silent') return true; // never answers
        if (req.url === '/broken') {
          res.writeHead(500).end('oops');
          return true;
        }
        return false;
      },
    });
  });
  afterAll(() => server.close());

  it('fetches a late moov from its offset instead of downloading the whole file', async () => {
    const before = server.bytesSent();
    const requestsBefore = server.requests.length;
    const result = await createProber()(`${server.base}/late-moov-7s.mp4`, 'video');
    expectLength(result, 7, 'mp4', await sizeOf('late-moov-7s.mp4'));
    const ranges = server.requests.slice(requestsBefore).map((r) => r.range);
    expect(ranges[0]).toBe('bytes=0-65535');
    expect(ranges.every((r) => r !== undefined)).toBe(true);
    expect(server.bytesSent() - before).toBeLessThan((await sizeOf('late-moov-7s.mp4')) / 2);
  });

  it('names an unsupported container', async () => {
    expect(reasonOf(await createProber()(`${server.base}/a.webm`, 'video'))).toBe(
      `cannot measure ${server.base}/a.webm: unsupported container (WebM/Matroska; ${supported})`,
    );
  });

  it('says when a link leads to a web page', async () => {
    expect(reasonOf(await createProber()(`${server.base}/page.mp4`, 'video'))).toContain(
      'unsupported container (a web page, not a media file;',
    );
  });

  it('refuses an audio file it would have to read whole beyond the byte limit', async () => {
    const probe = createProber({ maxBytes: 100_000 });
    expect(reasonOf(await probe(`${server.base}/tone-90.2s.mp3`, 'audio'))).toBe(
      `cannot measure ${server.base}/tone-90.2s.mp3: the file is 352.6 KiB, and it must be read whole to be measured; the limit is 97.7 KiB`,
    );
  });

  it('still measures a large WAV from its header under a small byte limit', async () => {
    expect(await createProber({ maxBytes: 1000 })(`${server.base}/voice-4s.wav`, 'audio')).toMatchObject({
      ok: true,
      seconds: 4,
    });
  });

  it('follows up to 5 http redirects', async () => {
    expectLength(
      await createProber()(`${server.base}/hop/4`, 'video'),
      5,
      'mp4',
      await sizeOf('video-5s.mp4'),
    );
    expect(reasonOf(await createProber()(`${server.base}/hop/5`, 'video'))).toBe(
      `cannot measure ${server.base}/hop/5: more than 5 redirects`,
    );
  });

  it('does not follow a redirect to another scheme', async () => {
    expect(reasonOf(await createProber()(`${server.base}/to-ftp`, 'video'))).toBe(
      `cannot measure ${server.base}/to-ftp: redirected to a ftp: link, and only http(s) links are followed`,
    );
  });

  it('gives up after the timeout', async () => {
    const started = Date.now();
    expect(reasonOf(await createProber({ timeoutMs: 300 })(`${server.base}/silent`, 'video'))).toBe(
      `cannot measure ${server.base}/silent: no complete answer within 0.3 s`,
    );
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('reports a server error', async () => {
    expect(reasonOf(await createProber()(`${server.base}/broken`, 'video'))).toBe(
      `cannot measure ${server.base}/broken: the server answered HTTP 500`,
    );
  });

  it('reports a refused connection', async () => {
    const closed = await serveFixtures({ ranges: true });
    await closed.close();
    expect(reasonOf(await createProber()(`${closed.base}/video-5s.mp4`, 'video'))).toMatch(
      /^cannot measure http:\/\/127\.0\.0\.1:\d+\/video-5s\.mp4: download failed \(ECONNREFUSED/,
    );
  });

  it('sends its requests through the dispatcher it is given', async () => {
    const seen: string[] = [];
    const agent = new Agent();
    const dispatcher = agent.compose((dispatch) => (options, handler) => {
      seen.push(`${options.method} ${options.path}`);
      return dispatch(options, handler);
    });
    await createProber({ dispatcher })(`${server.base}/video-5s.mp4`, 'video');
    await agent.close();
    expect(seen).toEqual(['GET /video-5s.mp4']);
  });

  it('keeps a signed link secret out of the reason', async () => {
    const reason = reasonOf(await createProber()(`${server.base}/gone.mp4?sig=s3cret&exp=1`, 'video'));
    expect(reason).not.toContain('s3cret');
    expect(reason).toBe(`cannot measure ${server.base}/gone.mp4?…: not found (HTTP 404)`);
  });
});

describe('a server that ignores Range, with a byte limit', () => {
  let server: Served;
  beforeAll(async () => {
    server = await serveFixtures({ ranges: false });
  });
  afterAll(() => server.close());

  it('still measures a faststart MP4 from the part it read', async () => {
    const probe = createProber({ maxBytes: 2000 });
    expect(await probe(`${server.base}/video-65s.mp4`, 'video')).toMatchObject({ ok: true, seconds: 65 });
  });

  it('refuses a file whose moov lies beyond the limit', async () => {
    const probe = createProber({ maxBytes: 64 * 1024 });
    expect(reasonOf(await probe(`${server.base}/late-moov-7s.mp4`, 'video'))).toBe(
      `cannot measure ${server.base}/late-moov-7s.mp4: the file is 138.7 KiB, and the server ignores Range requests; the limit is 64 KiB`,
    );
  });
});

describe('displayLocation', () => {
  it.each([
    ['https://cdn.example/a.mp4?X-Amz-Signature=abc', 'https://cdn.example/a.mp4?…'],
    ['https://user:pw@cdn.example/a.mp4', 'https://cdn.example/a.mp4'],
    ['https://cdn.example/a.mp4', 'https://cdn.example/a.mp4'],
    ['./in/a.mp4', './in/a.mp4'],
  ])('%s is shown as %s', (location, shown) => {
    expect(displayLocation(location)).toBe(shown);
  });
});

describe('createProber options', () => {
  it.each([
    [{ maxBytes: 0 }, 'maxBytes: must be an integer >= 1, got 0'],
    [{ timeoutMs: -1 }, 'timeoutMs: must be a number > 0, got -1'],
  ])('%o is refused', (opts, message) => {
    expect(() => createProber(opts)).toThrow(message);
  });
});
