// Real disk failures for tests: a tiny tmpfs fills up (ENOSPC), a read-only one refuses writes (EROFS).
// Mounting needs root with CAP_SYS_ADMIN; elsewhere the tests that need it are skipped, saying why.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function tryMount(): string | undefined {
  if (process.platform !== 'linux') return 'mounting a tmpfs needs Linux';
  if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root';
  const probe = mkdtempSync(join(tmpdir(), 'mediabatch-mount-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'mount -t tmpfs was refused (no CAP_SYS_ADMIN in this container)';
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

/** Why tmpfs tests cannot run here, or undefined when they can. */
export const cannotMount: string | undefined = tryMount();

if (cannotMount !== undefined) {
  console.warn(`skipping the full-disk and read-only-disk tests: ${cannotMount}`);
}

/** Mounts a tmpfs of `sizeKiB` on `dir`. Returns the unmount. */
export function mountTmpfs(dir: string, sizeKiB: number): () => void {
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k`, 'tmpfs', dir]);
  return () => execFileSync('umount', [dir]);
}

/** Makes the tmpfs mounted on `dir` read-only, keeping what it holds. */
export function remountReadOnly(dir: string): void {
  execFileSync('mount', ['-o', 'remount,ro', dir]);
}
