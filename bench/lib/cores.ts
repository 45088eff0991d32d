// Pins processes to some of the machine's cores (Linux's `taskset`), so that a bench can give a run one core
// where the machine has two: all threads of each process now, and what it forks or starts later inherits it.
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';

/** `cpus` as taskset reads it ("0", "0-1"); a process that has ended meanwhile is skipped. */
export function pinTo(pids: readonly number[], cpus: string): void {
  for (const pid of pids) {
    try {
      execFileSync('taskset', ['--all-tasks', '--cpu-list', '--pid', cpus, String(pid)], { stdio: 'ignore' });
    } catch {
      // Gone between the listing and the call (a backend that closed): nothing to pin.
    }
  }
}

/** Every core of the machine, as taskset reads it. */
export function allCores(): string {
  return `0-${availableParallelism() - 1}`;
}
