import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { formatProblem, loadManifest } from '../manifest/index.js';
import type { LoadedManifest, ManifestProblem } from '../manifest/types.js';
import { type CheckedTask, checkTasks } from '../plan/plan.js';
import { EXIT, ExitError } from './errors.js';
import type { CliIO } from './io.js';

/** By file (the manifest first, then data files in order of first mention), then line and column. */
function sortProblems(file: string, problems: readonly ManifestProblem[]): ManifestProblem[] {
  const files = new Map<string, number>([[file, 0]]);
  for (const { pos } of problems) if (!files.has(pos.file)) files.set(pos.file, files.size);
  return [...problems].sort(
    (a, b) =>
      (files.get(a.pos.file) ?? 0) - (files.get(b.pos.file) ?? 0) ||
      a.pos.line - b.pos.line ||
      a.pos.col - b.pos.col,
  );
}

export function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

/** Every problem of one manifest: detail lines for people, `problems` for --json. */
export class ProblemsError extends ExitError {
  readonly file: string;
  readonly problems: readonly ManifestProblem[];

  constructor(file: string, problems: readonly ManifestProblem[]) {
    const sorted = sortProblems(file, problems);
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

/** A missing manifest is a usage mistake, not a problem inside a manifest: say so plainly. */
async function requireFile(file: string, io: CliIO): Promise<void> {
  try {
    const info = await stat(resolve(io.cwd, file));
    if (info.isDirectory()) {
      throw new ExitError(EXIT.invalid, `${file} is a folder; give the path of a manifest file (.yaml)`);
    }
  } catch (error) {
    if (error instanceof ExitError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? String(error)})`;
    throw new ExitError(EXIT.invalid, `${file}: ${why}; check the path of the manifest`);
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
  await requireFile(file, io);
  const result = await loadManifest(file, {
    now: io.now(),
    cwd: io.cwd,
    allowOutside: opts.allowOutside ?? false,
    ...(opts.overrideVars ? { overrideVars: opts.overrideVars } : {}),
  });
  if (!result.ok) {
    const checked = checkTasks(result.tasks ?? []);
    throw problemsError(file, [...result.problems, ...checked.problems]);
  }
  const checked = checkTasks(result.manifest.tasks);
  if (checked.problems.length > 0) throw problemsError(file, checked.problems);
  return { manifest: result.manifest, tasks: checked.tasks };
}
