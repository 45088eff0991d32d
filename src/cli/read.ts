// What the read-only commands (status, report, balance) share: the state file opened only when it exists,
// and the one line for a run id it does not know.

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { runLocation } from '../results/output.js';
import { keptSettings, openStore, type RunRecord, type Store } from '../store/index.js';
import { EXIT, ExitError } from './errors.js';
import type { CliIO } from './io.js';

export interface ReadContext {
  io: CliIO;
  /** `--state`, as the user gave it (resolved against io.cwd). */
  statePath: string;
}

/** Opens the state database if it exists; undefined when there is none yet (nothing is created). */
export function openExistingStore(ctx: ReadContext): Store | undefined {
  const file = resolve(ctx.io.cwd, ctx.statePath);
  return existsSync(file) ? openStore(file) : undefined;
}

/** Exit 1 for a run id the state database does not know, naming the known ones. */
export function unknownRunError(runId: string, store: Store | undefined, statePath: string): ExitError {
  const known = store?.listRuns().map((r) => r.id) ?? [];
  const hint =
    known.length === 0
      ? 'there are no runs yet: start one with `mediabatch run <manifest>`'
      : `known runs, newest first: ${known.slice(0, 5).join(', ')}${known.length > 5 ? ', …' : ''}`;
  return new ExitError(EXIT.invalid, `run ${runId}: not found in ${statePath}; ${hint}`);
}

/** `<output>/<run>`, from the settings the run was started with. */
export function runFolder(run: RunRecord, cwd: string): string {
  const output = keptSettings(run).output ?? resolve(cwd, 'out');
  return runLocation(output, run.id);
}
