// A key too short to be real is refused with one line naming the variable; the key itself
// (a sentinel here) is never printed, and nothing is sent.
import { afterEach, describe, expect, it } from 'vitest';
import { images, makeRunEnv, type RunEnv, reason } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('an API key shorter than 8 characters', () => {
  it.each(['ok', 'e', 'Zq7'])('%j: run refuses it, exit 1, one line, the key never printed', async (key) => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(1) });
    const result = await env.run(['run', file, '--yes'], { env: { MEDIABATCH_API_KEY: key } });
    expect(result.code).toBe(1);
    expect(reason(result)).toBe(
      `apiKey: MEDIABATCH_API_KEY is too short (${key.length} characters); a real API key has at least 8`,
    );
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(env.state().requests.submit).toBe(0);
    if (key.length > 1) expect(result.stdout + result.stderr).not.toContain(`${key}`);
  });

  it('balance refuses it the same way', async () => {
    env = await makeRunEnv();
    const result = await env.run(['balance'], { env: { MEDIABATCH_API_KEY: 'ok' } });
    expect(result.code).toBe(1);
    expect(reason(result)).toMatch(/^apiKey: MEDIABATCH_API_KEY is too short \(2 characters\)/);
  });
});
