// `plan` measures input media over HTTP (loopback only) to price the tasks billed by length.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { fixtures, type Served, serveFixtures } from '../media/serve.js';
import { folder, lines } from './helpers.js';

let server: Served;
/** Bytes of a real 12 s faststart MP4, served under a stated size of this many bytes. */
let oversize = 0;

beforeEach(async () => {
  const video = await readFile(join(fixtures, 'video-12s.mp4'));
  server = await serveFixtures({
    ranges: true,
    // A 350 MB file would be slow to make; the size a server states is what the probe reads, so state it.
    routes: (req, res) => {
      if (!req.url?.startsWith('/huge.mp4')) return false;
      const match = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
      const start = Number(match?.[1] ?? 0);
      const end = Math.min(match?.[2] ? Number(match[2]) : oversize - 1, start + 65_535, oversize - 1);
      const part = new Uint8Array(end - start + 1);
      part.set(video.subarray(start, Math.min(video.length, end + 1)));
      res.writeHead(206, {
        'content-range': `bytes ${start}-${end}/${oversize}`,
        'content-length': part.length,
        'accept-ranges': 'bytes',
      });
      res.end(part);
      return true;
    },
  });
});

afterEach(async () => {
  await server.close();
});

function avatar(id: string, video: string, audio: string, extra = ''): string {
  return `  - id: ${id}
    model: ai-talking-avatar-video
    input:
      video_url: ${server.base}/${video}
      audio_url: ${server.base}/${audio}
${extra}`;
}

async function plan(tasks: string, args: string[] = ['--json']) {
  const cwd = await folder({ 'm.yaml': `version: 1\nname: media\ntasks:\n${tasks}` });
  return cli(['plan', 'm.yaml', ...args], { cwd });
}

describe('plan measures media', () => {
  it('prices a talking avatar (normal mode) from the shorter of the measured video and audio', async () => {
    const r = await plan(avatar('talk', 'video-12s.mp4', 'speech-8s.mp3'));
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [task] = JSON.parse(r.stdout).tasks;
    // 8.1 s of audio is shorter than 12 s of video: 9 whole seconds x 1 token at 540p
    expect(task.estimate).toEqual({
      tokens: 9,
      min: 9,
      max: 9,
      basis: '9 s (8.1 s measured, rounded up) × 1 token (540p)',
      assumedPrice: false,
    });
    expect(task.measured.video_url).toBeCloseTo(12, 3);
    expect(task.measured.audio_url).toBeCloseTo(8.1, 3);
    expect(server.requests.map((q) => q.path).sort()).toEqual(['/speech-8s.mp3', '/video-12s.mp4']);
  });

  it('refuses a 65 s avatar output, located at the field, before any money moves', async () => {
    const r = await plan(avatar('long', 'video-65s.mp4', 'tone-90.2s.mp3'));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(lines(r.stderr)).toEqual([
      // the audio's measured length is printed by the catalog; its digits are not the point here
      'm.yaml:7:18  task long  input.video_url: must be at most 60 s without duration, measured 65 s; set duration (3 to 60) to use only the first seconds',
      // the audio's measured length is printed by the catalog; its digits are not the point here
      expect.stringMatching(
        /^m\.yaml:8:18 {2}task long {2}input\.audio_url: must be at most 60 s without duration, measured 90\.2\d* s; set duration \(3 to 60\) to use only the first seconds$/,
      ),
      'mediabatch: 2 problems in m.yaml; fix them and run again',
    ]);
  });

  it('falls back to media_seconds when a link cannot be fetched, and says why in the plan', async () => {
    const tasks = avatar('hinted', 'gone.mp4', 'speech-8s.mp3', '    media_seconds: 20\n');
    const json = await plan(tasks);
    expect(json.code).toBe(0);
    const [task] = JSON.parse(json.stdout).tasks;
    expect(task.estimate).toMatchObject({
      tokens: 20,
      min: 20,
      max: 20,
      basis: '20 s (media_seconds) × 1 token (540p)',
    });
    expect(task.notes).toEqual([`video_url: cannot measure ${server.base}/gone.mp4: not found (HTTP 404)`]);

    const text = await plan(tasks, []);
    expect(lines(text.stdout)).toContain(
      `  hinted  video_url: cannot measure ${server.base}/gone.mp4: not found (HTTP 404)`,
    );
  });

  it('without a length or a hint, prices up to the model maximum and says so', async () => {
    const r = await plan(avatar('blind', 'gone.mp4', 'also-gone.mp3'));
    expect(r.code).toBe(0);
    const [task] = JSON.parse(r.stdout).tasks;
    expect(task.estimate).toEqual({
      tokens: 60,
      min: 3,
      max: 60,
      basis:
        '3-60 s × 1 token (540p); output length not measured and no media_seconds given: priced up to the 60 s maximum, or set duration',
      assumedPrice: false,
    });
    expect(task.notes).toHaveLength(2);
  });

  it('prices a voice cover from the measured song, rounded up to the whole second', async () => {
    const r = await plan(`  - id: cover
    model: voice-cover
    input:
      audio_url: ${server.base}/tone-90.2s.mp3
      reference_audio_url: ${server.base}/voice-4s.wav
`);
    expect(r.code).toBe(0);
    const [task] = JSON.parse(r.stdout).tasks;
    expect(task.estimate).toMatchObject({ tokens: 1.82, min: 1.82, max: 1.82 });
  });

  it('never fetches anything with --no-probe', async () => {
    const r = await plan(
      avatar('a', 'video-12s.mp4', 'speech-8s.mp3') + avatar('b', 'video-65s.mp4', 'tone-90.2s.mp3'),
      ['--json', '--no-probe'],
    );
    expect(r.code).toBe(0);
    expect(server.requests).toEqual([]);
    const tasks = JSON.parse(r.stdout).tasks;
    expect(
      tasks.map((t: { estimate: { min: number; max: number } }) => [t.estimate.min, t.estimate.max]),
    ).toEqual([
      [3, 60],
      [3, 60],
    ]);
  });

  it('measures a link used by many tasks once', async () => {
    const r = await plan(
      avatar('a', 'video-12s.mp4', 'speech-8s.mp3') + avatar('b', 'video-12s.mp4', 'speech-8s.mp3'),
    );
    expect(r.code).toBe(0);
    expect(new Set(server.requests.map((q) => q.path)).size).toBe(2);
    const firstOfEach = server.requests.filter((q) => q.range === 'bytes=0-65535');
    expect(firstOfEach).toHaveLength(2);
  });

  it('refuses a file over the size limit of its field', async () => {
    oversize = 350_000_000;
    const r = await plan(avatar('big', 'huge.mp4', 'speech-8s.mp3'));
    expect(lines(r.stderr)).toEqual([
      'm.yaml:7:18  task big  input.video_url: the file is 350 MB; the limit is 300 MB',
      'mediabatch: 1 problem in m.yaml; fix it and run again',
    ]);
    expect(r.code).toBe(1);
  });

  it("refuses a face swap's reference image over 10 MB, measured by its size alone", async () => {
    oversize = 12_000_000;
    const swap = (img: string) => `  - id: swap
    model: video-face-swap
    input:
      reference_video: ${server.base}/video-12s.mp4
      reference_img: ${server.base}/${img}
      start_time: 0
      end_time: 5
`;
    const ok = await plan(swap('face.png'));
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout).tasks[0].estimate.tokens).toBeGreaterThan(0);
    const r = await plan(swap('huge.mp4'));
    expect(lines(r.stderr)).toEqual([
      'm.yaml:8:22  task swap  input.reference_img: the file is 12 MB; the limit is 10 MB',
      'mediabatch: 1 problem in m.yaml; fix it and run again',
    ]);
    expect(r.code).toBe(1);
  });

  it('says the size in bytes when it only just passes the limit', async () => {
    oversize = 300_000_001;
    const r = await plan(avatar('big', 'huge.mp4', 'speech-8s.mp3'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('input.video_url: the file is 300,000,001 bytes; the limit is 300 MB\n');
  });
});
