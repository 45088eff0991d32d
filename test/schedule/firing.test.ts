// What the scheduler says of a firing that ended with tasks to look at: the run's `status` as the one
// command builder words it, with the state file the schedule uses, typable as printed.
import { describe, expect, it } from 'vitest';
import { commandLine } from '../../src/results/invocation.js';
import { firingResult } from '../../src/schedule/firing.js';
import { emptyTaskCounts } from '../../src/store/index.js';
import { shellWords } from '../helpers/shell-words.js';

describe('a firing that ended with failed tasks', () => {
  it('names the status command of its run on its own state file', () => {
    const status = commandLine(
      { runId: 'nightly-2026-01-05', manifest: 'nightly.yaml', state: 'state/night ly.db' },
      { command: 'status' },
    );
    const said = firingResult(
      { kind: 'complete', runId: 'nightly-2026-01-05', exitCode: 2, counts: emptyTaskCounts() },
      status,
    );
    expect(said).toEqual({
      outcome: 'failed',
      runId: 'nightly-2026-01-05',
      message:
        "finished with exit code 2: see `mediabatch status nightly-2026-01-05 --state 'state/night ly.db'`",
    });
    const printed = /`([^`]+)`/.exec(said.message)?.[1] ?? '';
    expect(shellWords(printed)).toEqual([
      'mediabatch',
      'status',
      'nightly-2026-01-05',
      '--state',
      'state/night ly.db',
    ]);
  });
});
