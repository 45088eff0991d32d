// --allow-outside-data on validate, plan and run; an environment dump linked in is never printed.
import { spawnSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliArgv } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { folder, lines } from './helpers.js';

const manifest = (data: string) => `version: 1
name: demo
tasks:
  - id: "line-{{index}}"
    model: speech-v3
    foreach: ${data}
    input: { text: "{{row.text}}" }
`;

describe('--allow-outside-data', () => {
  it.each([
    ['validate', 'project/m.yaml'],
    ['plan', 'project/m.yaml', '--no-probe'],
  ])('%s refuses a data file outside the manifest folder unless the flag is given', async (...args) => {
    const dir = await folder({
      'project/m.yaml': manifest('../shared/lines.csv'),
      'shared/lines.csv': 'text\nhello\n',
    });
    const refused = await cli(args, { cwd: dir });
    expect(refused.code).toBe(1);
    expect(lines(refused.stderr)[0]).toBe(
      `project/m.yaml:6:14  tasks.0.foreach: data file shared/lines.csv is outside the manifest's folder ${join(dir, 'project')}; move it there or pass --allow-outside-data`,
    );
    const allowed = await cli([...args, '--allow-outside-data'], { cwd: dir });
    expect({ code: allowed.code, stderr: allowed.stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('run takes the flag too (refused before anything is submitted without it)', async () => {
    const dir = await folder({
      'project/m.yaml': manifest('/etc/hostname.csv'),
    });
    const run = await cli(['run', 'project/m.yaml', '--sandbox', '--yes', '--no-probe'], { cwd: dir });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)[0]).toMatch(/tasks\.0\.foreach: data file \/etc\/hostname\.csv is outside/);
  });
});

describe.runIf(existsSync('/proc/self/environ'))('a data file linked to /proc/self/environ', () => {
  const sentinel = 'sentinel-3b9d0c71e5';

  it.each(['env.json', 'env.yaml', 'env.jsonl'])(
    '%s: refused, and even when allowed never printed',
    async (name) => {
      const dir = await folder({ 'm.yaml': manifest(`data/${name}`), 'data/.keep': '' });
      symlinkSync('/proc/self/environ', join(dir, 'data', name));
      for (const flags of [[], ['--allow-outside-data']]) {
        // The key first in the environment, so that any excerpt of the file's start would show it.
        const [node, ...args] = cliArgv(['validate', 'm.yaml', ...flags]);
        const child = spawnSync(node ?? process.execPath, args, {
          cwd: dir,
          env: { MEDIABATCH_API_KEY: sentinel, PATH: process.env.PATH ?? '', HOME: dir },
          encoding: 'utf8',
        });
        expect(child.status).toBe(1);
        expect(child.stderr).toContain('m.yaml');
        expect(`${child.stdout}${child.stderr}`).not.toContain(sentinel);
      }
    },
  );
});
