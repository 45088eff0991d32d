import { describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { folder, lines } from './helpers.js';

describe('usage mistakes', () => {
  it.each([
    [['frobnicate'], "error: unknown command 'frobnicate'"],
    [['plan', '--frob', 'manifests/demo.yaml'], "error: unknown option '--frob'"],
    [['validate', '--jsn', 'manifests/demo.yaml'], "error: unknown option '--jsn'"],
    [['plan'], "error: missing required argument 'manifest'"],
    [['validate'], "error: missing required argument 'manifest'"],
    [['plan', 'a.yaml', 'b.yaml'], "error: too many arguments for 'plan'. Expected 1 argument but got 2."],
  ])('%j exits 1 saying what is wrong', async (argv, first) => {
    const r = await cli(argv);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(lines(r.stderr)[0]).toContain(first);
  });

  it.each([
    ['plan', ['mediabatch: nowhere/missing.yaml: no such file; check the path of the manifest']],
    [
      'validate',
      [
        'nowhere/missing.yaml: no such file; check the path of the manifest',
        'mediabatch: 1 problem in nowhere/missing.yaml; fix it and run again',
      ],
    ],
  ])('%s names a manifest that does not exist', async (command, expected) => {
    const cwd = await folder({});
    const r = await cli([command, 'nowhere/missing.yaml'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(lines(r.stderr)).toEqual(expected);
  });

  it('plan names a folder given instead of a manifest', async () => {
    const cwd = await folder({ 'sub/keep.txt': '' });
    const r = await cli(['plan', 'sub'], { cwd });
    expect(r.code).toBe(1);
    expect(lines(r.stderr)).toEqual([
      'mediabatch: sub is a folder; give the path of a manifest file (.yaml)',
    ]);
  });

  it("--help gives --state's default once, MEDIABATCH_STATE_URL first", async () => {
    const r = await cli(['--help']);
    const state = r.stdout
      .slice(r.stdout.indexOf('--state'), r.stdout.indexOf('--base-url'))
      .replace(/\s+/g, ' ');
    expect(state).toBe(
      '--state <file> state database: a SQLite file, or postgres://… (default: MEDIABATCH_STATE_URL, else state/mediabatch.db) ',
    );
  });

  it('plan --help lists every option', async () => {
    const r = await cli(['plan', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('--json');
    expect(r.stdout).toContain('--no-probe');
  });
});
