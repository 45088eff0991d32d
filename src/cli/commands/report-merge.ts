// `report --merge <report.json | folder | s3://prefix>...`: one report and one gallery for a run split
// into shards (src/run/merge.ts). Exit 0 when every shard is in and finished; 4 (run their commands again,
// then merge again) when some are missing or unfinished, after writing what there is; 1 for bad inputs.

import type { Config } from '../../config.js';
import { borrowedStateNote } from '../../report/merge.js';
import { DEFAULT_STATE_FILE } from '../../results/invocation.js';
import { mergeRunReports } from '../../run/merge.js';
import { fmtTokensWithUnit } from '../../util/numbers.js';
import { EXIT, ExitError } from '../errors.js';
import { displayPath } from '../format.js';
import type { CliIO } from '../io.js';

export async function reportMergeCommand(
  inputs: readonly string[],
  opts: { json?: boolean; out?: string },
  ctx: { io: CliIO; config: Pick<Config, 'storage'> },
): Promise<number> {
  const { io } = ctx;
  const { report, files } = await mergeRunReports(inputs, {
    cwd: io.cwd,
    env: io.env,
    now: io.now(),
    ...(ctx.config.storage ? { storage: ctx.config.storage } : {}),
    ...(opts.out !== undefined ? { out: opts.out } : {}),
  });
  const shards = report.shards;
  const shown = (p: string) => displayPath(io.cwd, p);
  if (opts.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    io.stdout.write(
      `Run ${report.run.id}: ${shards?.merged.length ?? 0} of ${shards?.count ?? 0} shards merged, ${report.totals.tasks} tasks; charged ${fmtTokensWithUnit(report.totals.charged.tokens)}, refunded ${fmtTokensWithUnit(report.totals.refunded.tokens)}, net ${fmtTokensWithUnit(report.totals.net.tokens)}\n`,
    );
    io.stdout.write(`  Report: ${shown(files.markdown)} · gallery: ${shown(files.gallery)}\n`);
  }
  const missing = shards?.missing ?? [];
  const unfinished = shards?.unfinished ?? [];
  if (missing.length === 0 && unfinished.length === 0) return EXIT.ok;
  const n = shards?.count ?? 0;
  const command = (i: number) => {
    const line = shards?.commands?.[String(i)];
    return line === undefined ? '' : ` (\`${line}\`)`;
  };
  // A missing shard's command is made from the lowest shard's report: its state file is that shard's.
  const template = Math.min(...(shards?.merged.map((m) => m.index) ?? [1]));
  const borrowed = (i: number) => {
    const state = /--state (\S+)/.exec(shards?.commands?.[String(i)] ?? '')?.[1];
    return borrowedStateNote(template, state ?? DEFAULT_STATE_FILE);
  };
  const parts = [
    ...missing.map((i) => `shard ${i} of ${n} missing${command(i)}${borrowed(i)}`),
    ...unfinished.map((i) => `shard ${i} of ${n} unfinished${command(i)}`),
  ];
  throw new ExitError(
    EXIT.interrupted,
    `${parts.join('; ')}: the report has the rest; run ${missing.length + unfinished.length === 1 ? 'it' : 'each'}, then merge again`,
  );
}
