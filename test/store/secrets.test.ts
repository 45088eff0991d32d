import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { keyFingerprint } from '../../src/store/index.js';
import { FakeClock, storedBytes, submit, task, useTempDirs } from './helpers.js';

const temp = useTempDirs();
const SENTINEL_KEY = 'sk-SENTINEL-7f3a9c-never-on-disk';
const SIGNATURE = 'SIGNATURE-5d1e8b';

describe('secrets never reach the state database', () => {
  it('gives a short stable fingerprint of an API key', () => {
    expect(keyFingerprint(SENTINEL_KEY)).toMatch(/^[0-9a-f]{12}$/);
    expect(keyFingerprint(SENTINEL_KEY)).toBe(keyFingerprint(SENTINEL_KEY));
    expect(keyFingerprint(`${SENTINEL_KEY}x`)).not.toBe(keyFingerprint(SENTINEL_KEY));
  });

  it('keeps neither the API key nor a link signature in the database file or its WAL', () => {
    const file = join(temp.dir(), 'state', 'mediabatch.db');
    const store = temp.open(file, { now: new FakeClock().now });
    const fp = keyFingerprint(SENTINEL_KEY);
    store.runs.createRun({ id: 'r1', manifestPath: 'm.yaml', manifestName: 'm', settings: {} });
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    submit(store, 'r1', 'a', 'uuid-a', 3, fp);
    submit(store, 'r1', 'b', 'uuid-b', 3, fp);
    store.ledger.recordQuota(fp, { used: 10, quota: 100, period: 'monthly' });
    const link = `https://cdn.example.com/a.png?X-Amz-Signature=${SIGNATURE}`;
    store.jobs.recordJobStatus(
      'uuid-a',
      'success',
      { status: 'success', json: [{ type: 'image', value: link }] },
      'poll',
    );
    store.files.recordFile('r1', 'a', {
      index: 0,
      kind: 'image',
      path: '/out/a/1.png',
      bytes: 1,
      sha256: 'h',
      url: link,
    });
    store.jobs.recordJobStatus('uuid-b', 'failed', { status: 'failed' }, 'callback');

    const whileOpen = storedBytes(file, true);
    expect(whileOpen.includes(fp)).toBe(true); // the search works: what is written is found
    expect(whileOpen.includes(SENTINEL_KEY)).toBe(false);
    expect(whileOpen.includes(SIGNATURE)).toBe(false);

    store.close();
    const afterClose = storedBytes(file, false);
    expect(afterClose.includes(SENTINEL_KEY)).toBe(false);
    expect(afterClose.includes(SIGNATURE)).toBe(false);
  });
});
