// An output folder belongs to one run of one state file. Without a mark, a second state file (a test, a
// typo in --state) running a manifest with the same name would rewrite the first one's report beside
// files it knows nothing about. The mark is a small JSON file in `<output>/<run>/`.

import { readFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { ensureFolderUnder, writeFileAtomic } from '../util/fsatomic.js';

export const MARKER_FILE = '.mediabatch-run.json';

interface Marker {
  state_file: string;
  run: string;
}

export class RunFolderTakenError extends Error {
  override name = 'RunFolderTakenError';
}

/**
 * Marks `runDir` as the folder of `runId` in `stateFile` (absolute), or throws RunFolderTakenError when
 * another state file or run owns it. `shown` turns paths into what the user typed.
 */
export async function claimRunFolder(
  runDir: string,
  stateFile: string,
  runId: string,
  shown: (path: string) => string = (p) => p,
): Promise<void> {
  const path = join(runDir, MARKER_FILE);
  const found = await readMarker(path);
  const state = resolve(stateFile);
  if (found !== undefined) {
    if (found.state_file === state && found.run === runId) return;
    throw new RunFolderTakenError(
      `${shown(runDir)} belongs to run ${found.run} of the state file ${shown(found.state_file)}, and this is run ${runId} of ${shown(state)}: use that --state, or give this manifest another output or name`,
    );
  }
  const root = resolve(runDir, '..');
  await ensureFolderUnder(root, relative(root, runDir));
  const marker: Marker = { state_file: state, run: runId };
  await writeFileAtomic(path, `${JSON.stringify(marker, null, 2)}\n`, { root });
}

/** Checks the mark without writing one (for `report`): throws RunFolderTakenError on a mismatch. */
export async function checkRunFolder(
  runDir: string,
  stateFile: string,
  runId: string,
  shown: (path: string) => string = (p) => p,
): Promise<void> {
  const found = await readMarker(join(runDir, MARKER_FILE));
  if (found === undefined) return;
  const state = resolve(stateFile);
  if (found.state_file !== state || found.run !== runId) {
    throw new RunFolderTakenError(
      `${shown(runDir)} belongs to run ${found.run} of the state file ${shown(found.state_file)}, not to run ${runId} of ${shown(state)}: nothing was written there`,
    );
  }
}

async function readMarker(path: string): Promise<Marker | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const value = JSON.parse(text) as Partial<Marker>;
    if (typeof value.state_file === 'string' && typeof value.run === 'string') {
      return { state_file: value.state_file, run: value.run };
    }
  } catch {
    // A damaged mark is no claim: it is written anew.
  }
  return undefined;
}
