import type { ManifestProblem } from '../../manifest/types.js';
import { localRefsIn } from '../../media/local-input.js';
import { ManifestFileError, ManifestProblemsError } from '../../plan/build.js';
import { type Shard, shardFilterOf } from '../../plan/shard.js';
import { EXIT, ExitError } from '../errors.js';
import type { CliIO } from '../io.js';
import { LOCAL_FILES_NOTE, loadChecked, plural } from '../load.js';
import { type ShardFlags, shardOfFlags } from '../shard.js';

/** One problem in --json output: located when it is inside a file, with the line people read. */
export interface ProblemJson {
  file: string;
  line?: number;
  col?: number;
  task?: string;
  /** The same problem at the same place in several tasks: how many, and the first ids (`task` is the first). */
  tasks?: number;
  taskIds?: readonly string[];
  path: string;
  message: string;
  text: string;
}

export interface ManifestVerdict {
  file: string;
  ok: boolean;
  /** Task count after expansion, when the manifest is valid. */
  tasks?: number;
  byModel?: Record<string, number>;
  /** Distinct local `file:` inputs, which `run` uploads to the bucket. */
  localFiles?: number;
  /** With --shard: `tasks` and `byModel` are the shard's, out of `of` in the manifest. */
  shard?: { index: number; count: number; of: number };
  /** Why `mediabatch schedule` would refuse the manifest's `schedule` (`run` takes the manifest as it is). */
  schedule?: string;
  problems: ProblemJson[];
}

function problemJson(p: ManifestProblem, text: string): ProblemJson {
  return {
    file: p.pos.file,
    line: p.pos.line,
    col: p.pos.col,
    ...(p.taskId === undefined ? {} : { task: p.taskId }),
    ...(p.tasks === undefined ? {} : { tasks: p.tasks.count, taskIds: p.tasks.first }),
    path: p.path,
    message: p.message,
    text,
  };
}

async function verdict(
  file: string,
  io: CliIO,
  allowOutside: boolean,
  shard?: Shard,
): Promise<ManifestVerdict> {
  try {
    const loaded = await loadChecked(file, io, { allowOutside });
    // Every task is checked; a shard's are counted (the same share `run --shard` takes).
    const inShard = shard
      ? shardFilterOf(shard, loaded.manifest.chained === true, () => loaded.tasks.map((t) => t.spec))
      : undefined;
    const tasks = inShard ? loaded.tasks.filter((t) => inShard(t.spec.id)) : loaded.tasks;
    const byModel: Record<string, number> = {};
    const local = new Set<string>();
    for (const t of tasks) {
      byModel[t.entry.model] = (byModel[t.entry.model] ?? 0) + 1;
      for (const { path } of localRefsIn(t.body)) local.add(path);
    }
    const schedule = await scheduleNote(loaded.manifest.settings, io.now());
    return {
      file,
      ok: true,
      ...(schedule !== undefined ? { schedule } : {}),
      tasks: tasks.length,
      byModel,
      ...(shard ? { shard: { ...shard, of: loaded.tasks.length } } : {}),
      problems: [],
      ...(local.size > 0 ? { localFiles: local.size } : {}),
    };
  } catch (error) {
    if (error instanceof ManifestProblemsError) {
      return {
        file,
        ok: false,
        problems: error.problems.map((p, i) => problemJson(p, error.details[i] ?? p.message)),
      };
    }
    // A manifest that cannot be read at all: one problem without a position.
    if (error instanceof ManifestFileError) {
      return { file, ok: false, problems: [{ file, path: '', message: error.message, text: error.message }] };
    }
    throw error;
  }
}

/**
 * What `schedule` would refuse in the manifest's `schedule:` (its cron, or firings sharing one run id). The
 * cron package is loaded for a manifest that has one only: `validate` starts without it.
 */
async function scheduleNote(
  settings: { schedule?: string; timezone?: string; run?: string; runId: string },
  now: Date,
): Promise<string | undefined> {
  if (settings.schedule === undefined) return undefined;
  const { CronSchedule, sharedRunProblem } = await import('../../schedule/index.js');
  const parsed = CronSchedule.parse(settings.schedule, settings.timezone ?? 'UTC');
  if (!parsed.ok) return parsed.message;
  return sharedRunProblem(settings, parsed.schedule, now);
}

function describeModels(byModel: Record<string, number>): string {
  return Object.entries(byModel)
    .map(([model, n]) => `${n} ${model}`)
    .join(', ');
}

/** Parse, expand and check every task of every manifest; no network. Every problem of every file is printed. */
export async function validateCommand(
  files: string[],
  opts: { json?: boolean; allowOutsideData?: boolean } & ShardFlags,
  io: CliIO,
): Promise<number> {
  const shard = shardOfFlags(opts, io.env);
  const verdicts: ManifestVerdict[] = [];
  for (const file of files) verdicts.push(await verdict(file, io, opts.allowOutsideData ?? false, shard));
  const bad = verdicts.filter((v) => !v.ok);
  const count = bad.reduce((n, v) => n + v.problems.length, 0);

  if (opts.json) {
    io.stdout.write(
      `${JSON.stringify({ ok: bad.length === 0, problems: count, manifests: verdicts }, null, 2)}\n`,
    );
  } else {
    for (const v of verdicts) {
      if (v.ok) {
        const models = v.byModel && v.tasks ? ` (${describeModels(v.byModel)})` : '';
        const share = v.shard
          ? ` in shard ${v.shard.index} of ${v.shard.count} (of ${plural(v.shard.of, 'task')})`
          : '';
        io.stdout.write(`${v.file}: valid, ${plural(v.tasks ?? 0, 'task')}${share}${models}\n`);
        if (v.localFiles) io.stdout.write(`  ${LOCAL_FILES_NOTE(v.localFiles)}\n`);
        if (v.schedule) io.stdout.write(`  \`mediabatch schedule\` refuses it: ${v.schedule}\n`);
      } else {
        for (const p of v.problems) io.stderr.write(`${p.text}\n`);
      }
    }
  }
  if (bad.length > 0) {
    const where = bad.map((v) => v.file).join(', ');
    throw new ExitError(
      EXIT.invalid,
      `${plural(count, 'problem')} in ${where}; fix ${count === 1 ? 'it' : 'them'} and run again`,
    );
  }
  return EXIT.ok;
}
