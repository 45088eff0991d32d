import type { LoadedManifest } from '../manifest/types.js';
import { loadChecked as loadCheckedManifest } from '../plan/build.js';
import type { CheckedTask } from '../plan/plan.js';
import type { CliIO } from './io.js';

export function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

/** Local inputs need no bucket to be checked and priced; `run` uploads them and needs one. */
export const LOCAL_FILES_NOTE = (n: number): string =>
  `${plural(n, 'local file')} (file:): \`run\` uploads ${n === 1 ? 'it' : 'them'} to the bucket of storage: in mediabatch.config.yaml (or MEDIABATCH_STORAGE_URL) and refuses without one`;

/**
 * Loads, expands and checks a manifest against every static rule; throws an ExitError listing every
 * problem: the manifest's own and the catalog's for every task that expanded, all in one go.
 */
export async function loadChecked(
  file: string,
  io: CliIO,
  opts: { allowOutside?: boolean; overrideVars?: Readonly<Record<string, unknown>> } = {},
): Promise<{ manifest: LoadedManifest; tasks: CheckedTask[] }> {
  return loadCheckedManifest(file, {
    cwd: io.cwd,
    now: io.now(),
    allowOutside: opts.allowOutside ?? false,
    ...(opts.overrideVars ? { vars: opts.overrideVars } : {}),
  });
}
