// Browser tests use Debian's chromium (playwright-core never downloads one). A missing browser fails
// them, so CI cannot pass without looking at the gallery; MEDIABATCH_SKIP_BROWSER=1 skips them on purpose.
import { existsSync } from 'node:fs';
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
