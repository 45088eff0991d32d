// `run --sandbox` fills in the manifest var `sandbox` with the embedded sandbox's address, and only when
// the manifest declares that var.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { FAST_POLLS } from '../helpers/run-env.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-sandbox-var-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function runSandboxed(manifest: string) {
  await writeFile(join(dir, 'm.yaml'), manifest);
  const result = await cli(
    ['--state', 'state.db', 'run', 'm.yaml', '--sandbox', '--yes', '--sandbox-speed', '0'],
    {
      cwd: dir,
      env: { MEDIABATCH_POLL_SCALE: FAST_POLLS },
      now: () => new Date(),
    },
  );
  const db = new Database(join(dir, 'state.db'), { readonly: true });
  try {
    const bodies = db.prepare('SELECT body FROM tasks ORDER BY seq').all() as { body: string }[];
    return { result, bodies: bodies.map((b) => JSON.parse(b.body) as Record<string, unknown>) };
  } finally {
    db.close();
  }
}

describe('the sandbox var', () => {
  it('replaces a declared `sandbox` var with the embedded sandbox address, whose samples it measures', async () => {
    const { result, bodies } = await runSandboxed(`version: 1
name: dance
vars: { sandbox: "http://127.0.0.1:9" }
tasks:
  - id: move
    model: ai_dance_move
    input:
      image_url: "{{sandbox}}/_sandbox/media/full-body.png"
      video_url: "{{sandbox}}/_sandbox/media/dance.mp4"
      resolution: 720p
`);
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
    const base = /Using the embedded sandbox at (\S+) /.exec(result.stdout)?.[1];
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(bodies[0]?.video_url).toBe(`${base}/_sandbox/media/dance.mp4`);
  });

  it('leaves a manifest that does not declare it alone (a matrix key of that name keeps its values)', async () => {
    const { result, bodies } = await runSandboxed(`version: 1
name: shots
tasks:
  - id: "shot-{{sandbox}}"
    model: flat-image
    matrix: { sandbox: [beach] }
    input: { prompt: "a mug on the {{sandbox}}" }
`);
    expect(result.code).toBe(0);
    expect(bodies.map((b) => b.prompt)).toEqual(['a mug on the beach']);
  });
});
