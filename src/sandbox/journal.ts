// The embedded sandbox's memory across processes (`run --sandbox` twice, with a review in between): each
// job that finishes is appended, as one JSON line, to a file beside the sandbox's state database, and the
// next embedded sandbox reads them back, so a downstream approved after the first run ended still gets its
// upstream's job record and files. Files are recipes (src/sandbox/files.ts): only their tokens are kept.
// The account (balance, quota) is not kept: the sandbox's money is pretend, and each start begins afresh.

import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { findEntry } from '../catalog/index.js';
import type { FileRecipe, FileStore } from './files.js';
import type { SandboxJob } from './jobs.js';
import { createRandom } from './random.js';
import { planItems } from './results.js';

/** The journal beside a state file: `state/sandbox.db` -> `state/sandbox-jobs.jsonl`. */
export function journalBeside(stateFile: string): string {
  return join(dirname(stateFile), 'sandbox-jobs.jsonl');
}

type Kept = Omit<SandboxJob, 'entry' | 'callbacks'> & { model: string };

/** Appends a finished job (success or failed); a line that cannot be written loses memory, not money. */
export function keepJob(file: string, job: SandboxJob): void {
  if (job.status !== 'success' && job.status !== 'failed') return;
  const { entry, callbacks: _callbacks, ...rest } = job;
  const kept: Kept = { ...rest, model: entry.model };
  try {
    mkdirSync(dirname(file), { recursive: true });
    appendFileSync(file, `${JSON.stringify(kept)}\n`);
  } catch {
    // The sandbox keeps serving: only a later process will not know this job.
  }
}

/**
 * The jobs of earlier embedded sandboxes, with their files registered again in `files` under the same
 * tokens. Their links live `linkTtlMs` from now: a new sandbox process serves them anew. Lines that do not
 * read as a job (a line cut by a crash) are skipped.
 */
export function restoreJobs(
  file: string,
  files: FileStore,
  nowMs: number,
  linkTtlMs: number,
  link: (token: string, index: number) => string,
): SandboxJob[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const jobs = new Map<string, SandboxJob>();
  for (const line of text.split('\n')) {
    const job = line.trim() === '' ? undefined : parseJob(line, files, nowMs + linkTtlMs, link);
    if (job !== undefined) jobs.set(job.id, job);
  }
  return [...jobs.values()];
}

function parseJob(
  line: string,
  files: FileStore,
  expiresAt: number,
  link: (token: string, index: number) => string,
): SandboxJob | undefined {
  let kept: Kept;
  try {
    kept = JSON.parse(line) as Kept;
  } catch {
    return undefined;
  }
  const entry = typeof kept.model === 'string' ? findEntry(kept.model) : undefined;
  if (entry === undefined || typeof kept.id !== 'string') return undefined;
  const { model: _model, ...rest } = kept;
  const job: SandboxJob = { ...rest, entry, callbacks: [] };
  if (job.status !== 'success' || job.items === null) return job;
  // The recipes are drawn again from the job's own seed, exactly as when it succeeded.
  const planned = planItems(entry, job.body, job.media, createRandom(job.seed));
  job.items = job.items.map((item, index) => {
    const recipe: FileRecipe | null | undefined = planned[index]?.recipe;
    if (recipe === null || recipe === undefined || item.type === 'json') return item;
    const token = files.add(job.id, index, recipe, expiresAt);
    job.fileTokens[index] = token;
    return { ...item, value: link(token, index) };
  });
  job.linkExpiresAt = expiresAt;
  return job;
}
