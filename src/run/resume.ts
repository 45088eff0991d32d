// Which run a `run <manifest>` drives. A run id rendered from a template (`{{name}}-{{date}}`) changes
// with the clock, so an interrupted run resumed after midnight would otherwise start a second paid run
// and leave the first one's paid jobs behind. The unfinished run of the manifest comes first.

import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { parseShardRunId, type Shard, shardRunId } from '../plan/shard.js';
import { OWED, type RunRecord, type Store } from '../store/index.js';

export interface RunChoice {
  runId: string;
  /** The unfinished run being resumed instead of the template's id. */
  resumed?: RunRecord;
  /** With `newRun`: the unfinished run left behind, and how many of its tasks are owed. */
  leftBehind?: { run: RunRecord; owed: number };
}

export interface RunChoiceInput {
  manifestPath: string;
  manifestName: string;
  /** What the manifest's `run` template renders to now. */
  templateRunId: string;
  /** `--run-id`: the user named the run. */
  explicitRunId?: string;
  /** `--new-run`: start the template's run even when an older one is unfinished. */
  newRun?: boolean;
}

export function chooseRun(store: Store, input: RunChoiceInput): RunChoice {
  if (input.explicitRunId !== undefined) return { runId: input.explicitRunId };
  const unfinished = store.runs.unfinishedRunOf(input.manifestPath, input.manifestName);
  if (unfinished === undefined || unfinished.id === input.templateRunId)
    return { runId: input.templateRunId };
  if (input.newRun) {
    const counts = store.tasks.countTasksByState(unfinished.id);
    const owed = OWED.reduce((n, s) => n + counts[s], 0);
    return { runId: input.templateRunId, leftBehind: { run: unfinished, owed } };
  }
  return { runId: unfinished.id, resumed: unfinished };
}

/** "3 h", "2 days": how long ago a run was created, for the line that says which run is resumed. */
export function ageOf(run: RunRecord, now: Date): string {
  const minutes = Math.max(0, Math.round((now.getTime() - run.createdAt.getTime()) / 60_000));
  if (minutes < 120) return `${minutes} min`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h`;
  return `${Math.round(hours / 24)} days`;
}

/** A shard run that cannot be driven as asked: one line for the user (exit 1). */
export class ShardRunError extends MediabatchError {
  override name = 'ShardRunError';
  override readonly exitCode = EXIT.invalid;
}

/**
 * Which run a shard drives (`<run>.shard-<i>-of-<n>`): its unfinished run first, as for any run. Refused
 * when the state file holds the run split into another count (its tasks would fall in other shards and be
 * charged again there), an unfinished run of the manifest that is not this shard, or this shard's run
 * started from another manifest.
 */
export function chooseShardRun(store: Store, input: RunChoiceInput, shard: Shard): RunChoice {
  const asked = `--shard ${shard.index}/${shard.count}`;
  let base = input.explicitRunId ?? input.templateRunId;
  let resumed: RunRecord | undefined;
  const unfinished =
    input.explicitRunId === undefined && !input.newRun
      ? store.runs.unfinishedRunOf(input.manifestPath, input.manifestName)
      : undefined;
  if (unfinished) {
    const found = parseShardRunId(unfinished.id);
    if (!found) {
      throw new ShardRunError(
        `run ${unfinished.id} of this manifest is unfinished in this state file and is not a shard: finish it without --shard, or give the shard a state file of its own (--state)`,
      );
    }
    if (found.shard.count !== shard.count) throw changedCount(found.base, unfinished.id, found.shard, shard);
    if (found.shard.index === shard.index) {
      base = found.base;
      if (found.base !== input.templateRunId) resumed = unfinished;
    }
  }
  const runId = shardRunId(base, shard);
  for (const run of store.runs.listRuns()) {
    const other = parseShardRunId(run.id);
    if (other?.base === base && other.shard.count !== shard.count) {
      throw changedCount(base, run.id, other.shard, shard);
    }
  }
  const existing = store.runs.getRun(runId);
  if (
    existing &&
    (existing.manifestPath !== input.manifestPath || existing.manifestName !== input.manifestName)
  ) {
    throw new ShardRunError(
      `run ${runId} (${asked}) was started from the manifest ${existing.manifestPath} (name ${existing.manifestName}), not ${input.manifestPath} (name ${input.manifestName}): run that manifest, or start another run (--run-id, or another --state)`,
    );
  }
  return { runId, ...(resumed ? { resumed } : {}) };
}

function changedCount(base: string, runId: string, had: Shard, asked: Shard): ShardRunError {
  return new ShardRunError(
    `run ${base} is split into ${had.count} shards (this state file holds ${runId}), and this is --shard ${asked.index}/${asked.count}: another count moves tasks to other shards, which would charge them again; resume it with --shard ${had.index}/${had.count}, or start another run (--run-id)`,
  );
}
