// vitest's global setup: the tests' temp folders in memory (/dev/shm) where there is room. On the CI
// machine's disk (ext4 in a virtual machine) every fsync of a test's SQLite state and every file a
// PostgreSQL test database is copied from cost real waits (150-500 ms a database copy, against 20-40 ms
// in memory); the tests read what a program wrote, never whether it reached a platter. Workers and what
// they start inherit TMPDIR; a test that needs the disk (hard links into node_modules) reads
// MB_DISK_TMPDIR. MB_TEST_DISK_TMP=1 keeps everything on disk, to compare.
import { accessSync, chmodSync, constants, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MEMORY_ROOT = '/dev/shm';
/** Room the suite may take at once: a test database is 9 MB and a file keeps its own until it ends. */
const MEMORY_ROOM = 8 * 1024 ** 3;

/** The temp folder on disk, for the tests that need one (tmpdir() is in memory under vitest). */
export function diskTmpdir(): string {
  return process.env['MB_DISK_TMPDIR'] ?? tmpdir();
}

function memoryRoot(): string | undefined {
  try {
    accessSync(MEMORY_ROOT, constants.W_OK);
    const { bavail, bsize } = statfsSync(MEMORY_ROOT);
    return bavail * bsize >= MEMORY_ROOM ? MEMORY_ROOT : undefined;
  } catch {
    // No /dev/shm (not Linux, or a container without one): the temp folder stays on disk.
    return undefined;
  }
}

export default function setup(): () => void {
  const root = process.env['MB_TEST_DISK_TMP'] === '1' ? undefined : memoryRoot();
  if (root === undefined) return () => {};
  const dir = mkdtempSync(join(root, 'mediabatch-tests-'));
  // Open to every user, as /tmp is: a test's PostgreSQL runs as the `postgres` user when the tests are root.
  chmodSync(dir, 0o1777);
  process.env['MB_DISK_TMPDIR'] = tmpdir();
  process.env['TMPDIR'] = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
