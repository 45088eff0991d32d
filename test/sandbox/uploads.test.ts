// `run --sandbox` hands its local inputs to the embedded sandbox, which serves them back by link
// (with ranges, as a bucket does), each content once; a sandbox in another process is never used so.
import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { embeddedInputStorage, SANDBOX_INPUTS_LINE } from '../../src/sandbox/uploads.js';
import { closeAll, openSandbox } from './helpers.js';

afterEach(closeAll);

describe('the embedded sandbox as the store of local inputs', () => {
  it('keeps each content once and serves it at its link, whole or a range; unknown keys are 404', async () => {
    const { sandbox } = await openSandbox({ speed: 0 });
    const said: string[] = [];
    const storage = embeddedInputStorage(sandbox.baseUrl, (line) => said.push(line));
    if (!storage) throw new Error('the sandbox of this process is not found by its URL');
    await storage.check();
    expect(said).toEqual([SANDBOX_INPUTS_LINE]);
    const bytes = Buffer.from('0123456789');
    const key = storage.inputKey('ab'.repeat(32), '.png');
    expect(await storage.putIfAbsent(key, () => Readable.from([bytes]), 10, 'image/png')).toEqual({
      key,
      uploaded: true,
    });
    expect((await storage.putIfAbsent(key, () => bytes, 10, 'image/png')).uploaded).toBe(false);
    const link = await storage.link(key);
    expect(link).toBe(`${sandbox.baseUrl}/_sandbox/uploads/inputs/${'ab'.repeat(32)}.png`);
    const whole = await request(link);
    expect([whole.statusCode, whole.headers['content-type'], await whole.body.text()]).toEqual([
      200,
      'image/png',
      '0123456789',
    ]);
    const part = await request(link, { headers: { range: 'bytes=2-4' } });
    expect([part.statusCode, await part.body.text()]).toEqual([206, '234']);
    const missing = await request(`${sandbox.baseUrl}/_sandbox/uploads/inputs/nope.png`);
    expect(missing.statusCode).toBe(404);
    await missing.body.dump();
  });

  it('is not found for a URL no sandbox of this process listens at', async () => {
    const { sandbox } = await openSandbox({ speed: 0 });
    expect(embeddedInputStorage(`${sandbox.baseUrl}/`)).toBeUndefined();
    await sandbox.close();
    expect(embeddedInputStorage(sandbox.baseUrl)).toBeUndefined();
  });
});
