// The packed package is what a TypeScript or JavaScript user imports. `npm pack` builds and packs
// it; the tarball is unpacked into a fresh project's node_modules (its dependencies linked from ours, since
// installing them again would rebuild SQLite), and a script plans and runs a manifest against the sandbox.
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'mb-pack-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SCRIPT = `
import { plan, readReport, run, startSandbox } from 'mediabatch';

const sandbox = await startSandbox({ port: 0, speed: 0 });
try {
  const planned = await plan('shots.yaml', { probe: false });
  console.log('planned', planned.totals.tasks, planned.totals.tokens);
  const seen = [];
  const outcome = await run('shots.yaml', {
    baseUrl: sandbox.baseUrl,
    apiKey: 'sandbox-key',
    timeScale: 0.01,
    onEvent: (event) => seen.push(event.event),
  });
  console.log('outcome', outcome.kind, outcome.exitCode, seen.filter((e) => e === 'done').length);
  const report = await readReport('out/shots');
  console.log('report', report.tasks.length, report.run.state);
} finally {
  await sandbox.close();
}
`;

const MANIFEST = `version: 1
name: shots
tasks:
  - id: "shot-{{index}}"
    model: flat-image
    repeat: 3
    input: { prompt: "A studio photo, take {{index}}" }
`;

describe('the packed package', () => {
  it('imports as `mediabatch` with its types, plans and runs a manifest from a script', () => {
    execFileSync('npm', ['pack', '--pack-destination', dir, '--silent'], { cwd: root, stdio: 'pipe' });
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
    expect(tarball).toBeDefined();
    execFileSync('tar', ['xzf', join(dir, tarball as string), '-C', dir]);
    const app = join(dir, 'app');
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    renameSync(join(dir, 'package'), join(app, 'node_modules', 'mediabatch'));
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    for (const dep of Object.keys(pkg.dependencies)) {
      // Scoped packages (@aws-sdk/…) need their scope folder first.
      mkdirSync(dirname(join(app, 'node_modules', dep)), { recursive: true });
      symlinkSync(join(root, 'node_modules', dep), join(app, 'node_modules', dep), 'dir');
    }
    const packed = readdirSync(join(app, 'node_modules', 'mediabatch'));
    expect(packed).toEqual(expect.arrayContaining(['bin', 'dist', 'schemas', 'assets', 'package.json']));
    expect(readdirSync(join(app, 'node_modules', 'mediabatch', 'dist'))).toContain('index.d.ts');
    writeFileSync(join(app, 'shots.yaml'), MANIFEST);
    writeFileSync(join(app, 'script.mjs'), SCRIPT);
    const out = execFileSync('node', ['script.mjs'], { cwd: app, encoding: 'utf8', env: { ...process.env } });
    expect(out.trim().split('\n')).toEqual(['planned 3 0.6', 'outcome ran 0 3', 'report 3 finished']);
    const version = execFileSync(
      'node',
      [join(app, 'node_modules/mediabatch/bin/mediabatch.js'), '--version'],
      {
        encoding: 'utf8',
      },
    );
    expect(version.trim()).toBe('0.1.0');
  }, 180_000);
});
