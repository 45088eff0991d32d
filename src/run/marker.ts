// An output folder belongs to one run of one state file. Without a mark, a second state file (a test, a
// typo in --state) running a manifest with the same name would rewrite the first one's report beside
// files it knows nothing about. The mark is a small JSON file in `<output>/<run>/`.

import { readFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { parseShardRunId } from '../plan/shard.js';
import { stateName } from '../store/location.js';
import { ensureFolderUnder, writeFileAtomic } from '../util/fsatomic.js';

export const MARKER_FILE = '.mediabatch-run.json';

// The shards of a run share its folder, each with a state file of its own on its own machine
// (often at the same path): their mark names the run and the shard count instead of one state file. A run
// that is not a shard, or shards of another count, are still refused.
type Marker = { state_file: string; run: string } | { run: string; shards: number };

/** What claims a folder: one run of one state file, or the n shards of a run. */
function claimOf(stateFile: string, runId: string): Marker {
  const shard = parseShardRunId(runId);
  return shard
    ? { run: shard.base, shards: shard.shard.count }
    : { state_file: stateName(stateFile), run: runId };
}

function sameClaim(a: Marker, b: Marker): boolean {
  if ('shards' in a || 'shards' in b)
    return 'shards' in a && 'shards' in b && a.run === b.run && a.shards === b.shards;
  return a.state_file === b.state_file && a.run === b.run;
}

/** This run, as the refusal names it: a shard of its run, or a run of its state file. */
function describeMine(stateFile: string, runId: string, shown: (path: string) => string): string {
  const shard = parseShardRunId(runId);
  return shard
    ? `shard ${shard.shard.index} of ${shard.shard.count} of run ${shard.base}`
    : `run ${runId} of ${shown(stateName(stateFile))}`;
}

function describeClaim(m: Marker, shown: (path: string) => string): string {
  return 'shards' in m
    ? `run ${m.run} split into ${m.shards} shards`
    : `run ${m.run} of the state file ${shown(m.state_file)}`;
}

export class RunFolderTakenError extends MediabatchError {
  override name = 'RunFolderTakenError';
  override readonly exitCode = EXIT.invalid;
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
  const marker = claimOf(stateFile, runId);
  if (found !== undefined) {
    if (sameClaim(found, marker)) return;
    throw new RunFolderTakenError(
      `${shown(runDir)} belongs to ${describeClaim(found, shown)}, and this is ${describeMine(stateFile, runId, shown)}: ${takenAdvice(found, marker)}`,
    );
  }
  const root = resolve(runDir, '..');
  await ensureFolderUnder(root, relative(root, runDir));
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
  const marker = claimOf(stateFile, runId);
  if (!sameClaim(found, marker)) {
    throw new RunFolderTakenError(
      `${shown(runDir)} belongs to ${describeClaim(found, shown)}, not to ${describeMine(stateFile, runId, shown)}: nothing was written there`,
    );
  }
}

function takenAdvice(found: Marker, mine: Marker): string {
  if ('shards' in found && 'shards' in mine && found.run === mine.run) {
    return `a run keeps the shard count it started with (--shard i/${found.shards}), or give it another output or name`;
  }
  return 'shards' in found
    ? 'run it with --shard i/' + found.shards + ', or give this manifest another output or name'
    : 'use that --state, or give this manifest another output or name';
}

async function readMarker(path: string): Promise<Marker | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
  return parseMarker(text);
}

function parseMarker(text: string): Marker | undefined {
  try {
    const value = JSON.parse(text) as { state_file?: unknown; run?: unknown; shards?: unknown };
    if (typeof value.run === 'string' && typeof value.shards === 'number') {
      return { run: value.run, shards: value.shards };
    }
    if (typeof value.state_file === 'string' && typeof value.run === 'string') {
      return { state_file: value.state_file, run: value.run };
    }
  } catch {
    // A damaged mark is no claim: it is written anew.
  }
  return undefined;
}

/** What a bucket's run prefix needs to be claimed by a run: where its mark goes, and how to read it. */
export interface MarkStore {
  /** The mark's text; undefined when there is none. */
  read(): Promise<string | undefined>;
  write(text: string): Promise<void>;
}

/**
 * The mark of a run's prefix in a bucket. Only shards write one (`{run, shards}`): the prefix they share
 * then refuses a run that is not a shard and shards of another count, on any machine. A run that is not a
 * shard writes none (its state file keeps its prefix, as before).
 */
export async function claimBucketPrefix(where: string, marks: MarkStore, runId: string): Promise<void> {
  const text = await marks.read();
  const found = text === undefined ? undefined : parseMarker(text);
  const shard = parseShardRunId(runId);
  if (found && 'shards' in found) {
    const mine: Marker = shard
      ? { run: shard.base, shards: shard.shard.count }
      : { state_file: '', run: runId };
    if (sameClaim(found, mine)) return;
    const me = shard
      ? `shard ${shard.shard.index} of ${shard.shard.count} of run ${shard.base}`
      : `run ${runId}`;
    throw new RunFolderTakenError(
      `${where} belongs to ${describeClaim(found, (p) => p)}, and this is ${me}: ${takenAdvice(found, mine)}`,
    );
  }
  if (shard && !found) {
    await marks.write(`${JSON.stringify({ run: shard.base, shards: shard.shard.count }, null, 2)}\n`);
  }
}
