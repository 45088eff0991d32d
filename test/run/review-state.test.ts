// Choosing results (docs/review.md): a downstream of a reviewed result nobody approved yet is shown in a state of its
// own, `awaiting_review`, wherever states are shown or filtered: `run`'s end line and --json, `status`,
// report.json/csv/md, the gallery's data, and a keyset-paged store read for the view. The stored state stays
// `pending` (never submitted: money from the sandbox's /_sandbox/state). Real HTTP, a real SQLite file.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { makeRunEnv, type RunEnv, type TaskDecl, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

async function jobModels(e: RunEnv): Promise<string[]> {
  const answer = await request(`${e.sandbox.baseUrl}/_sandbox/state`);
  return ((await answer.body.json()) as { jobs: Array<{ model: string }> }).jobs.map((j) => j.model);
}

const VARIANTS: TaskDecl[] = [
  {
    id: 'still-{{index}}',
    model: 'flat-image',
    repeat: 3,
    review: true,
    input: { prompt: 'A mug, variant {{index}}' },
  },
  {
    id: 'clip-{{index}}',
    model: 'studio-2-6',
    repeat: 3,
    after: 'still-{{index}}',
    input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
  },
];

describe('awaiting_review, a state the user sees', () => {
  it('is shown by run, status, the reports and the gallery, and read a page at a time from the store', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: VARIANTS, concurrency: 6 });
    const first = await env.run(['run', file, '--yes', '--json']);
    expect(first.code).toBe(4);
    expect(await jobModels(env)).toEqual(Array(3).fill('flat-image'));
    // Stored as pending (waits > 0): never submitted before approval.
    expect(taskStates(env)).toMatchObject({ 'clip-1': 'pending', 'clip-2': 'pending', 'clip-3': 'pending' });
    const events = first.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; counts?: Record<string, number> });
    const withCounts = events.filter((e) => e.counts !== undefined);
    expect(withCounts.at(-1)?.counts).toMatchObject({ done: 3, awaiting_review: 3, pending: 0 });

    const plain = await env.run(['run', file, '--yes']);
    expect(plain.code).toBe(4);
    expect(plain.stdout).toContain('Resuming run batch (3 done, 3 awaiting review)\n');
    expect(plain.stdout).toContain('\n3/6 finished · 3 done · 3 awaiting review · 0.6 of ~32.1 tokens\n');
    expect(plain.stdout).toContain('\nRun batch: 3 done, 3 awaiting review\n');
    // Not sent, so nothing to watch.
    expect(plain.stdout).not.toContain('still watched');

    const status = await env.run(['status', 'batch']);
    expect(status.stdout).toContain('  Tasks: 6 (3 awaiting review (of an upstream), 3 done)\n');
    expect(status.stdout).toMatch(
      /^clip-1 +awaiting review \(of an upstream\) +still-1 \(done, awaiting review\)$/m,
    );
    const statusJson = JSON.parse((await env.run(['status', 'batch', '--json'])).stdout) as {
      counts?: Record<string, number>;
      tasks?: Record<string, number>;
    };
    expect(JSON.stringify(statusJson)).toContain('"awaiting_review":3');

    const runDir = join(env.dir, 'out', 'batch');
    const report = JSON.parse(readFileSync(join(runDir, 'report.json'), 'utf8')) as {
      tasks: Array<{ id: string; status: string }>;
    };
    expect(Object.fromEntries(report.tasks.map((t) => [t.id, t.status]))).toEqual({
      'still-1': 'done',
      'still-2': 'done',
      'still-3': 'done',
      'clip-1': 'awaiting_review',
      'clip-2': 'awaiting_review',
      'clip-3': 'awaiting_review',
    });
    const csv = readFileSync(join(runDir, 'report.csv'), 'utf8').split('\n');
    expect(csv.filter((l) => l.startsWith('clip-') && l.includes(',awaiting_review,'))).toHaveLength(3);
    expect(readFileSync(join(runDir, 'report.md'), 'utf8')).toMatch(
      /^\| `clip-1` ← `still-1` \| studio-2-6 \| awaiting_review \|/m,
    );
    expect(readFileSync(join(runDir, 'index.html'), 'utf8')).toContain('"awaiting_review"');

    // The view's read: keyset pages by seq, only the tasks awaiting review.
    const store = openStore(env.db);
    try {
      const page1 = store.reviews.tasksAwaitingReview('batch', { limit: 2 });
      expect(page1.map((t) => t.taskId)).toEqual(['clip-1', 'clip-2']);
      const page2 = store.reviews.tasksAwaitingReview('batch', {
        afterSeq: page1.at(-1)?.seq ?? -1,
        limit: 2,
      });
      expect(page2.map((t) => t.taskId)).toEqual(['clip-3']);
      const filtered = [
        ...store.reportReads.reportTaskPages('batch', { states: ['awaiting_review'] }),
      ].flat();
      expect(filtered.map((t) => [t.taskId, t.state])).toEqual([
        ['clip-1', 'awaiting_review'],
        ['clip-2', 'awaiting_review'],
        ['clip-3', 'awaiting_review'],
      ]);
      // The view's list, filtered by the shown state, in both orders.
      for (const order of ['id', 'newest'] as const) {
        const page = store.viewReads.taskPage({
          runId: 'batch',
          order,
          states: ['awaiting_review'],
          limit: 10,
        });
        expect(page.tasks.map((t) => [t.taskId, t.state]).sort()).toEqual([
          ['clip-1', 'awaiting_review'],
          ['clip-2', 'awaiting_review'],
          ['clip-3', 'awaiting_review'],
        ]);
      }
      const pendingOnly = store.viewReads.taskPage({
        runId: 'batch',
        order: 'id',
        states: ['pending'],
        limit: 10,
      });
      expect(pendingOnly.tasks).toEqual([]);
    } finally {
      store.close();
    }

    // Approve one, reject one: one clip sent, one skipped, one still awaiting review. The rejected
    // result counts as a rejection, not as a task done.
    expect((await env.run(['review', 'batch', '--approve', 'still-2', '--reject', 'still-3'])).code).toBe(0);
    expect((await env.run(['status', 'batch'])).stdout).toContain(
      '  Tasks: 6 (1 pending, 1 awaiting review (of an upstream), 2 done, 1 rejected, 1 skipped (upstream rejected))\n',
    );
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    expect(await jobModels(env)).toEqual([...Array(3).fill('flat-image'), 'studio-2-6']);
    const after = JSON.parse(readFileSync(join(runDir, 'report.json'), 'utf8')) as {
      tasks: Array<{ id: string; status: string }>;
    };
    expect(Object.fromEntries(after.tasks.map((t) => [t.id, t.status]))).toMatchObject({
      'clip-1': 'awaiting_review',
      'clip-2': 'done',
      'clip-3': 'skipped',
    });
  });
});
