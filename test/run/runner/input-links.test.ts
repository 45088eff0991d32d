// Local inputs at the runner: each POST attempt gets links signed then, and the stored request keeps
// `file:path`, so a new link never makes a resumed task look changed.
import { describe, expect, it } from 'vitest';
import { task } from '../../store/helpers.js';
import { accepted, job, makeRunner, retryable, useRunnerSetup } from './fakes.js';

const setup = useRunnerSetup();

describe('input links at submission', () => {
  it('signs the links anew for each attempt and never stores them', async () => {
    const s = setup([task('t1', { image_url: 'file:faces/a.jpg' }, 0.2)]);
    s.api.answers.set('t1', [retryable('HTTP 503'), accepted('u1', 0.2)]);
    s.api.jobs.set('u1', [job('u1', 'completed', 1)]);
    const sentBodies: Array<Record<string, unknown>> = [];
    const submit = s.api.submit.bind(s.api);
    s.api.submit = async (endpoint, body) => {
      sentBodies.push(body);
      return submit(endpoint, body);
    };
    let signed = 0;
    const { runner } = makeRunner(s, {
      inputLinks: async (body) => ({ ...body, image_url: `https://bucket.test/a.jpg?sig=${++signed}` }),
    });
    const result = await runner.run();
    expect(result.counts.done).toBe(1);
    expect(sentBodies.map((b) => b['image_url'])).toEqual([
      'https://bucket.test/a.jpg?sig=1',
      'https://bucket.test/a.jpg?sig=2',
    ]);
    const stored = s.store.tasks.getTask('r1', 't1');
    expect(JSON.parse(stored?.wireBody ?? '{}')['image_url']).toBe('file:faces/a.jpg');
  });
});
