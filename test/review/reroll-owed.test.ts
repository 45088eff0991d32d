// The re-roll prompt weighs the run's worst case as the next `run`'s preflight does: a task in doubt may
// have been charged, so it counts beside what was charged and what is still to send.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decide, rerollPrice, rerollRefusal } from '../../src/review/index.js';
import { FakeClock, submit, task, useTempDirs } from '../store/helpers.js';

const temp = useTempDirs();

describe('the re-roll prompt and a task in doubt', () => {
  it('counts the doubt in the worst case, and warns that the next run would refuse', () => {
    const store = temp.open(join(temp.dir(), 'state.db'), { now: new FakeClock().now });
    store.runs.createRun({ id: 'r', manifestPath: '/m/a.yaml', manifestName: 'a', settings: { budget: 10 } });
    store.tasks.upsertTasks('r', [{ ...task('a'), review: true }, task('b'), task('c')]);
    submit(store, 'r', 'a', 'u-a', 2);
    store.tasks.moveTask('r', 'a', 'downloading', null);
    store.tasks.markDone('r', 'a');
    store.submissions.recordSubmitIntent('r', 'b');
    store.submissions.recordInDoubt('r', 'b', 1, { message: 'connection reset after the request was sent' });

    // 2 charged + 3 in doubt + 3 pending (c) = 8 now; the re-roll adds 3: 11, over 10 by 1.
    const price = rerollPrice(store, 'r', ['a']);
    expect(price.worst).toMatchObject({ now: 8, after: 11, leftAfter: -1 });
    expect(price.nextRunRefuses).toBe(true);
    expect(price.text).toContain(
      "the run's worst case goes from 8 to 11 tokens; over the budget of 10 tokens by 1 token",
    );
  });

  it('refuses a re-roll over a budget lowered under what the run spent and holds, saying by how much it is over', async () => {
    const store = temp.open(join(temp.dir(), 'state.db'), { now: new FakeClock().now });
    store.runs.createRun({ id: 'r', manifestPath: '/m/a.yaml', manifestName: 'a', settings: { budget: 10 } });
    store.tasks.upsertTasks('r', [{ ...task('a'), review: true }, task('b')]);
    submit(store, 'r', 'a', 'u-a', 2);
    store.tasks.moveTask('r', 'a', 'downloading', null);
    store.tasks.markDone('r', 'a');
    store.submissions.recordSubmitIntent('r', 'b');
    store.submissions.recordInDoubt('r', 'b', 1, { message: 'connection reset after the request was sent' });
    // 2 charged + 3 in doubt = 5, under a budget lowered to 4.5: over by 0.5, never "leaves 0".
    store.runs.updateRunSettings('r', { budget: 4.5 });
    const refusal =
      're-rolling 1 task(s) may cost up to 3 tokens and the budget of 4.5 tokens is already 0.5 tokens over: nothing was sent; raise budget in the manifest to re-roll';
    expect(rerollRefusal(rerollPrice(store, 'r', ['a']))).toBe(refusal);
    // The reason the view's dialog shows: the same line.
    const [outcome] = await decide(store, 'r', ['a'], 'reroll');
    expect(outcome).toEqual({ taskId: 'a', ok: false, reason: refusal, overBudget: true });
  });
});
