// Tasks put off for a passing reason: a chained task whose upstream's job record cannot be had now, a task
// whose submissions the API kept failing. Each is looked at again within the run after a pause that grows
// with its rounds; once nothing else is left in the run, one that has had its rounds is left pending, and
// the run ends saying why (a run that ended with it pending and silent looked finished to nobody).

/** Rounds a put-off task gets before a run with nothing else left ends with it pending. */
export const PUT_OFF_ROUNDS = 5;

export interface PutOffTask {
  taskId: string;
  reason: string;
}

export class PutOff {
  readonly #now: () => number;
  readonly #pause: (round: number) => number;
  /** Put-off tasks waiting for their pause to end. */
  readonly #waiting = new Map<string, { due: number; reason: string }>();
  /** How many times each task was put off in this process. */
  readonly #rounds = new Map<string, number>();

  /** `pause(round)`: the wait after a task's round-th putting off (0 first), growing with it. */
  constructor(now: () => number, pause: (round: number) => number) {
    this.#now = now;
    this.#pause = pause;
  }

  /** Puts a task off for `reason`: due again after a pause that grows with each time. */
  add(taskId: string, reason: string): void {
    const round = this.#rounds.get(taskId) ?? 0;
    this.#rounds.set(taskId, round + 1);
    this.#waiting.set(taskId, { due: this.#now() + this.#pause(round), reason });
  }

  get size(): number {
    return this.#waiting.size;
  }

  /** Whether the task is put off and its pause not over: not to be looked at now. */
  isResting(taskId: string): boolean {
    const entry = this.#waiting.get(taskId);
    return entry !== undefined && entry.due > this.#now();
  }

  /** The tasks put off whose pause is not over. */
  resting(): string[] {
    const now = this.#now();
    return [...this.#waiting].filter(([, { due }]) => due > now).map(([taskId]) => taskId);
  }

  /** The task is looked at again (its pause is over): it waits no more unless it is put off anew. */
  take(taskId: string): void {
    this.#waiting.delete(taskId);
  }

  /**
   * Forgets the tasks whose pause was over by `lookedAt`, when the run last looked for pending tasks and
   * did not find them there (no longer pending). One whose pause ended after that look was not looked for
   * yet: it stays, due now, and the run looks again.
   */
  dropDue(lookedAt: number): void {
    for (const [taskId, { due }] of this.#waiting) if (due <= lookedAt) this.#waiting.delete(taskId);
  }

  /** Milliseconds until the first put-off task is due again (0: now); undefined when none waits. */
  dueIn(): number | undefined {
    let first: number | undefined;
    for (const { due } of this.#waiting.values()) if (first === undefined || due < first) first = due;
    return first === undefined ? undefined : Math.max(0, first - this.#now());
  }

  /** Whether some waiting task has rounds left: with nothing else to do, the run waits for it. */
  hasRoundsLeft(): boolean {
    for (const taskId of this.#waiting.keys()) {
      if ((this.#rounds.get(taskId) ?? 0) < PUT_OFF_ROUNDS) return true;
    }
    return false;
  }

  /** The waiting tasks, given up for this run: they stay pending, each with why. */
  giveUpAll(): PutOffTask[] {
    const left = [...this.#waiting].map(([taskId, { reason }]) => ({ taskId, reason }));
    this.#waiting.clear();
    return left;
  }
}
