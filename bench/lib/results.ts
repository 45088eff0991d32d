// Part of bench/results.json measured again on its own (`--write` of bench/download.ts and
// bench/makespan.ts): the part is replaced and stamped with when, on which commit and how busy the machine
// was, so that a figure never passes for one of the full run at the top of the file.
import { readFile, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { REPO } from '../../test/helpers/child.js';
import { machine, round } from './measure.js';

const RESULTS = fileURLToPath(new URL('../results.json', import.meta.url));

interface Results {
  machine: unknown;
  seconds: number;
  figures: Record<string, unknown>;
  /** The parts measured after the full run, each with its own date and commit. */
  remeasured?: Record<string, { date: string; commit: string; load: number[] }>;
}

/** Replaces `figures[part]` with `update(the current value)` and records when it was measured. */
export async function writeResultsPart(part: string, update: (current: unknown) => unknown): Promise<void> {
  const results = JSON.parse(await readFile(RESULTS, 'utf8')) as Results;
  results.figures[part] = update(results.figures[part]);
  const host = machine(REPO);
  results.remeasured = {
    ...results.remeasured,
    [part]: { date: host.date, commit: host.commit, load: loadavg().map((l) => round(l, 1)) },
  };
  await writeFile(RESULTS, `${JSON.stringify(results, null, 2)}\n`);
}
