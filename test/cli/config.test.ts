// mediabatch.config.yaml problems are located like manifest problems and end in exit 1.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { folder, lines } from './helpers.js';

const MANIFEST = `version: 1
name: demo
tasks:
  - id: hero
    model: flat-image
    input: { prompt: a mug }
`;
const KNOWN = 'known keys are: base_url, quota, prices, storage';

async function planWith(config: string | undefined, args: string[] = []) {
  const dir = await folder({
    'm.yaml': MANIFEST,
    ...(config === undefined ? {} : { 'mediabatch.config.yaml': config }),
  });
  const run = await cli([...args, 'plan', 'm.yaml', '--no-probe'], { cwd: dir });
  return { code: run.code, stderr: lines(run.stderr), dir };
}

describe('config file problems', () => {
  it.each<[string, string, string[]]>([
    [
      'a misspelt key, with the known keys',
      'quota: 5000\n# prices come later\nbase_ur1: https://api.example.com\n',
      [`mediabatch.config.yaml:3:1  base_ur1: unknown key; ${KNOWN}`],
    ],
    [
      'every problem at once, in file order',
      'quota: lots\nprice: {}\nbase_url: ftp://example.com\n',
      [
        'mediabatch.config.yaml:1:8  quota: must be a number, got "lots"',
        `mediabatch.config.yaml:2:1  price: unknown key; ${KNOWN}`,
        'mediabatch.config.yaml:3:11  base_url: must be an http or https URL such as https://api.example.com, got "ftp://example.com"',
      ],
    ],
    [
      'a price for an unknown model',
      'prices:\n  flat-imag: { perImage: 1 }\n',
      [
        expect.stringMatching(
          /^mediabatch\.config\.yaml:2:3 {2}prices\.flat-imag: unknown model; known models are: /,
        ),
      ],
    ],
    [
      'YAML that does not parse',
      'quota: [1, 2\n',
      [expect.stringMatching(/^mediabatch\.config\.yaml:\d+:\d+ {2}invalid YAML: /)],
    ],
    [
      'a list instead of a mapping',
      '- quota\n',
      [expect.stringMatching(/^mediabatch\.config\.yaml:1:1 {2}must be a mapping/)],
    ],
  ])('%s', async (_name, config, expected) => {
    const { code, stderr } = await planWith(config);
    expect(code).toBe(1);
    expect(stderr).toEqual([
      ...expected,
      'mediabatch: mediabatch.config.yaml: invalid config; fix the fields above',
    ]);
  });

  it('is optional, but a --config that is missing or not a regular file is refused in one line', async () => {
    expect((await planWith(undefined)).code).toBe(0);
    const missing = await planWith(undefined, ['--config', 'nope.yaml']);
    expect(missing).toMatchObject({
      code: 1,
      stderr: ['mediabatch: nope.yaml: cannot read the config file (no such file); check --config'],
    });
    const dir = await folder({ 'm.yaml': MANIFEST });
    execFileSync('mkfifo', [join(dir, 'pipe.yaml')]);
    const fifo = await cli(['--config', 'pipe.yaml', 'plan', 'm.yaml', '--no-probe'], { cwd: dir });
    expect({ code: fifo.code, stderr: lines(fifo.stderr) }).toEqual({
      code: 1,
      stderr: [
        'mediabatch: pipe.yaml: cannot read the config file (it is a named pipe (FIFO), not a regular file); check --config',
      ],
    });
  });
});
