// `review <run>` lists the results awaiting a decision in columns, as status's tables are: ids of
// different lengths no longer push the model, attempt, files and price of each row to another place.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeRunEnv, type RunEnv } from '../helpers/run-env.js';

let env: RunEnv;
beforeEach(async () => {
  env = await makeRunEnv();
});
afterEach(async () => {
  await env.close();
});

describe('review <run>', () => {
  it('lists what awaits a decision in aligned columns', async () => {
    const file = await env.manifest({
      tasks: ['hero', 'hero-with-a-long-name'].map((id) => ({
        id,
        model: 'flat-image',
        review: true,
        input: { prompt: id },
      })),
    });
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    const listed = await env.run(['review', 'batch']);
    const rows = listed.stdout.split('\n').filter((l) => l.startsWith('  hero'));
    expect(rows).toHaveLength(2);
    for (const column of ['flat-image', 'attempt 1', 'version ', 'out/batch/', '(re-roll up to ']) {
      const at = rows.map((r) => r.indexOf(column));
      expect(at[0], column).toBeGreaterThan(0);
      expect(at[0], column).toBe(at[1]);
    }
  });
});
