// The Runner on its own: a scripted ApiClient, a real SQLite store in a temp folder, a fake download
// and virtual time. No CLI, no HTTP server.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SubmitOutcome } from '../../../src/api/outcome.js';
import { submit, task } from '../../store/helpers.js';
import {
  accepted,
  eventLines,
  fakeDownload,
  gate,
  job,
  makeRunner,
  retryable,
  stateOf,
  until,
  useRunnerSetup,
} from './fakes.js';

const setup = useRunnerSetup();

describe('Runner, driven directly', () => {
  it('submits, polls until the job says completed, downloads its file and writes job.json', async () => {
    const s = setup([task('t1', {}, 0.2)]);
    s.api.answers.set('t1', [accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [job('u1', 'processing'), job('u1', 'completed', 1)]);
    const { runner, events, runDir } = makeRunner(s);

    const result = await runner.run();

    expect(result.stopReason).toBeUndefined();
    expect(result.counts.done).toBe(1);
    expect(result.arrivals).toEqual({ poll: 1, callback: 0 });
    expect(s.api.polled).toEqual(['u1', 'u1']);
    expect(eventLines(events)).toEqual(['submitted t1', 'done t1']);
    const [file] = s.store.files.filesOfTask('r1', 't1');
    expect(file?.path.startsWith(runDir)).toBe(true);
    expect(readFileSync(file?.path ?? '', 'utf8')).toBe('bytes of https://cdn.test/u1/0.png');
    const jobJson = JSON.parse(readFileSync(join(file?.path ?? '', '..', 'job.json'), 'utf8'));
    expect(jobJson).toMatchObject({ task: 't1', img_uuid: 'u1', job: { status: 'completed' } });
  });

  it('waits for answers in flight when the next worst case does not fit, then stops at the budget', async () => {
    const s = setup([task('t1', {}, 0.2), task('t2', {}, 0.2), task('t3', {}, 0.2), task('t4', {}, 0.3)]);
    const first = gate<SubmitOutcome>();
    const second = gate<SubmitOutcome>();
    s.api.answers.set('t1', [first.promise]);
    s.api.answers.set('t2', [second.promise]);
    s.api.answers.set('t3', [accepted('u3', 0.2)]);
    for (const u of ['u1', 'u2', 'u3']) s.api.jobs.set(u, [job(u, 'completed', 1)]);
    const { runner, events } = makeRunner(s, { budget: 0.5 });

    const running = runner.run();
    await until(() => s.api.submitted.length === 2, 't1 and t2 sent');
    // t1 and t2 hold 0.4 as worst cases: t3 (0.2) would pass 0.5, so it waits for an answer.
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    expect(s.api.submitted).toEqual(['t1', 't2']);
    // t1 cost less than its worst case (0.1 charged + 0.2 in flight + 0.2 = 0.5): t3 fits now.
    first.open(accepted('u1', 0.1));
    await until(() => s.api.submitted.length === 3, 't3 sent');
    second.open(accepted('u2', 0.2));
    const result = await running;

    // 0.1 + 0.2 + 0.2 spent: t4 (up to 0.3) cannot be covered, and nothing is left in flight to wait for.
    expect(s.api.submitted).toEqual(['t1', 't2', 't3']);
    expect(result.stopReason).toBe('budget');
    expect(result.stopMessage).toBe(
      'the budget of 0.5 tokens cannot cover the next task (t4, up to 0.3 tokens): raise budget and run again to continue',
    );
    expect(result.counts).toMatchObject({ done: 3, pending: 1 });
    expect(stateOf(s.store, 't4')).toBe('pending');
    expect(events.at(-1)).toMatchObject({ event: 'stopped', reason: 'budget' });
  });

  it('leaves a task too dear for what is left pending and submits the cheaper ones', async () => {
    const s = setup([task('big', {}, 0.6), task('t1', {}, 0.2)]);
    s.api.answers.set('t1', [accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [job('u1', 'completed', 1)]);
    const { runner } = makeRunner(s, { budget: 0.5 });

    const result = await runner.run();

    expect(s.api.submitted).toEqual(['t1']);
    expect(result.stopReason).toBe('budget');
    expect(result.stopMessage).toBe(
      '1 task(s) did not fit under the budget of 0.5 tokens (0.3 tokens left; they need up to 0.6 tokens): raise budget and run again to continue',
    );
    expect(stateOf(s.store, 'big')).toBe('pending');
    expect(stateOf(s.store, 't1')).toBe('done');
  });

  it('says by how much a budget lowered under what the run spent is over, never "0 left"', async () => {
    const s = setup([task('paid', {}, 0.4), task('t1', {}, 0.2)]);
    // A run charged 0.4 before its budget was lowered to 0.3.
    submit(s.store, 'r1', 'paid', 'u-paid', 0.4);
    s.store.tasks.moveTask('r1', 'paid', 'downloading', null);
    s.store.tasks.markDone('r1', 'paid');
    const { runner } = makeRunner(s, { budget: 0.3 });

    const result = await runner.run();

    expect(s.api.submitted).toEqual([]);
    expect(result.stopMessage).toBe(
      '1 task(s) did not fit under the budget of 0.3 tokens (already 0.1 tokens over; they need up to 0.2 tokens): raise budget and run again to continue',
    );
    expect(stateOf(s.store, 't1')).toBe('pending');
  });

  it('stops as unreachable after three tasks in a row exhausted their retries', async () => {
    const s = setup(['t1', 't2', 't3', 't4'].map((id) => task(id)));
    for (const id of ['t1', 't2', 't3', 't4']) s.api.answers.set(id, [retryable('HTTP 500')]);
    const { runner, events } = makeRunner(s, { concurrency: 1, submitRetries: 1 });

    const result = await runner.run();

    expect(s.api.submitted).toEqual(['t1', 't1', 't2', 't2', 't3', 't3']);
    expect(result.stopReason).toBe('unreachable');
    expect(result.stopMessage).toBe(
      'the API keeps failing (HTTP 500); nothing was charged for those tasks: run again later',
    );
    expect(result.counts.pending).toBe(4);
    expect(s.store.tasks.getTask('r1', 't1')?.error).toBe('not submitted after 2 attempts: HTTP 500');
    expect(s.store.submissions.attemptsOf('r1', 't1').map((a) => a.outcome)).toEqual([
      'not_charged',
      'not_charged',
    ]);
    expect(eventLines(events)).toEqual(['stopped']);
  });

  it('does not spend a retry on a throttled answer', async () => {
    const s = setup([task('t1')]);
    const throttled = retryable('HTTP 429', true);
    s.api.answers.set('t1', [throttled, throttled, throttled, accepted('u1', 3)]);
    s.api.jobs.set('u1', [job('u1', 'completed', 1)]);
    const { runner } = makeRunner(s, { submitRetries: 1 });

    const result = await runner.run();

    expect(s.api.submitted).toEqual(['t1', 't1', 't1', 't1']);
    expect(result.stopReason).toBeUndefined();
    expect(stateOf(s.store, 't1')).toBe('done');
  });

  it('returns at once on the halt signal, leaving the job watched by the next run', async () => {
    const s = setup([task('t1')]);
    s.api.answers.set('t1', [accepted('u1', 3)]);
    s.api.jobs.set('u1', [job('u1', 'processing')]);
    const halt = new AbortController();
    const { runner } = makeRunner(s, { halt: halt.signal });

    const running = runner.run();
    await until(() => s.api.polled.length > 0, 'the first poll');
    halt.abort();
    const result = await running;

    expect(result.stopReason).toBe('interrupted');
    expect(result.stopMessage).toBe('interrupted twice: stopped at once; run again to continue');
    // The poll said processing: the task is running, not fetched, and nothing more was looked at.
    expect(stateOf(s.store, 't1')).toBe('running');
    expect(s.api.polled).toEqual(['u1']);
  });

  it('on the stop signal submits nothing new but records the answer in flight', async () => {
    const s = setup([task('t1'), task('t2')]);
    const answer = gate<SubmitOutcome>();
    s.api.answers.set('t1', [answer.promise]);
    s.api.answers.set('t2', [accepted('u2', 3)]);
    s.api.jobs.set('u1', [job('u1', 'processing')]);
    const stop = new AbortController();
    const { runner, events } = makeRunner(s, { concurrency: 1, stop: stop.signal });

    const running = runner.run();
    await until(() => s.api.submitted.length === 1, 't1 sent');
    stop.abort();
    answer.open(accepted('u1', 3));
    const result = await running;

    expect(s.api.submitted).toEqual(['t1']);
    expect(result.stopReason).toBe('interrupted');
    expect(stateOf(s.store, 't1')).toBe('submitted');
    expect(s.store.tasks.getTask('r1', 't1')?.imgUuid).toBe('u1');
    expect(stateOf(s.store, 't2')).toBe('pending');
    expect(eventLines(events)).toEqual(['submitted t1', 'stopped']);
  });

  it('confirms a callback hint with one poll, and ignores a hint naming another job', async () => {
    const s = setup([task('t1')]);
    s.api.answers.set('t1', [accepted('u1', 3)]);
    s.api.jobs.set('u1', [job('u1', 'completed', 1)]);
    // Polls of their own would come an hour later: what happens before is the callbacks' doing.
    const hour = { intervalMs: 3_600_000, factor: 1, capMs: 3_600_000, firstAtLeastMs: 3_600_000 };
    const { runner, events } = makeRunner(s, {
      pollProfiles: { image: hour, audio: hour, video: hour },
    });

    const running = runner.run();
    await until(() => events.some((e) => e.event === 'submitted'), 't1 accepted');
    await until(() => s.store.tasks.getTask('r1', 't1')?.imgUuid === 'u1', 'the job id recorded');
    const other = await runner.hint({ taskId: 't1', imgUuid: 'u9', status: 'completed' });
    expect(other).toBe(true);
    expect(s.api.polled).toEqual([]);
    const settled = await runner.hint({ taskId: 't1', imgUuid: 'u1', status: 'completed' });
    const result = await running;

    expect(settled).toBe(true);
    expect(s.api.polled).toEqual(['u1']);
    expect(result.arrivals).toEqual({ poll: 0, callback: 1 });
    expect(stateOf(s.store, 't1')).toBe('done');
  });

  it('looks at a hint that came before the submission answer once the answer is recorded', async () => {
    const s = setup([task('t1')]);
    const answer = gate<SubmitOutcome>();
    s.api.answers.set('t1', [answer.promise]);
    s.api.jobs.set('u1', [job('u1', 'completed', 1)]);
    const hour = { intervalMs: 3_600_000, factor: 1, capMs: 3_600_000, firstAtLeastMs: 3_600_000 };
    const { runner } = makeRunner(s, { pollProfiles: { image: hour, audio: hour, video: hour } });

    const running = runner.run();
    await until(() => s.api.submitted.length === 1, 't1 sent');
    // Not settled yet: the task has no job id, so a repeat of this callback must still be heard.
    expect(await runner.hint({ taskId: 't1', imgUuid: 'u1', status: 'completed' })).toBe(false);
    expect(s.api.polled).toEqual([]);
    answer.open(accepted('u1', 3));
    const result = await running;

    expect(s.api.polled).toEqual(['u1']);
    expect(result.arrivals).toEqual({ poll: 0, callback: 1 });
    expect(stateOf(s.store, 't1')).toBe('done');
  });

  it('marks a job past its deadline stalled and gives its slot to the next task', async () => {
    const s = setup([task('slow'), task('t2')]);
    s.api.answers.set('slow', [accepted('u1', 3)]);
    s.api.answers.set('t2', [accepted('u2', 3)]);
    s.api.jobs.set('u1', [job('u1', 'processing')]);
    s.api.jobs.set('u2', [job('u2', 'completed', 1)]);
    const { runner, events } = makeRunner(s, {
      concurrency: 1,
      watch: { jobDeadlineMs: { image: 60_000, audio: 60_000, video: 60_000 } },
    });

    const result = await runner.run();

    expect(result.stopReason).toBeUndefined();
    expect(stateOf(s.store, 'slow')).toBe('stalled');
    expect(stateOf(s.store, 't2')).toBe('done');
    expect(eventLines(events)).toEqual(['submitted slow', 'stalled slow', 'submitted t2', 'done t2']);
    expect(events[1]).toMatchObject({
      reason: 'no result 1 min after submission; still watched, and a later run keeps watching it',
    });
    // The run's last line says why it is unfinished.
    expect(result.unfinishedWhy).toBe(
      'slow: no result 1 min after submission; still watched, and a later run keeps watching it',
    );
  });

  it('submits a failed (refunded) job again while the task has retries left', async () => {
    const s = setup([{ ...task('t1'), retries: 1 }]);
    s.api.answers.set('t1', [accepted('u1', 3), accepted('u2', 3)]);
    s.api.jobs.set('u1', [job('u1', 'failed')]);
    s.api.jobs.set('u2', [job('u2', 'completed', 1)]);
    const { runner, events } = makeRunner(s);

    const result = await runner.run();

    expect(s.api.submitted).toEqual(['t1', 't1']);
    expect(result.retriedFailures).toBe(1);
    expect(eventLines(events)).toEqual(['submitted t1', 'failed t1', 'submitted t1', 'done t1']);
    expect(events[1]).toMatchObject({ event: 'failed', retrying: true, refunded: 3 });
    expect(stateOf(s.store, 't1')).toBe('done');
    expect(s.store.tasks.getTask('r1', 't1')?.imgUuid).toBe('u2');
  });

  it('keeps a result it cannot write as unfetched and stops submitting (local-disk)', async () => {
    const s = setup([task('t1'), task('t2')]);
    s.api.answers.set('t1', [accepted('u1', 3)]);
    s.api.answers.set('t2', [accepted('u2', 3)]);
    s.api.jobs.set('u1', [job('u1', 'completed', 1)]);
    const download = fakeDownload(() => ({
      ok: false,
      type: 'disk',
      message: 'no space left on the device writing out/r1/t1/t1.png',
      retrySafe: false,
      local: true,
      localCode: 'ENOSPC',
    }));
    const { runner, events, runDir } = makeRunner({ ...s, download }, { concurrency: 1 });

    const result = await runner.run();

    const reason =
      'no space left on the device writing out/r1/t1/t1.png; the result is paid and still on the service';
    expect(result.stopReason).toBe('local-disk');
    expect(result.stopMessage).toBe(reason);
    expect(s.api.submitted).toEqual(['t1']);
    expect(stateOf(s.store, 't1')).toBe('unfetched');
    expect(stateOf(s.store, 't2')).toBe('pending');
    expect(events).toContainEqual(expect.objectContaining({ event: 'unfetched', task: 't1', reason }));
    expect(existsSync(join(runDir, 't1', 'job.json'))).toBe(false);
  });
});

describe('when a job is looked at', () => {
  it('learns nothing from jobs of an earlier process found finished at the first look', async () => {
    const s = setup([...Array.from({ length: 6 }, (_, i) => task(`old${i}`)), task('new')]);
    for (let i = 0; i < 6; i++) {
      submit(s.store, 'r1', `old${i}`, `o${i}`, 3);
      s.api.jobs.set(`o${i}`, [job(`o${i}`, 'completed', 1)]);
    }
    // The earlier process went away ten minutes ago; its jobs ended long since.
    s.clock.ms += 10 * 60_000;
    s.api.answers.set('new', [accepted('u1', 3)]);
    s.api.jobs.set('u1', [job('u1', 'completed', 1)]);
    // When the new job is first looked at, measured from its submission on the same (virtual) clock.
    let firstLookAfter: number | undefined;
    const getJob = s.api.getJob.bind(s.api);
    s.api.getJob = async (imgUuid) => {
      const sent = s.store.tasks.getTask('r1', 'new')?.submittedAt?.getTime();
      if (imgUuid === 'u1' && sent !== undefined) firstLookAfter ??= s.clock.ms - sent;
      return getJob(imgUuid);
    };
    const { runner } = makeRunner(s);

    const result = await runner.run();

    expect(result.counts.done).toBe(7);
    // Near an image's expected shortest time (1 s here, looked at half an interval later), not minutes on.
    expect(firstLookAfter).toBeGreaterThanOrEqual(1_000);
    expect(firstLookAfter).toBeLessThan(5_000);
  });
});
