// The service's documented habits and hostile answers, on the Runner alone: what a broken or hostile server can make it do is bounded, and
// each wait for the service has an end. Scripted ApiClient, real SQLite, virtual time.

import { describe, expect, it } from 'vitest';
import type { PollOutcome } from '../../../src/api/outcome.js';
import { task } from '../../store/helpers.js';
import { accepted, eventLines, job, makeRunner, stateOf, useRunnerSetup } from './fakes.js';

const setup = useRunnerSetup();
const notFound: PollOutcome = { type: 'not-found', message: 'job not found (HTTP 404)' };

describe('what a server can make the Runner do, and how long it waits', () => {
  it('keeps at most maxResultItems files of a job that lists thousands, and says so in job.json', async () => {
    const s = setup([task('t1', {}, 0.2)]);
    s.api.answers.set('t1', [accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [job('u1', 'success', 5_000)]);
    const { runner } = makeRunner(s, { watch: { maxResultItems: 3 } });
    const result = await runner.run();
    expect(result.counts.done).toBe(1);
    expect(s.store.files.filesOfTask('r1', 't1').map((f) => f.index)).toEqual([1, 2, 3]);
  });

  it('ignores a job record that names another job than the one asked for', async () => {
    const s = setup([task('t1', {}, 0.2)]);
    s.api.answers.set('t1', [accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [job('someone-else', 'success', 1), job('u1', 'success', 1)]);
    const { runner } = makeRunner(s);
    const result = await runner.run();
    expect(result.counts.done).toBe(1);
    const [file] = s.store.files.filesOfTask('r1', 't1');
    expect(file?.path).toMatch(/t1\/1\.png$/);
    expect(s.api.polled).toEqual(['u1', 'u1']);
  });

  it('waits out a jobs/detail 404 right after the submission, then follows the job', async () => {
    const s = setup([task('t1', {}, 0.2)]);
    s.api.answers.set('t1', [accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [notFound, notFound, job('u1', 'success', 1)]);
    const { runner } = makeRunner(s, { watch: { notFoundWindowMs: 60_000 } });
    expect((await runner.run()).counts.done).toBe(1);
  });

  it('gives up watching a job the API still does not know past the window, leaving it for a later run', async () => {
    const s = setup([task('t1', {}, 0.2)]);
    s.api.answers.set('t1', [accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [notFound]);
    const { runner } = makeRunner(s, { watch: { notFoundWindowMs: 5_000 } });
    const result = await runner.run();
    expect(stateOf(s.store, 't1')).toBe('submitted');
    expect(s.store.tasks.getTask('r1', 't1')?.error).toMatch(
      /^the API does not know job u1 \(job not found \(HTTP 404\)\)/,
    );
    expect(result.counts.submitted).toBe(1);
    expect(result.unfinishedWhy).toMatch(
      /^t1: the API does not know job u1 \(job not found \(HTTP 404\)\); it stays submitted for a later run$/,
    );
  });

  it('a success with no result list: waited on for the grace period, then unfetched (paid, resumable)', async () => {
    const s = setup([task('t1', {}, 0.2)]);
    s.api.answers.set('t1', [accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [job('u1', 'success')]);
    const { runner, events } = makeRunner(s, { watch: { successGraceMs: 10_000 } });
    const result = await runner.run();
    expect(stateOf(s.store, 't1')).toBe('unfetched');
    expect(result.counts.unfetched).toBe(1);
    expect(eventLines(events)).toEqual(['submitted t1', 'unfetched t1']);
    expect(s.api.polled.length).toBeGreaterThan(3);
  });

  it('a success whose results appear within the grace period is downloaded', async () => {
    const s = setup([task('t1', {}, 0.2)]);
    s.api.answers.set('t1', [accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [job('u1', 'success'), job('u1', 'success'), job('u1', 'success', 1)]);
    const { runner } = makeRunner(s, { watch: { successGraceMs: 60_000 } });
    expect((await runner.run()).counts.done).toBe(1);
  });

  it('an accepted answer without a cost books the list price, marked assumed', async () => {
    const s = setup([task('t1', {}, 2.5)]);
    s.api.answers.set('t1', [accepted('u1')]);
    s.api.jobs.set('u1', [job('u1', 'success', 1)]);
    const { runner, events } = makeRunner(s);
    await runner.run();
    expect(s.store.tasks.getTask('r1', 't1')).toMatchObject({ state: 'done', cost: 2.5, costAssumed: true });
    expect(events.find((e) => e.event === 'submitted')).toMatchObject({ cost: 2.5, cost_assumed: true });
  });
});
