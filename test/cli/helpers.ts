// Shared by the CLI tests: temporary folders with manifests in them, removed after each test.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach } from 'vitest';

const made: string[] = [];

afterEach(async () => {
  await Promise.all(made.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A fresh folder holding `files` (path -> text); removed after the test. */
export async function folder(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mediabatch-cli-'));
  made.push(dir);
  for (const [name, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), text);
  }
  return dir;
}

/** Lines of a stream, without the empty one after the last newline. */
export function lines(text: string): string[] {
  return text.split('\n').filter((line, i, all) => line !== '' || i < all.length - 1);
}
