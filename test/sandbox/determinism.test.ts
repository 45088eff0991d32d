// Same seed and same requests give the same ids, faults, failures and links; another seed does not.
import { afterEach, describe, expect, it } from 'vitest';
import { type Client, closeAll, openSandbox, PATHS } from './helpers.js';

afterEach(closeAll);

const REQUESTS: Array<[string, Record<string, unknown>]> = [
  [PATHS.images, { model: 'flat-image', prompt: 'a mug' }],
  [PATHS.images, { model: 'oc-maker', prompt: 'JSON with oc_prompt', image_render_model: 'render-a' }],
  [PATHS.audio, { model: 'speech-v3', text: 'hello there' }],
  [PATHS.videos, { model: 'flow22_spicy', prompt: 'x', resolution: '480p' }],
];

async function script(seed: number): Promise<unknown[]> {
  const { sandbox, api, clock } = await openSandbox({
    seed,
    failRate: 0.4,
    errorRate: 0.3,
    chargeThenErrorRate: 0.2,
  });
  const seen: unknown[] = [];
  for (let i = 0; i < 40; i++) {
    const [path, body] = REQUESTS[i % REQUESTS.length] ?? REQUESTS[0]!;
    seen.push(await submitOrDrop(api, path, body));
  }
  clock.advance(120);
  for (const job of sandbox.state().jobs) seen.push((await api.poll(job.img_uuid)).body);
  // Links carry the base URL, whose port differs between the two sandboxes.
  return JSON.parse(JSON.stringify(seen).replaceAll(sandbox.baseUrl, 'BASE'));
}

async function submitOrDrop(api: Client, path: string, body: unknown): Promise<unknown> {
  try {
    return await api.submit(path, body);
  } catch {
    return 'dropped';
  }
}

describe('determinism', () => {
  it('repeats every answer and job under the same seed', async () => {
    const first = await script(42);
    const second = await script(42);
    expect(second).toEqual(first);
    // The script reached every path, so the comparison covers them.
    const text = JSON.stringify(first);
    for (const mark of ['"status":500', 'dropped', '"status":"failed"', '"status":"success"', '"code":0']) {
      expect(text).toContain(mark);
    }
  });

  it('differs under another seed', async () => {
    expect(await script(43)).not.toEqual(await script(42));
  });
});
