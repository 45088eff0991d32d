// `status` over a state database whose tasks went through the new states: the run list says how many
// paid tasks have no result on disk, and `status <run>` lists them first with what they cost.
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { submit, task, useStoreWithRun } from '../store/helpers.js';

const ctx = useStoreWithRun();
const FP = 'fp0000000000';

/** unf (2 tokens, unfetched), gone (4, lost), slow (1, stalled), bad (failed, refunded), ok (done). */
function seed(): { cwd: string } {
  const store = ctx.store();
  store.tasks.upsertTasks('r1', [
    task('bad'),
    task('ok'),
    task('slow', {}, 1),
    task('unf', {}, 2),
    task('gone', {}, 4),
  ]);
  submit(store, 'r1', 'bad', 'uuid-bad', 3, FP);
  store.jobs.recordJobStatus('uuid-bad', 'failed', { status: 'failed' }, 'poll');
  submit(store, 'r1', 'ok', 'uuid-ok', 3, FP);
  store.jobs.recordJobStatus('uuid-ok', 'success', { status: 'success' }, 'poll');
  store.tasks.markDone('r1', 'ok');
  submit(store, 'r1', 'slow', 'uuid-slow', 1, FP);
  store.tasks.moveTask('r1', 'slow', 'stalled', 'past its deadline of 600 s');
  for (const [id, cost] of [
    ['unf', 2],
    ['gone', 4],
  ] as const) {
    submit(store, 'r1', id, `uuid-${id}`, cost, FP);
    store.jobs.recordJobStatus(`uuid-${id}`, 'success', { status: 'success' }, 'poll');
    store.tasks.moveTask('r1', id, 'unfetched', 'the download link expired');
  }
  store.tasks.moveTask('r1', 'gone', 'lost', 'the service answered 404 for job uuid-gone');
  store.runs.markRunState('r1', 'interrupted');
  // The state file is `<tmp>/state/mediabatch.db`: the CLI runs in <tmp>.
  return { cwd: dirname(dirname(ctx.file())) };
}

describe('status with tasks paid and not on disk', () => {
  it('shows per run how many paid tasks are not on disk', async () => {
    const { cwd } = seed();
    const out = await cli(['--state', 'state/mediabatch.db', 'status'], { cwd });
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/PAID, NOT ON DISK/);
    expect(out.stdout).toContain(
      '5 tasks: 1 done, 1 unfetched (paid, not on disk), 1 stalled, 1 lost (paid, result gone), 1 failed',
    );
    expect(out.stdout).toMatch(/ 10 +3\n$/);
    const json = JSON.parse(
      (await cli(['--state', 'state/mediabatch.db', 'status', '--json'], { cwd })).stdout,
    ) as { runs: { id: string; paid_not_on_disk: number; by_state: Record<string, number> }[] };
    expect(json.runs[0]).toMatchObject({
      id: 'r1',
      paid_not_on_disk: 3,
      by_state: { unfetched: 1, stalled: 1, lost: 1 },
    });
  });

  it('lists unfetched, lost and stalled tasks first, with their tokens, then the failed ones', async () => {
    const { cwd } = seed();
    const out = await cli(['--state', 'state/mediabatch.db', 'status', 'r1'], { cwd });
    expect(out.code).toBe(0);
    expect(out.stdout).toContain(
      'Tasks: 5 (1 stalled, 1 unfetched (paid, not on disk), 1 done, 1 failed, 1 lost (paid, result gone))',
    );
    expect(out.stdout).toContain(
      '3 paid task(s) not on disk (7 tokens: 1 unfetched (paid, not on disk), 2 tokens; 1 stalled, 1 token; 1 lost (paid, result gone), 4 tokens). `mediabatch run /m/spring.yaml --run-id r1` fetches the results without paying again.',
    );
    const rows = out.stdout
      .split('\n')
      .filter((line) => /^(unf|gone|slow|bad|ok) /.test(line))
      .map((line) => line.split(/\s{2,}/).slice(0, 4));
    expect(rows).toEqual([
      ['unf', 'flat-image', 'unfetched (paid, not on disk)', '2'],
      ['gone', 'flat-image', 'lost (paid, result gone)', '4'],
      ['slow', 'flat-image', 'stalled', '1'],
      ['bad', 'flat-image', 'failed', '0'],
    ]);
    const json = JSON.parse(
      (await cli(['--state', 'state/mediabatch.db', 'status', 'r1', '--json'], { cwd })).stdout,
    ) as { paid_not_on_disk: unknown; problems: { id: string; net: number; error: string }[] };
    expect(json.paid_not_on_disk).toEqual({
      tasks: 3,
      tokens: 7,
      unfetched: { tasks: 1, tokens: 2 },
      stalled: { tasks: 1, tokens: 1 },
      lost: { tasks: 1, tokens: 4 },
    });
    expect(json.problems.map((p) => [p.id, p.net, p.error])).toEqual([
      ['unf', 2, 'the download link expired'],
      ['gone', 4, 'the service answered 404 for job uuid-gone'],
      ['slow', 1, 'past its deadline of 600 s'],
      ['bad', 0, expect.any(String)],
    ]);
  });
});
