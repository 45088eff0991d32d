// Which run a `run <manifest>` drives. A run id rendered from a template (`{{name}}-{{date}}`) changes
// with the clock, so an interrupted run resumed after midnight would otherwise start a second paid run
// and leave the first one's paid jobs behind. The unfinished run of the manifest comes first.

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
  const unfinished = store.unfinishedRunOf(input.manifestPath, input.manifestName);
  if (unfinished === undefined || unfinished.id === input.templateRunId)
    return { runId: input.templateRunId };
  if (input.newRun) {
    const counts = store.countTasksByState(unfinished.id);
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
