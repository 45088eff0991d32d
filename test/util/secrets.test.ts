// A registered secret is scrubbed from every file written, in each form a file may hold it, even
// when a streamed writer receives it cut in two across its 64 KiB pieces.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileAtomic, writeFileAtomicStream } from '../../src/util/fsatomic.js';
import { forgetSecrets, registerSecret, scrub } from '../../src/util/secrets.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-secrets-'));
});
afterEach(async () => {
  forgetSecrets();
  await rm(dir, { recursive: true, force: true });
});

describe('scrubbing secrets from files', () => {
  it('finds a secret cut in two between the pieces of a streamed file, and keeps every other character', async () => {
    const key = 'sk-SENTINEL-0123456789abcdef';
    registerSecret(key);
    const path = join(dir, 'report.csv');
    // The first piece fills the writer's buffer and ends in the middle of the key; emoji sit at the cuts.
    const head = `${'😀'.repeat(40_000)}${key.slice(0, 10)}`;
    const tail = `${key.slice(10)}${'é😀'.repeat(50_000)}`;
    await writeFileAtomicStream(path, async (sink) => {
      await sink.write(head);
      await sink.write(tail);
    });
    const text = await readFile(path, 'utf8');
    expect(text.includes(key)).toBe(false);
    expect(text).toBe(`${'😀'.repeat(40_000)}[redacted]${'é😀'.repeat(50_000)}`);
  });

  it('removes the JSON, HTML, CSV and URL forms of a key with punctuation', async () => {
    const key = 'k<&"ey/+_x';
    registerSecret(key);
    const forms = [
      key,
      JSON.stringify(key),
      encodeURIComponent(key),
      '"k<&""ey/+_x"',
      'k&lt;&amp;&quot;ey/+_x',
    ];
    const script = JSON.stringify(key).replace(
      /[<>&]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
    for (const form of [...forms, script]) expect(scrub(`a ${form} b`), form).not.toContain('ey/+_x');
    await writeFileAtomic(join(dir, 'job.json'), Buffer.from(JSON.stringify({ echo: key })));
    expect(await readFile(join(dir, 'job.json'), 'utf8')).toBe('{"echo":"[redacted]"}');
  });

  it('writes text without a registered secret byte for byte', async () => {
    registerSecret('sk-SENTINEL-0123456789abcdef');
    const text = 'a [redacted]-free line 😀\n'.repeat(5000);
    await writeFileAtomicStream(join(dir, 'r.md'), (sink) => sink.write(text));
    expect(await readFile(join(dir, 'r.md'), 'utf8')).toBe(text);
  });
});
