// The bookkeeping of tasks put off for a passing reason: each waits a pause that grows with its rounds,
// is looked at again once it is over, and only a task that has had its rounds is given up with its reason.
import { describe, expect, it } from 'vitest';
import { PUT_OFF_ROUNDS, PutOff } from '../../../src/run/runner/put-off.js';

function setUp() {
  const clock = { ms: 0 };
  const putOff = new PutOff(
    () => clock.ms,
    (round) => 100 * 2 ** round,
  );
  return { clock, putOff };
}

describe('tasks put off', () => {
  it('rest for a pause that grows with each round, then are looked at again', () => {
    const { clock, putOff } = setUp();
    const pauses: number[] = [];
    for (let round = 0; round < 3; round++) {
      putOff.add('clip', 'its upstream record could not be had');
      pauses.push(putOff.dueIn() ?? -1);
      expect(putOff.isResting('clip')).toBe(true);
      expect(putOff.resting()).toEqual(['clip']);
      clock.ms += putOff.dueIn() ?? 0;
      expect(putOff.isResting('clip')).toBe(false);
      putOff.take('clip');
      expect(putOff.dueIn()).toBeUndefined();
    }
    expect(pauses).toEqual([100, 200, 400]);
  });

  it(`keep the run waiting while one has rounds left (${PUT_OFF_ROUNDS}), then are given up with their reasons`, () => {
    const { clock, putOff } = setUp();
    for (let round = 0; round < PUT_OFF_ROUNDS; round++) {
      expect(putOff.hasRoundsLeft()).toBe(round > 0);
      putOff.add('clip', `round ${round + 1}`);
      clock.ms += 1;
    }
    expect(putOff.hasRoundsLeft()).toBe(false);
    putOff.add('still', 'the API kept failing');
    expect(putOff.hasRoundsLeft()).toBe(true);
    expect(putOff.giveUpAll()).toEqual([
      { taskId: 'clip', reason: `round ${PUT_OFF_ROUNDS}` },
      { taskId: 'still', reason: 'the API kept failing' },
    ]);
    expect(putOff.size).toBe(0);
  });

  it('forget a task whose pause is over (it is pending again, or no longer pending)', () => {
    const { clock, putOff } = setUp();
    putOff.add('a', 'x');
    clock.ms += 50;
    putOff.add('b', 'y');
    clock.ms += 60;
    putOff.dropDue(clock.ms);
    expect(putOff.resting()).toEqual(['b']);
    expect(putOff.size).toBe(1);
  });

  it('keep a task whose pause ended after the run last looked for pending tasks: it is due now', () => {
    const { clock, putOff } = setUp();
    putOff.add('clip', 'its upstream record could not be had');
    // The run asks for its pending tasks a moment before the pause ends, and finds none it may send.
    clock.ms += 99;
    const lookedAt = clock.ms;
    // By the time it sees the batch empty, the pause is over: the task was not looked for, it must stay.
    clock.ms += 2;
    putOff.dropDue(lookedAt);
    expect(putOff.size).toBe(1);
    expect(putOff.dueIn()).toBe(0);
    expect(putOff.hasRoundsLeft()).toBe(true);
    putOff.dropDue(clock.ms);
    expect(putOff.size).toBe(0);
  });
});
