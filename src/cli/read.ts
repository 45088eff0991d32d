// What the read-only commands (status, report, balance) share: the state file opened only when it exists,
// and the one line for a run id it does not know.

import { resolve } from 'node:path';
import {
  invocationOf,
  newRunCommandLine,
  type Reader,
  type RunInvocation,
  type RunOfInvocation,
  stateInLine,
} from '../results/invocation.js';
import { runLocation } from '../results/output.js';
import { keptSettings, openStore, type RunRecord, type Store } from '../store/index.js';
import { stateExists, stateLocation } from '../store/location.js';
import { EXIT, ExitError } from './errors.js';
import type { CliIO } from './io.js';

export interface ReadContext {
  io: CliIO;
  /** `--state`, as the user gave it (resolved against io.cwd). */
  statePath: string;
  /** `--config`, as the user gave it: the commands printed for the person carry it. */
  configFile?: string;
}

/** Opens the state database if it exists; undefined when there is none yet (nothing is created). */
export function openExistingStore(ctx: ReadContext): Store | undefined {
  const file = stateLocation(ctx.io.cwd, ctx.statePath);
  return stateExists(file) ? openStore(file) : undefined;
}

/** Exit 1 for a run id the state database does not know, naming the known ones. */
export function unknownRunError(runId: string, store: Store | undefined, statePath: string): ExitError {
  const known = store?.runs.listRuns().map((r) => r.id) ?? [];
  const hint =
    known.length === 0
      ? `there are no runs yet: start one with \`${newRunCommandLine({ state: statePath })}\``
      : `known runs, newest first: ${known.slice(0, 5).join(', ')}${known.length > 5 ? ', …' : ''}`;
  return new ExitError(EXIT.invalid, `run ${runId}: not found in ${stateInLine(statePath)}; ${hint}`);
}

/** `<output>/<run>`, from the settings the run was started with. */
export function runFolder(run: RunRecord, cwd: string): string {
  const output = keptSettings(run).output ?? resolve(cwd, 'out');
  return runLocation(output, run.id);
}

/**
 * The run's invocation as this command reaches it: the commands printed about the run carry the state
 * file and config this command was given, and the flags the run was started with.
 */
export function runInvocation(
  run: RunOfInvocation,
  ctx: { io: Pick<CliIO, 'cwd'>; statePath: string; configFile?: string },
): RunInvocation {
  return invocationOf(run, readerOf(ctx));
}

/** How this command reached the state file: what the commands it prints (or writes in a report) carry. */
export function readerOf(ctx: { io: Pick<CliIO, 'cwd'>; statePath: string; configFile?: string }): Reader {
  return {
    cwd: ctx.io.cwd,
    state: ctx.statePath,
    ...(ctx.configFile !== undefined ? { config: ctx.configFile } : {}),
  };
}
