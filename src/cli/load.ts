import { formatProblem, loadManifest } from '../manifest/index.js';
import type { LoadedManifest, ManifestProblem } from '../manifest/types.js';
import { type CheckedTask, checkTasks } from '../plan/plan.js';
import { EXIT, ExitError } from './errors.js';
import type { CliIO } from './io.js';

function sortProblems(problems: ManifestProblem[]): ManifestProblem[] {
  return [...problems].sort(
    (a, b) => a.pos.file.localeCompare(b.pos.file) || a.pos.line - b.pos.line || a.pos.col - b.pos.col,
  );
}

export function problemsError(file: string, problems: ManifestProblem[]): ExitError {
  const n = problems.length;
  return new ExitError(
    EXIT.invalid,
    `${file}: ${n} problem${n === 1 ? '' : 's'}; fix ${n === 1 ? 'it' : 'them'} and run again`,
    sortProblems(problems).map(formatProblem),
  );
}

/** Loads, expands and checks a manifest against every static rule; throws an ExitError listing every problem. */
export async function loadChecked(
  file: string,
  io: CliIO,
): Promise<{ manifest: LoadedManifest; tasks: CheckedTask[] }> {
  const result = await loadManifest(file, { now: io.now(), cwd: io.cwd });
  if (!result.ok) throw problemsError(file, result.problems);
  const checked = checkTasks(result.manifest.tasks);
  if (checked.problems.length > 0) throw problemsError(file, checked.problems);
  return { manifest: result.manifest, tasks: checked.tasks };
}
