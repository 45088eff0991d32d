// The re-roll prompt weighs the run's worst case as the next `run`'s preflight does: a task in doubt may
// have been charged, so it counts beside what was charged and what is still to send.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rerollPrice } from '../../src/review/index.js';
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
    expect(price.text).toContain("the run's worst case goes from 8 to 11 tokens; over the budget of 10 by 1");
  });
});
