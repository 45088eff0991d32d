import { formatProblem } from '../manifest/index.js';
import { sortProblems } from '../manifest/problems.js';
import type { LoadedManifest, ManifestProblem } from '../manifest/types.js';
import {
  loadChecked as loadCheckedManifest,
  ManifestFileError,
  ManifestProblemsError,
} from '../plan/build.js';
import type { CheckedTask } from '../plan/plan.js';
import { EXIT, ExitError } from './errors.js';
import type { CliIO } from './io.js';

export function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

/** Local inputs need no bucket to be checked and priced; `run` uploads them and needs one. */
export const LOCAL_FILES_NOTE = (n: number): string =>
  `${plural(n, 'local file')} (file:): \`run\` uploads ${n === 1 ? 'it' : 'them'} to the bucket of storage: in mediabatch.config.yaml (or MEDIABATCH_STORAGE_URL) and refuses without one`;

/** Every problem of one manifest: detail lines for people, `problems` for --json. */
export class ProblemsError extends ExitError {
  readonly file: string;
  readonly problems: readonly ManifestProblem[];

  constructor(file: string, problems: readonly ManifestProblem[]) {
    const sorted = sortProblems(problems, file);
    const n = sorted.length;
    super(
      EXIT.invalid,
      `${plural(n, 'problem')} in ${file}; fix ${n === 1 ? 'it' : 'them'} and run again`,
      sorted.map(formatProblem),
    );
    this.name = 'ProblemsError';
    this.file = file;
    this.problems = sorted;
  }
}

export function problemsError(file: string, problems: readonly ManifestProblem[]): ProblemsError {
  return new ProblemsError(file, problems);
}

/** The planning library's errors, as the CLI's one line (and detail lines) with exit 1. */
export function asExitError(error: unknown): unknown {
  if (error instanceof ManifestProblemsError) return problemsError(error.file, error.problems);
  if (error instanceof ManifestFileError) return new ExitError(EXIT.invalid, error.message);
  return error;
}

/** Runs a planning step; its problems become the CLI's ProblemsError or ExitError. */
export async function planning<T>(step: Promise<T>): Promise<T> {
  try {
    return await step;
  } catch (error) {
    throw asExitError(error);
  }
}

/**
 * Loads, expands and checks a manifest against every static rule; throws an ExitError listing every
 * problem: the manifest's own and the catalog's for every task that expanded, all in one go.
 */
export async function loadChecked(
  file: string,
  io: CliIO,
  opts: { allowOutside?: boolean; overrideVars?: Readonly<Record<string, unknown>> } = {},
): Promise<{ manifest: LoadedManifest; tasks: CheckedTask[] }> {
  return planning(
    loadCheckedManifest(file, {
      cwd: io.cwd,
      now: io.now(),
      allowOutside: opts.allowOutside ?? false,
      ...(opts.overrideVars ? { vars: opts.overrideVars } : {}),
    }),
  );
}
