// AWS Batch's retry strategy as its API reference documents it (EvaluateOnExit, RetryStrategy): at most 5
// entries, each with an `action` (RETRY or EXIT, any case) and up to three conditions, `onExitCode`,
// `onReason` and `onStatusReason`, that must all match. A pattern matches the whole value, or only its
// start when it ends with `*`; `onExitCode` holds digits only, the reasons letters, digits, periods, colons
// and white space. When no entry matches, the job is retried. The recipes' tests ask this model what a
// job definition does with each way a container can end.
import { expect } from 'vitest';
import { EXIT } from '../../src/exit-codes.js';

export interface BatchExit {
  /** Absent when the container never reported one (its host went away). */
  exitCode?: number;
  reason?: string;
  statusReason?: string;
}

interface Entry {
  action: string;
  onExitCode?: string;
  onReason?: string;
  onStatusReason?: string;
}

const KEYS = new Set(['action', 'onExitCode', 'onReason', 'onStatusReason']);

/** Checks a `retryStrategy` against the documented limits and returns its entries. */
export function retryEntries(strategy: { attempts: number; evaluateOnExit: Entry[] }): Entry[] {
  expect(strategy.attempts).toBeGreaterThanOrEqual(1);
  expect(strategy.attempts).toBeLessThanOrEqual(10);
  const entries = strategy.evaluateOnExit;
  expect(entries.length).toBeGreaterThan(0);
  expect(entries.length).toBeLessThanOrEqual(5);
  for (const e of entries) {
    for (const key of Object.keys(e)) expect(KEYS, `evaluateOnExit field ${key}`).toContain(key);
    expect(e.action.toUpperCase()).toMatch(/^(RETRY|EXIT)$/);
    if (e.onExitCode !== undefined) expect(e.onExitCode).toMatch(/^[0-9]*\*?$/);
    for (const p of [e.onReason, e.onStatusReason])
      if (p !== undefined) expect(p).toMatch(/^[A-Za-z0-9.: \t]*\*?$/);
    expect(e.onExitCode ?? e.onReason ?? e.onStatusReason, 'an entry with no condition').toBeDefined();
  }
  return entries;
}

function matches(pattern: string | undefined, value: string | undefined): boolean {
  if (pattern === undefined) return true;
  const text = value ?? '';
  return pattern.endsWith('*') ? text.startsWith(pattern.slice(0, -1)) : text === pattern;
}

/** What AWS Batch does with a job attempt that ended this way: the first entry all of whose conditions match. */
export function batchAction(entries: Entry[], end: BatchExit): 'RETRY' | 'EXIT' {
  const code = end.exitCode === undefined ? undefined : String(end.exitCode);
  const hit = entries.find(
    (e) =>
      (e.onExitCode === undefined || (code !== undefined && matches(e.onExitCode, code))) &&
      matches(e.onReason, end.reason) &&
      matches(e.onStatusReason, end.statusReason),
  );
  return hit === undefined ? 'RETRY' : (hit.action.toUpperCase() as 'RETRY' | 'EXIT');
}

/** How containers end on AWS Batch, as the job's record says it. */
export const ESSENTIAL_EXITED = 'Essential container in task exited';
export const HOST_LOST = 'Host EC2 (instance i-0123456789abcdef0) terminated.';

/**
 * A recipe's job definition retries what running again can finish: our interrupted exit code, a container
 * killed by a signal (137: our own watchdog, or the stop timeout after a SIGTERM) and a lost host. Every
 * other exit code of ours (a bad manifest, failed tasks, a refusal, a refused key, our own bug) ends the job.
 */
export function expectRetriesOnlyWhatPasses(def: {
  retryStrategy: { attempts: number; evaluateOnExit: Entry[] };
}): void {
  const entries = retryEntries(def.retryStrategy);
  for (const [name, code] of Object.entries(EXIT)) {
    if (code === EXIT.ok) continue;
    const wanted = code === EXIT.interrupted ? 'RETRY' : 'EXIT';
    expect(batchAction(entries, { exitCode: code, reason: ESSENTIAL_EXITED }), `exit ${code} (${name})`).toBe(
      wanted,
    );
  }
  expect(batchAction(entries, { exitCode: 137, reason: ESSENTIAL_EXITED }), 'killed').toBe('RETRY');
  expect(batchAction(entries, { statusReason: HOST_LOST }), 'host lost').toBe('RETRY');
  expect(batchAction(entries, { exitCode: 137, statusReason: HOST_LOST }), 'host lost').toBe('RETRY');
}
