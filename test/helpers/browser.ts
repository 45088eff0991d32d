// Browser tests use Debian's chromium (playwright-core never downloads one). A missing browser fails
// them, so CI cannot pass without looking at the gallery; MEDIABATCH_SKIP_BROWSER=1 skips them on purpose.
import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'vitest';

export const CHROMIUM = '/usr/bin/chromium';
const present = existsSync(CHROMIUM);

/** True when the browser tests are to be skipped: only when the environment says so. */
export const SKIP_BROWSER = !present && process.env['MEDIABATCH_SKIP_BROWSER'] === '1';

/** One failing test where the browser is missing and nobody asked to skip: the reason, said plainly. */
export function requireBrowser(): void {
  if (present || SKIP_BROWSER) return;
  it('has a browser for the gallery tests', () => {
    throw new Error(
      `${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium), or set MEDIABATCH_SKIP_BROWSER=1 to skip the browser tests`,
    );
  });
}

/**
 * Where a browser test keeps its screenshot `name` (a PNG): docs/images, which the docs show, only when
 * MEDIABATCH_SCREENSHOTS=1 (`npm run screenshots`); else a folder under the system's temporary one, so
 * that `npm test` leaves the working copy as it found it.
 */
export function screenshotPath(name: string): string {
  if (process.env['MEDIABATCH_SCREENSHOTS'] === '1') {
    return fileURLToPath(new URL(`../../docs/images/${name}`, import.meta.url));
  }
  const dir = join(tmpdir(), 'mediabatch-screenshots');
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}
