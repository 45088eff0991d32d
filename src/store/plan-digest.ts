import { createHash, type Hash } from 'node:crypto';
import type { NewTask } from './types.js';

/**
 * One sha256 over a run's plan as the store keeps it, task after task in the plan's order: each task's id,
 * its request as it is sent (the text a resumed run compares, task by task, with the one it sent), its
 * price, its retries, its review, its file name and its upstreams. Two workers whose digests match run the
 * same tasks for the same money. Left out: the wording of the price's basis and the expected job time,
 * which another build of mediabatch may word or learn differently for the very same plan.
 */
export class PlanDigest {
  readonly #hash: Hash = createHash('sha256');
  #tasks = 0;

  add(task: NewTask): void {
    const { estimate: e } = task;
    const head = [
      task.taskId,
      task.model,
      task.endpoint,
      e.tokens,
      e.min,
      e.max,
      e.assumedPrice,
      task.retries ?? 0,
      task.review === true,
      task.fileName ?? null,
      task.upstreams?.map(({ name, taskId }) => [name, taskId]) ?? null,
    ];
    // The body's length first: no two plans give the same stream of bytes by moving text between tasks.
    this.#hash.update(`${JSON.stringify(head)}\n${task.wireBody.length}\n`).update(task.wireBody);
    this.#tasks++;
  }

  /** How many tasks went in. */
  get tasks(): number {
    return this.#tasks;
  }

  /** The digest (hex); the object takes no task after. */
  hex(): string {
    return this.#hash.update(`\n${this.#tasks}`).digest('hex');
  }
}

/** The digest of a whole plan's rows. */
export function planDigestOf(rows: Iterable<NewTask>): string {
  const digest = new PlanDigest();
  for (const row of rows) digest.add(row);
  return digest.hex();
}
