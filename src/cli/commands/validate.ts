import { EXIT, ExitError } from '../errors.js';
import type { CliIO } from '../io.js';
import { loadChecked } from '../load.js';

/** Parse, expand and check every task of every manifest; no network. Every problem of every file is printed. */
export async function validateCommand(files: string[], opts: { json?: boolean }, io: CliIO): Promise<number> {
  const results: { file: string; ok: boolean; tasks?: number; problems?: string[] }[] = [];
  for (const file of files) {
    try {
      const { tasks } = await loadChecked(file, io);
      results.push({ file, ok: true, tasks: tasks.length });
    } catch (error) {
      if (!(error instanceof ExitError)) throw error;
      results.push({
        file,
        ok: false,
        problems: [...error.details, ...(error.details.length ? [] : [error.message])],
      });
    }
  }
  if (opts.json) {
    io.stdout.write(`${JSON.stringify({ manifests: results }, null, 2)}\n`);
  } else {
    for (const r of results) {
      if (r.ok) io.stdout.write(`${r.file}: valid, ${r.tasks} task${r.tasks === 1 ? '' : 's'}\n`);
      else for (const line of r.problems ?? []) io.stderr.write(`${line}\n`);
    }
  }
  const bad = results.filter((r) => !r.ok);
  if (bad.length > 0) {
    const count = bad.reduce((n, r) => n + (r.problems?.length ?? 0), 0);
    throw new ExitError(
      EXIT.invalid,
      `${count} problem${count === 1 ? '' : 's'} in ${bad.map((r) => r.file).join(', ')}; fix them and run again`,
    );
  }
  return EXIT.ok;
}
