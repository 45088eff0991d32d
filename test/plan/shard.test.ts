// The pure core of shards (docs/shards.md): which shard a task falls in, chains whole, the flags and the
// engines' variables, a shard run's id, and the budget shares.
import { describe, expect, it } from 'vitest';
import {
  budgetShare,
  ChainGroups,
  fnv1a,
  parseShard,
  parseShardRunId,
  resultsRunId,
  shardFilter,
  shardFromEnv,
  shardIndexOf,
  shardRunId,
} from '../../src/plan/shard.js';

describe('parseShard', () => {
  it.each([
    ['1/3', { index: 1, count: 3 }],
    ['3/3', { index: 3, count: 3 }],
    [' 2 / 5 ', { index: 2, count: 5 }],
    ['1/1', { index: 1, count: 1 }],
  ])('%s', (value, shard) => {
    expect(parseShard(value)).toEqual({ ok: true, shard });
  });

  it.each([
    [
      '0/3',
      '--shard 0/3: the shard index counts from 1 to 3, got 0 (engines count from 0: use --shard-from-env, which converts)',
    ],
    ['4/3', '--shard 4/3: the shard index counts from 1 to 3, got 4'],
    ['a/b', '--shard: expected i/n with whole numbers, e.g. 1/3, got "a/b"'],
    ['1/0', '--shard 1/0: the shard count must be from 1 to 10000, got 0'],
    ['-1/3', '--shard: expected i/n with whole numbers, e.g. 1/3, got "-1/3"'],
    ['1.5/3', '--shard: expected i/n with whole numbers, e.g. 1/3, got "1.5/3"'],
  ])('%s is refused with one line', (value, message) => {
    expect(parseShard(value)).toEqual({ ok: false, message });
  });
});

describe('shardFromEnv', () => {
  it.each([
    [
      { JOB_COMPLETION_INDEX: '0', MEDIABATCH_SHARD_COUNT: '3' },
      { index: 1, count: 3 },
    ],
    [
      { JOB_COMPLETION_INDEX: '2', MEDIABATCH_SHARD_COUNT: '3' },
      { index: 3, count: 3 },
    ],
    [
      { AWS_BATCH_JOB_ARRAY_INDEX: '1', MEDIABATCH_SHARD_COUNT: '4' },
      { index: 2, count: 4 },
    ],
    [
      { SLURM_ARRAY_TASK_ID: '0', SLURM_ARRAY_TASK_COUNT: '2' },
      { index: 1, count: 2 },
    ],
    // Slurm counts from the array's own minimum (--array=1-3).
    [
      { SLURM_ARRAY_TASK_ID: '3', SLURM_ARRAY_TASK_MIN: '1', SLURM_ARRAY_TASK_COUNT: '3' },
      { index: 3, count: 3 },
    ],
    [
      { MEDIABATCH_SHARD_INDEX: '2', MEDIABATCH_SHARD_COUNT: '2' },
      { index: 2, count: 2 },
    ],
    // The first variable set wins: MEDIABATCH_SHARD_INDEX before the engines'.
    [
      { MEDIABATCH_SHARD_INDEX: '1', JOB_COMPLETION_INDEX: '2', MEDIABATCH_SHARD_COUNT: '3' },
      { index: 1, count: 3 },
    ],
  ])('%o', (env, shard) => {
    expect(shardFromEnv(env)).toEqual({ ok: true, shard });
  });

  it('takes the count from the flag', () => {
    expect(shardFromEnv({ JOB_COMPLETION_INDEX: '4' }, 5)).toEqual({
      ok: true,
      shard: { index: 5, count: 5 },
    });
  });

  it.each([
    [
      {},
      '--shard-from-env: none of MEDIABATCH_SHARD_INDEX, JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX, SLURM_ARRAY_TASK_ID is set; give --shard i/n instead',
    ],
    [
      { JOB_COMPLETION_INDEX: '1' },
      '--shard-from-env: JOB_COMPLETION_INDEX gives the index, and nothing gives the count: set MEDIABATCH_SHARD_COUNT or --shard-count',
    ],
    [
      { JOB_COMPLETION_INDEX: 'x', MEDIABATCH_SHARD_COUNT: '3' },
      '--shard-from-env: JOB_COMPLETION_INDEX must be a whole number, got "x"',
    ],
    [
      { JOB_COMPLETION_INDEX: '3', MEDIABATCH_SHARD_COUNT: '3' },
      '--shard-from-env (JOB_COMPLETION_INDEX=3): the shard index counts from 1 to 3, got 4',
    ],
  ])('%o is refused with one line', (env, message) => {
    expect(shardFromEnv(env)).toEqual({ ok: false, message });
  });
});

describe('which shard a task falls in', () => {
  it('is FNV-1a of the id, fixed for good (a change would move tasks that already ran)', () => {
    // Reference values of 32-bit FNV-1a.
    expect(fnv1a('')).toBe(0x811c9dc5);
    expect(fnv1a('a')).toBe(0xe40c292c);
    expect(fnv1a('foobar')).toBe(0xbf9cf968);
    expect([...Array(6)].map((_, i) => shardIndexOf(`img-${i}`, 3))).toMatchInlineSnapshot(`
      [
        2,
        3,
        1,
        2,
        1,
        2,
      ]
    `);
  });

  it('puts every task in exactly one shard, about evenly, and adding tasks moves none', () => {
    const ids = Array.from({ length: 3000 }, (_, i) => `task-${i}`);
    const shards = [1, 2, 3].map((index) => ids.filter(shardFilter({ index, count: 3 })));
    expect(shards.reduce((n, s) => n + s.length, 0)).toBe(ids.length);
    expect(new Set(shards.flat()).size).toBe(ids.length);
    for (const s of shards) expect(s.length).toBeGreaterThan(900);
    const more = [...ids, ...Array.from({ length: 500 }, (_, i) => `new-${i}`)];
    for (const [i, s] of shards.entries()) {
      const after = new Set(more.filter(shardFilter({ index: i + 1, count: 3 })));
      for (const id of s) expect(after.has(id)).toBe(true);
    }
  });

  it('keeps a chain whole: every task of a connected group takes the shard of its first root', () => {
    const groups = new ChainGroups();
    // A downstream may come before its upstream in the manifest.
    groups.note('clip-a', ['hero-a']);
    groups.note('hero-a', []);
    groups.note('hero-b', []);
    groups.note('both', ['clip-a', 'hero-b']);
    groups.note('alone', []);
    for (const id of ['clip-a', 'hero-a', 'hero-b', 'both']) expect(groups.keyOf(id)).toBe('hero-a');
    expect(groups.keyOf('alone')).toBe('alone');
    for (const count of [2, 3, 5, 7]) {
      const shard = shardIndexOf('hero-a', count);
      const inIt = shardFilter({ index: shard, count }, groups);
      expect(['clip-a', 'hero-a', 'hero-b', 'both'].every(inIt)).toBe(true);
    }
  });
});

describe('shard runs', () => {
  it('names a shard run after its run, and reads it back', () => {
    const id = shardRunId('spring-2026', { index: 2, count: 3 });
    expect(id).toBe('spring-2026.shard-2-of-3');
    expect(parseShardRunId(id)).toEqual({ base: 'spring-2026', shard: { index: 2, count: 3 } });
    expect(parseShardRunId('spring-2026')).toBeUndefined();
    expect(resultsRunId(id)).toBe('spring-2026');
    expect(resultsRunId('plain')).toBe('plain');
  });
});

describe('budgetShare', () => {
  it('shares the budget by worst case, rounded down to a micro-token, never more than the budget', () => {
    const maxes = [1.2, 1.4, 1];
    const shares = maxes.map((m, i) => budgetShare(10, m, 3.6, { index: i + 1, count: 3 }));
    expect(shares).toEqual([3.333333, 3.888888, 2.777777]);
    const micro = shares.reduce((n, s) => n + Math.round(s * 1e6), 0);
    expect(micro).toBeLessThanOrEqual(10_000_000);
  });

  it('stays exact for large budgets (no float overflow in the product)', () => {
    expect(budgetShare(5_000_000, 1_234_567.891234, 9_876_543.21, { index: 1, count: 8 })).toBe(
      624999.994929,
    );
  });

  it('splits evenly when nothing costs anything', () => {
    expect(budgetShare(9, 0, 0, { index: 1, count: 3 })).toBe(3);
  });
});
