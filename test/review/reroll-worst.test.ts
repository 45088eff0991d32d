// What a re-roll adds to the run's worst case, as a table: its own price, and its downstreams priced
// again the way the store records the re-roll (skipped ones wait again unless another rejected upstream
// still holds them; pending ones filled in at an exact price go back to the plan's).
import { describe, expect, it } from 'vitest';
import { rerollWorstCase, type WorstTask } from '../../src/review/reroll-worst.js';

const task = (taskId: string, state: string, max: number, more: Partial<WorstTask> = {}): WorstTask => ({
  taskId,
  state,
  review: false,
  verdict: null,
  estimate: { max },
  plannedEstimate: null,
  ...more,
});
const still = (id: string, verdict: WorstTask['verdict'] = 'approved') =>
  task(id, 'done', 0.2, { review: true, verdict });

type Case = [string, WorstTask[], WorstTask[], Record<string, string[]>, WorstTask[], number, string[]];

describe('rerollWorstCase', () => {
  const cases: Case[] = [
    [
      'a still with a done clip: its own price only',
      [still('s')],
      [task('c', 'done', 2)],
      { c: ['s'] },
      [],
      0.2,
      [],
    ],
    [
      'a rejected still: its skipped clip waits again',
      [still('s', 'rejected')],
      [task('c', 'skipped', 2)],
      { c: ['s'] },
      [],
      2.2,
      ['c'],
    ],
    [
      'a clip filled in at its exact price goes back to the plan',
      [still('s')],
      [task('c', 'pending', 1, { plannedEstimate: { max: 2.5 } })],
      { c: ['s'] },
      [],
      1.7,
      ['c'],
    ],
    [
      'a clip still behind another rejected still stays skipped',
      [still('s', 'rejected')],
      [task('c', 'skipped', 2)],
      { c: ['s', 'other'] },
      [still('other', 'rejected')],
      0.2,
      [],
    ],
    [
      'a chain two deep waits again whole',
      [still('s', 'rejected')],
      [task('c', 'skipped', 2), task('v', 'skipped', 3)],
      { c: ['s'], v: ['c'] },
      [],
      5.2,
      ['c', 'v'],
    ],
    [
      'two re-rolls of one chain count their shared clip once',
      [still('a', 'rejected'), still('b', 'rejected')],
      [task('c', 'skipped', 2)],
      { c: ['a', 'b'] },
      [],
      2.4,
      ['c'],
    ],
  ];
  it.each(cases)('%s', (_what, rerolled, downstreams, links, others, adds, repriced) => {
    const all = new Map([...rerolled, ...downstreams, ...others].map((t) => [t.taskId, t]));
    const figures = rerollWorstCase({
      rerolled,
      downstreams,
      upstreamsOf: (id) => links[id] ?? [],
      taskOf: (id) => all.get(id),
    });
    expect(figures.adds).toBeCloseTo(adds, 6);
    expect(figures.repriced).toEqual(repriced);
    expect(figures.adds).toBeCloseTo(figures.own + figures.downstreams, 6);
  });
});
