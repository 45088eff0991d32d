// report --merge's pure core (issue 26): shard reports in, the run's report out. Totals are exact sums
// (micro-tokens underneath), every task once, and the shards missing or unfinished are named.
import { describe, expect, it } from 'vitest';
import { MergeError, mergeShardReports } from '../../src/report/merge.js';
import { type Report, reportSchema } from '../../src/report/schema.js';
import { TASK_STATES } from '../../src/store/types.js';

const NOW = new Date('2026-11-27T08:00:00Z');

function summary(
  tasks: number,
  charged: number,
  refunded: number,
  states: Partial<Record<string, number>> = {},
) {
  const byStatus = Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as Report['totals']['by_status'];
  Object.assign(byStatus, { done: tasks }, states);
  const net = Math.round((charged - refunded) * 1e6) / 1e6;
  return {
    tasks,
    by_status: byStatus,
    jobs: tasks,
    estimated: { tokens: charged, min: charged, max: charged, usd: charged * 0.02 },
    charged: { tokens: charged, usd: charged * 0.02 },
    refunded: { tokens: refunded, usd: refunded * 0.02 },
    net: { tokens: net, usd: net * 0.02 },
    list_price_of_charged: charged,
    charge_ratio: 1,
    discount: 0,
    paid_without_result: {
      tasks: 0,
      tokens: 0,
      unfetched: { tasks: 0, tokens: 0 },
      stalled: { tasks: 0, tokens: 0 },
      lost: { tasks: 0, tokens: 0 },
    },
    recovered_from_doubt: 0,
    retried: 0,
    cost_assumed: 0,
  };
}

function shardReport(
  index: number,
  count: number,
  ids: string[],
  charged: number,
  refunded = 0,
  state: Report['run']['state'] = 'finished',
): Report {
  const totals = summary(ids.length, charged, refunded);
  return reportSchema.parse({
    version: 2,
    generated_at: `2026-11-27T0${index}:00:00.000Z`,
    usd_per_token: 0.02,
    run: {
      id: `wide.shard-${index}-of-${count}`,
      name: 'wide',
      manifest: '/m/wide.yaml',
      state,
      exit_code: state === 'finished' ? 0 : 4,
      created_at: `2026-11-27T0${index}:00:00.000Z`,
      started_at: `2026-11-27T0${index}:00:00.000Z`,
      finished_at: state === 'finished' ? `2026-11-27T0${index}:30:00.000Z` : null,
      active_s: 100 * index,
      shard: { index, count, run: 'wide' },
    },
    advice: [],
    in_doubt: [],
    totals,
    by_model: [{ model: 'flat-image', ...totals }],
    balance: { before: 1000 - index, after: 990 - index, change: 10 },
    quota: {
      period: '2026-11',
      keys: [
        {
          key_fingerprint: 'k1',
          charged,
          refunded,
          net: totals.net.tokens,
          limit: null,
          used: null,
          source: null,
        },
      ],
    },
    tasks: ids.map((id) => ({
      id,
      model: 'flat-image',
      img_uuid: `u-${id}`,
      status: 'done',
      job_status: 'success',
      request: { prompt: id },
      folder: id,
      estimate: { tokens: 0.1, min: 0.1, max: 0.1, basis: 'per image', assumed: false },
      charged: 0.1,
      refunded: 0,
      net: 0.1,
      net_usd: 0.002,
      jobs: 1,
      attempts: 1,
      charged_attempts: 1,
      cost_assumed: false,
      recovered_from_doubt: false,
      submitted_at: null,
      finished_at: null,
      job_duration_s: null,
      elapsed_s: null,
      files: [],
      bytes: 0,
      error: null,
      after: [],
      planned_estimate: null,
    })),
  });
}

describe('mergeShardReports', () => {
  it('adds the shards up exactly, every task once, and names none missing', () => {
    // 0.1 + 0.2 in floats is 0.30000000000000004: the sums are taken in micro-tokens.
    const merged = mergeShardReports(
      [
        { source: 'a', report: shardReport(1, 2, ['a', 'b'], 0.1, 0.1) },
        { source: 'b', report: shardReport(2, 2, ['c'], 0.2) },
      ],
      NOW,
    );
    expect(reportSchema.parse(merged)).toEqual(merged);
    expect(merged.run).toMatchObject({ id: 'wide', state: 'finished', exit_code: 0, active_s: 200 });
    expect(merged.run.shard).toBeUndefined();
    expect(merged.totals.tasks).toBe(3);
    expect(merged.totals.charged.tokens).toBe(0.3);
    expect(merged.totals.refunded.tokens).toBe(0.1);
    expect(merged.totals.net.tokens).toBe(0.2);
    expect(merged.by_model).toHaveLength(1);
    expect(merged.by_model[0]?.charged.tokens).toBe(0.3);
    expect(merged.quota.keys).toEqual([
      expect.objectContaining({ key_fingerprint: 'k1', charged: 0.3, refunded: 0.1 }),
    ]);
    expect(merged.balance).toEqual({ before: 999, after: 988, change: 11 });
    expect(merged.tasks.map((t) => t.id)).toEqual(['a', 'b', 'c']);
    expect(merged.shards).toEqual({
      count: 2,
      merged: [
        { index: 1, run: 'wide.shard-1-of-2', state: 'finished', exit_code: 0, tasks: 2, unfinished: 0 },
        { index: 2, run: 'wide.shard-2-of-2', state: 'finished', exit_code: 0, tasks: 1, unfinished: 0 },
      ],
      missing: [],
      unfinished: [],
    });
  });

  it('names the missing and unfinished shards, and the run is not finished', () => {
    const merged = mergeShardReports(
      [
        { source: 'a', report: shardReport(1, 3, ['a'], 0.1) },
        { source: 'c', report: shardReport(3, 3, ['c'], 0.1, 0, 'interrupted') },
      ],
      NOW,
    );
    expect(merged.shards?.missing).toEqual([2]);
    expect(merged.shards?.unfinished).toEqual([3]);
    expect(merged.run.state).toBe('interrupted');
    expect(merged.run.finished_at).toBeNull();
    // Reports written before they kept the run's invocation: the manifest and the default state file.
    expect(merged.advice.slice(0, 2)).toEqual([
      'Missing: no report of shard 2 of 3: its tasks are not in this report; run it: `mediabatch run /m/wide.yaml --shard 2/3 --run-id wide` (on its machine), then merge again.',
      'Unfinished: shard 3 of 3 did not finish; continue it: `mediabatch run /m/wide.yaml --shard 3/3 --run-id wide`, then merge again.',
    ]);
    expect(merged.shards?.commands).toEqual({
      '2': 'mediabatch run /m/wide.yaml --shard 2/3 --run-id wide',
      '3': 'mediabatch run /m/wide.yaml --shard 3/3 --run-id wide',
    });
  });

  it('keeps the newer report of a shard given twice', () => {
    const older = shardReport(1, 1, ['a'], 0.1);
    const newer = { ...shardReport(1, 1, ['a', 'b'], 0.2), generated_at: '2026-11-27T09:00:00.000Z' };
    const merged = mergeShardReports(
      [
        { source: 'new', report: newer },
        { source: 'old', report: older },
      ],
      NOW,
    );
    expect(merged.tasks.map((t) => t.id)).toEqual(['a', 'b']);
  });

  it.each([
    [
      'a report that is not a shard',
      () => [
        {
          source: 'r.json',
          report: {
            ...shardReport(1, 2, ['a'], 0.1),
            run: { ...shardReport(1, 2, ['a'], 0.1).run, shard: undefined, id: 'wide' },
          },
        },
      ],
      'r.json is the report of run wide, which is not a shard (no run.shard): merge the report.shard-<i>-of-<n>.json files of one run',
    ],
    [
      'shards of two counts',
      () => [
        { source: 'x', report: shardReport(1, 2, ['a'], 0.1) },
        { source: 'y', report: shardReport(2, 3, ['b'], 0.1) },
      ],
      'y is shard 2 of 3 of run wide, and x is of run wide in 2 shards: merge the shards of one run',
    ],
    [
      'a task in two shards',
      () => [
        { source: 'x', report: shardReport(1, 2, ['a'], 0.1) },
        { source: 'y', report: shardReport(2, 2, ['a'], 0.1) },
      ],
      'task a is in two shard reports: they are not shards of one run',
    ],
  ])('refuses %s with one line', (_what, inputs, message) => {
    expect(() => mergeShardReports(inputs(), NOW)).toThrow(new MergeError(message));
  });
});
