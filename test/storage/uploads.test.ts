// Local inputs: the checks on the files, then upload once by content (across runs), and links made
// fresh at each send, against a real S3 server on loopback.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/exit-codes.js';
import { checkLocalInput, localRef } from '../../src/media/local-input.js';
import { makeWav } from '../../src/media/synth.js';
import {
  localInputsOf,
  NO_STORAGE_MESSAGE,
  NoStorageError,
  prepareLocalInputs,
  uploadLocalInputs,
  withInputLinks,
} from '../../src/run/runner/uploads.js';
import { createStorage, StorageError } from '../../src/storage/index.js';
import { startS3, type TestS3 } from '../helpers/s3.js';

const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]), Buffer.from('JFIF face one')]);
const JPEG2 = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]), Buffer.from('JFIF face two')]);
const MB = 1024 * 1024;

let s3: TestS3;
let restore: () => void;
let dir: string;

beforeAll(async () => {
  s3 = await startS3();
  restore = s3.useCredentials();
  dir = await mkdtemp(join(tmpdir(), 'mb-local-'));
  await mkdir(join(dir, 'faces'));
  await writeFile(join(dir, 'faces/a.jpg'), JPEG);
  await writeFile(join(dir, 'faces/b.jpg'), JPEG2);
  await writeFile(join(dir, 'faces/same-as-a.jpg'), JPEG);
  await writeFile(join(dir, 'voice.wav'), makeWav(1));
  await writeFile(join(dir, 'notes.txt'), 'not a picture');
  await writeFile(join(dir, '../mb-outside.jpg'), JPEG);
  await symlink(join(dir, '../mb-outside.jpg'), join(dir, 'faces/link.jpg'));
  execFileSync('mkfifo', [join(dir, 'pipe.jpg')]);
});
afterAll(async () => {
  restore();
  await s3.close();
  await rm(dir, { recursive: true, force: true });
  await rm(join(dir, '../mb-outside.jpg'), { force: true });
});

describe('local input references', () => {
  it('reads file:path and { file: path }, and nothing else', () => {
    expect(localRef('file:faces/a.jpg')).toBe('faces/a.jpg');
    expect(localRef({ file: 'voice.wav' })).toBe('voice.wav');
    expect(localRef('file:///etc/passwd')).toBeUndefined();
    expect(localRef('https://x/a.jpg')).toBeUndefined();
    expect(localRef({ file: 'a', other: 1 })).toBeUndefined();
  });

  it('checks each file: inside the folder, regular, within the size, of the field kind by its bytes', async () => {
    const check = (path: string, kind: 'image' | 'audio' | 'video', maxBytes = 10 * MB) =>
      checkLocalInput(dir, path, kind, { maxBytes }).then(
        (ok) => ok,
        (e: Error) => e.message,
      );
    expect(await check('faces/a.jpg', 'image')).toMatchObject({
      bytes: JPEG.length,
      ext: '.jpg',
      contentType: 'image/jpeg',
    });
    expect(await check('voice.wav', 'audio')).toMatchObject({ contentType: 'audio/wav' });
    expect(await check('faces/zz.jpg', 'image')).toBe('file:faces/zz.jpg: no such file');
    expect(await check('../mb-outside.jpg', 'image')).toBe(
      "file:../mb-outside.jpg is outside the manifest's folder; move it inside (or use --allow-outside-data)",
    );
    expect(await check('faces/link.jpg', 'image')).toMatch(
      /^file:faces\/link\.jpg is outside the manifest's folder/,
    );
    expect(await check('faces', 'image')).toBe('file:faces is not a regular file');
    expect(await check('pipe.jpg', 'image')).toBe('file:pipe.jpg is not a regular file');
    expect(await check('notes.txt', 'image')).toBe(
      'file:notes.txt is not an image (not a media file we know)',
    );
    expect(await check('faces/a.jpg', 'audio')).toBe('file:faces/a.jpg is not audio (a JPEG image)');
    expect(await check('voice.wav', 'audio', 1000)).toBe(
      'file:voice.wav is 16,044 bytes; this field takes at most 1,000 bytes',
    );
    // The spec's limits are decimal: 10 MB is 10,000,000 bytes, and a file just over it says so exactly.
    expect(await check('voice.wav', 'audio', 16_000)).toBe(
      'file:voice.wav is 16,044 bytes; this field takes at most 16,000 bytes',
    );
  });
});

describe('uploads', () => {
  it('uploads each distinct file once; a second run uploads nothing; links serve the bytes', async () => {
    const storage = createStorage(s3.config('u1'));
    const inputs = await Promise.all(
      ['faces/a.jpg', 'faces/b.jpg', 'faces/same-as-a.jpg'].map((p) =>
        checkLocalInput(dir, p, 'image', { maxBytes: 10 * MB }),
      ),
    );
    const progress: number[] = [];
    const first = await uploadLocalInputs(storage, inputs, { onProgress: (done) => progress.push(done) });
    // same-as-a.jpg has a's bytes: the same key; it counts as a distinct file (another path) but is not sent again.
    expect([...first.values()].map((u) => u.uploaded).sort()).toEqual([false, true, true]);
    expect(first.get('faces/a.jpg')?.key).toBe(first.get('faces/same-as-a.jpg')?.key);
    expect(progress).toEqual([1, 2, 3]);
    const second = await uploadLocalInputs(createStorage(s3.config('u1')), inputs);
    expect([...second.values()].map((u) => u.uploaded)).toEqual([false, false, false]);

    const sent = await withInputLinks(
      { face_image_url: 'file:faces/a.jpg', target: { file: 'faces/b.jpg' }, prompt: 'keep' },
      first,
      storage,
    );
    expect(sent['prompt']).toBe('keep');
    const bytes = async (url: unknown) => Buffer.from(await (await fetch(String(url))).arrayBuffer());
    expect(await bytes(sent['face_image_url'])).toEqual(JPEG);
    expect(await bytes(sent['target'])).toEqual(JPEG2);
    storage.destroy();
  });

  it('a link signed in an earlier session has expired; the one made at sending works', async () => {
    const input = await checkLocalInput(dir, 'voice.wav', 'audio', { maxBytes: 10 * MB });
    const earlier = createStorage(s3.config('u2', { linkTtlSeconds: 60 }), {
      now: () => new Date(Date.now() - 3600_000),
    });
    const uploaded = await uploadLocalInputs(earlier, [input]);
    const old = await withInputLinks({ audio_url: 'file:voice.wav' }, uploaded, earlier);
    expect((await fetch(String(old['audio_url']))).status).toBe(403);
    const now = createStorage(s3.config('u2', { linkTtlSeconds: 60 }));
    const fresh = await withInputLinks({ audio_url: 'file:voice.wav' }, uploaded, now);
    expect(fresh['audio_url']).not.toBe(old['audio_url']);
    expect((await fetch(String(fresh['audio_url']))).status).toBe(200);
    earlier.destroy();
    now.destroy();
  });

  it('wrong credentials stop the uploads at once with one line (exit 5), not retried', async () => {
    const back = s3.useCredentials('WRONG', 'SENTINEL-wrong-secret-1');
    try {
      const input = await checkLocalInput(dir, 'faces/b.jpg', 'image', { maxBytes: 10 * MB });
      let sleeps = 0;
      const error = await uploadLocalInputs(createStorage(s3.config('u3')), [input], {
        sleep: async () => {
          sleeps += 1;
        },
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StorageError);
      expect((error as StorageError).exitCode).toBe(EXIT.unauthorized);
      expect((error as Error).message).not.toContain('SENTINEL');
      expect(sleeps).toBe(0);
    } finally {
      back();
      s3.useCredentials();
    }
  });

  it('before the first POST: refused without storage; with it, uploaded once and linked at each send', async () => {
    const wanted = localInputsOf([
      {
        body: { audio_url: 'file:voice.wav', prompt: 'x' },
        mediaKinds: new Map([['audio_url', 'audio' as const]]),
      },
      {
        body: { image_url: { file: 'faces/a.jpg' } },
        mediaKinds: new Map([['image_url', 'image' as const]]),
      },
      { body: { audio_url: 'file:voice.wav' }, mediaKinds: new Map([['audio_url', 'audio' as const]]) },
    ]);
    expect(wanted).toEqual([
      { path: 'voice.wav', kind: 'audio' },
      { path: 'faces/a.jpg', kind: 'image' },
    ]);
    const refused = await prepareLocalInputs(undefined, dir, wanted).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NoStorageError);
    expect((refused as Error).message).toBe(NO_STORAGE_MESSAGE);
    expect(await prepareLocalInputs(undefined, dir, [])).toBeUndefined();

    const uploadedFlags: boolean[] = [];
    const storage = createStorage(s3.config('u4'));
    const links = await prepareLocalInputs(storage, dir, wanted, {
      onProgress: (_d, _t, _i, r) => uploadedFlags.push(r.uploaded),
    });
    expect(uploadedFlags).toEqual([true, true]);
    const sent = await links?.({ audio_url: 'file:voice.wav', image_url: { file: 'faces/a.jpg' } });
    expect((await fetch(String(sent?.['image_url']))).status).toBe(200);
    const again: boolean[] = [];
    await prepareLocalInputs(createStorage(s3.config('u4')), dir, wanted, {
      onProgress: (_d, _t, _i, r) => again.push(r.uploaded),
    });
    expect(again).toEqual([false, false]);
    storage.destroy();
  });

  it('a bucket that does not exist stops before anything is uploaded or sent', async () => {
    const storage = createStorage({ ...s3.config('u5'), bucket: 'missing-bucket' });
    const error = await prepareLocalInputs(storage, dir, [{ path: 'voice.wav', kind: 'audio' }]).catch(
      (e: unknown) => e,
    );
    expect((error as Error).message).toMatch(
      /^bucket missing-bucket does not exist at http:\/\/127\.0\.0\.1:\d+; create it or fix storage\.url$/,
    );
    storage.destroy();
  });
});
