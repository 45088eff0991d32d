// A worker of a fleet leaves a run only when nothing is left that it could take: a task another worker
// gives back just after this one last looked at the queue (its worst case does not fit the budget either)
// is looked at before leaving, so the worker's stop line counts every task the run leaves pending. Under
// load, a worker descheduled between its claim and its count of the others' work left such a task unseen
// and said one task fewer (test/postgres/fleet.test.ts, "stop on a budget below the worst case").
import { describe, expect, it } from 'vitest';
import { task } from '../../store/helpers.js';
import { makeRunner, stateOf, useRunnerSetup } from './fakes.js';

const setup = useRunnerSetup();

describe('a fleet worker leaving a run over its budget', () => {
  it('looks at a task another worker gave back while it counted their work, and counts it', async () => {
    const s = setup([task('a', {}, 0.2), task('b', {}, 0.2), task('c', {}, 0.2)]);
    s.store.runs.updateRunSettings('r1', { budget: 0.1 });
    // Another worker holds c, about to give it up: the budget cannot cover it either.
    expect(s.store.claims.claimPending('r1', 'w-other', 1, ['c']).map((t) => t.taskId)).toEqual(['c']);
    const claims = s.store.claims;
    const count = claims.heldByOthers.bind(claims);
    let counted = 0;
    // It gives c back in the moment between this worker's last claim and its count of the others' work.
    claims.heldByOthers = (runId, me) => {
      if (counted++ === 0) claims.giveUp('r1', 'w-other', ['c']);
      return count(runId, me);
    };
    const { runner } = makeRunner(s, {
      budget: 0.1,
      fleet: { workerId: 'w-me', ttlMs: 60_000, idlePollMs: 250 },
    });

    const result = await runner.run();

    expect(s.api.submitted).toEqual([]);
    expect(result.stopReason).toBe('budget');
    expect(result.stopMessage).toBe(
      '3 task(s) did not fit under the budget of 0.1 tokens (0.1 tokens left; they need up to 0.6 tokens): raise budget and run again to continue',
    );
    expect(['a', 'b', 'c'].map((id) => stateOf(s.store, id))).toEqual(['pending', 'pending', 'pending']);
    // Nobody holds them: a later run with a bigger budget takes them.
    expect(s.store.claims.heldByOthers('r1', 'nobody')).toBe(0);
  });
});
