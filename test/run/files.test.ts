// What a run leaves on disk: result files under the run's folder whatever the task ids, job.json,
// the oc-maker sheet, song metadata; and the API key nowhere.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { taskFolderName } from '../../src/results/names.js';
import { forgetSecrets } from '../../src/util/secrets.js';
import { images, makeRunEnv, type RunEnv, reason, taskStates, walk } from '../helpers/run-env.js';
import { type Served, serveFixtures } from '../media/serve.js';

let env: RunEnv | undefined;
let media: Served | undefined;
afterEach(async () => {
  await env?.close();
  await media?.close();
  env = undefined;
  media = undefined;
  forgetSecrets();
});

describe('run: files on disk', () => {
  it('job.json for every success, sheet.json for oc-maker, song metadata in job.json', async () => {
    media = await serveFixtures({ ranges: true });
    env = await makeRunEnv();
    const file = await env.manifest({
      tasks: [
        ...images(1),
        {
          id: 'hero',
          model: 'oc-maker',
          input: {
            prompt: 'Invent a mascot; answer JSON with name and oc_prompt',
            image_render_model: 'render-a',
          },
        },
        {
          id: 'chorus',
          model: 'song-replace-section',
          input: {
            audio_url: `${media.base}/song-30s.mp3`,
            infill_start_s: 0,
            infill_end_s: 12,
            lyrics: '[Chorus] la la',
            full_lyrics: '[Verse] hm [Chorus] la la',
            style: 'pop',
            title: 'La',
          },
        },
      ],
    });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(0);
    expect(taskStates(env)).toEqual({ 'img-1': 'done', hero: 'done', chorus: 'done' });
    const files = await env.files('out/batch');
    expect(files).toEqual(
      expect.arrayContaining([
        'img-1/job.json',
        'hero/sheet.json',
        'hero/job.json',
        'chorus/1.mp3',
        'chorus/2.mp3',
      ]),
    );
    const sheet = JSON.parse(await readFile(join(env.dir, 'out/batch/hero/sheet.json'), 'utf8'));
    expect(typeof sheet).toBe('object');
    const job = JSON.parse(await readFile(join(env.dir, 'out/batch/chorus/job.json'), 'utf8'));
    expect(job.songs).toHaveLength(2);
    for (const song of job.songs) {
      expect(Object.keys(song).sort()).toEqual([
        'audio_duration',
        'audio_id',
        'file',
        'lyrics',
        'style',
        'title',
      ]);
      expect(typeof song.audio_id).toBe('string');
    }
    // Every file the store recorded is on disk with its size.
    for (const row of env.query<{ path: string; bytes: number }>('SELECT path, bytes FROM files')) {
      expect((await readFile(row.path)).length).toBe(row.bytes);
    }
  });

  it('hostile task ids stay inside the output folder', async () => {
    env = await makeRunEnv();
    const ids = [
      '../x',
      '../../etc/passwd',
      `${'long'.repeat(100)}`,
      'café-☕-日本',
      'con',
      '.hidden',
      'a/b',
      '..',
    ];
    const file = await env.manifest({
      tasks: ids.map((id, i) => ({ id, model: 'flat-image', input: { prompt: `hostile ${i}` } })),
    });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(0);
    const all = await walk(env.dir);
    const outside = all.filter((f) => !f.startsWith('out/batch/') && !/^(batch\.yaml|state\.db.*)$/.test(f));
    expect(outside).toEqual([]);
    const folders = new Set(
      all.filter((f) => f.startsWith('out/batch/') && f.split('/').length > 3).map((f) => f.split('/')[2]),
    );
    expect(folders.size).toBe(ids.length);
    for (const folder of folders) {
      expect(folder).not.toMatch(/^\.|\/|^con$/i);
      expect(Buffer.byteLength(folder ?? '')).toBeLessThanOrEqual(255);
    }
    expect(all.filter((f) => f.endsWith('/1.png'))).toHaveLength(ids.length);
  });

  it('the API key appears nowhere: output, log file, state database, result folder', async () => {
    const key = `sk-SENTINEL-${randomBytes(8).toString('hex')}`;
    env = await makeRunEnv({ apiKey: key, failRate: 0.3, seed: 4, latencyMs: 10 });
    const file = await env.manifest({ tasks: images(6) });
    const refused = await env.run(['--log-file', 'run.log', 'run', file, '--yes'], {
      env: { MEDIABATCH_API_KEY: `${key}-wrong` },
    });
    expect(refused.code).toBe(5);
    // The WAL and shared-memory files exist only while the run has the database open: copy them then.
    const walCopies: [string, Buffer][] = [];
    const copier = setInterval(() => {
      for (const f of ['state.db-wal', 'state.db-shm']) {
        const path = join(env?.dir ?? '', f);
        if (existsSync(path))
          readFile(path).then(
            (b) => walCopies.push([f, b]),
            () => undefined,
          );
      }
    }, 5);
    const done = await env.run(['--log-file', 'run.log', '--log-level', 'debug', 'run', file, '--yes']);
    clearInterval(copier);
    expect([0, 2]).toContain(done.code);
    expect(walCopies.length).toBeGreaterThan(0);
    const runs = [refused, done];
    await new Promise((r) => setTimeout(r, 100));
    const log = await readFile(join(env.dir, 'run.log'), 'utf8');
    expect(log).toContain('"msg":"submitted"');
    const haystacks: [string, Buffer][] = [
      ...walCopies,
      ...runs.flatMap((r, i): [string, Buffer][] => [
        [`stdout ${i}`, Buffer.from(r.stdout)],
        [`stderr ${i}`, Buffer.from(r.stderr)],
      ]),
    ];
    for (const f of await walk(env.dir)) haystacks.push([f, await readFile(join(env.dir, f))]);
    expect(haystacks.some(([f]) => f === 'state.db')).toBe(true);
    expect(existsSync(join(env.dir, 'out/batch'))).toBe(true);
    for (const [where, bytes] of haystacks) {
      expect(bytes.includes(key), where).toBe(false);
      expect(bytes.includes(Buffer.from(key, 'utf16le')), where).toBe(false);
    }
  });
});

describe('run: a planted link cannot redirect a result', () => {
  it('a task folder that is a link leaves that task unfetched, names the link, writes nothing through it, and the next run fetches it', async () => {
    const victim = await mkdtemp(join(tmpdir(), 'mediabatch-victim-'));
    try {
      env = await makeRunEnv();
      const file = await env.manifest({ tasks: images(2) });
      await mkdir(join(env.dir, 'out/batch'), { recursive: true });
      await symlink(victim, join(env.dir, 'out/batch/img-1'));
      const result = await env.run(['run', file, '--yes']);
      expect(result.code).toBe(4);
      expect(taskStates(env)).toEqual({ 'img-1': 'unfetched', 'img-2': 'done' });
      const [task] = env.query<{ error: string }>("SELECT error FROM tasks WHERE task_id = 'img-1'");
      expect(task?.error).toMatch(/img-1: is a symbolic link, not a folder; remove the link, then run again/);
      expect(reason(result)).toMatch(/img-1: is a symbolic link, not a folder; remove the link/);
      expect(await readdir(victim)).toEqual([]);
      expect(await env.files('out/batch/img-2')).toEqual(expect.arrayContaining(['1.png', 'job.json']));
      await rm(join(env.dir, 'out/batch/img-1'));
      const again = await env.run(['run', file, '--yes']);
      expect(again.code).toBe(0);
      expect(taskStates(env)).toEqual({ 'img-1': 'done', 'img-2': 'done' });
      expect(env.state().jobs).toHaveLength(2);
    } finally {
      await rm(victim, { recursive: true, force: true });
    }
  });
});

describe('taskFolderName: Windows device names', () => {
  it.each([
    ['con', /^con-[0-9a-f]{10}$/],
    ['AUX', /^AUX-[0-9a-f]{10}$/],
    ['nul', /^nul-[0-9a-f]{10}$/],
    ['Com1', /^Com1-[0-9a-f]{10}$/],
    ['lpt9', /^lpt9-[0-9a-f]{10}$/],
    ['aux.txt', /^aux-[0-9a-f]{10}\.txt$/],
    ['PRN.tar.gz', /^PRN-[0-9a-f]{10}\.tar\.gz$/],
    ['com1.png', /^com1-[0-9a-f]{10}\.png$/],
  ])('%s gets its hash before the first dot', (id, expected) => {
    const name = taskFolderName(id);
    expect(name).toMatch(expected);
    // Windows reads the name before the first dot: it must no longer be a device.
    expect(name.split('.')[0]).not.toMatch(/^(con|prn|aux|nul|com\d|lpt\d)$/i);
  });

  it.each(['console', 'auxiliary', 'com10', 'lpt', 'nul_x', 'conference.png'])('leaves %s as it is', (id) => {
    expect(taskFolderName(id)).toBe(id);
  });

  it('two device names that differ only in case stay apart', () => {
    expect(taskFolderName('aux.txt')).not.toBe(taskFolderName('AUX.txt'));
  });
});
