// Every error class extends MediabatchError and carries its exit code; the CLI maps them in one place
// (exitOf), and each one ends a command with the code docs/troubleshooting.md gives it. A new error class
// fails here until it is given its code and, when that is not 70, a row in the page.
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { globSync } from 'tinyglobby';
import { describe, expect, it } from 'vitest';
import { ObjectPutError } from '../../src/api/download.js';
import { DiskError, DownloadFailure } from '../../src/api/download-core.js';
import { ApiSettingsError } from '../../src/api/errors.js';
import { ResponseTooLargeError } from '../../src/api/exchange.js';
import { ThrottleAbortedError } from '../../src/api/throttle.js';
import { ExitError, exitOf } from '../../src/cli/errors.js';
import { ConfigError } from '../../src/config-error.js';
import type { MediabatchError } from '../../src/errors.js';
import { EXIT } from '../../src/exit-codes.js';
import { FileRefused } from '../../src/manifest/files.js';
import { LocalInputError } from '../../src/media/local-input.js';
import { ProbeFailure } from '../../src/media/source.js';
import { ManifestFileError, ManifestProblemsError } from '../../src/plan/build.js';
import { UnknownRunError } from '../../src/report/build.js';
import { MergeError } from '../../src/report/merge.js';
import { OutputError } from '../../src/results/output.js';
import { ReviewError } from '../../src/review/index.js';
import { RunFolderTakenError } from '../../src/run/marker.js';
import { ShardRunError } from '../../src/run/resume.js';
import { NoStorageError } from '../../src/run/runner/uploads.js';
import { RunError } from '../../src/run/session.js';
import { SandboxOptionsError } from '../../src/sandbox/options.js';
import { StorageError } from '../../src/storage/client.js';
import { StoreError } from '../../src/store/errors.js';
import { PgError } from '../../src/store/pg/db.js';
import { OverBudgetError } from '../../src/store/reservations.js';
import { UnsafePathError } from '../../src/util/fsatomic.js';
import { QueryError } from '../../src/view/schemas.js';
import { ViewError } from '../../src/view/server.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CWD = '/work/project';

/** Each class with one instance per code it can carry, and that code. */
const CASES: Array<[string, MediabatchError, number]> = [
  [
    'ManifestProblemsError',
    new ManifestProblemsError('m.yaml', [
      { pos: { file: 'm.yaml', line: 3, col: 1 }, path: 'x', message: 'y' },
    ]),
    EXIT.invalid,
  ],
  ['ManifestFileError', new ManifestFileError('m.yaml: no such file'), EXIT.invalid],
  ['ConfigError', new ConfigError('bad config', ['mediabatch.config.yaml:1:1  x: y']), EXIT.invalid],
  ['ApiSettingsError', new ApiSettingsError('bad base URL'), EXIT.invalid],
  ['OutputError', new OutputError('bad output'), EXIT.invalid],
  ['RunFolderTakenError', new RunFolderTakenError('out/r is taken'), EXIT.invalid],
  ['ShardRunError', new ShardRunError('other shard count'), EXIT.invalid],
  ['UnknownRunError', new UnknownRunError('r'), EXIT.invalid],
  ['ReviewError', new ReviewError('run r: not found'), EXIT.invalid],
  ['MergeError', new MergeError('no shard reports to merge'), EXIT.invalid],
  ['LocalInputError', new LocalInputError('file:x.png: no such file'), EXIT.invalid],
  ['NoStorageError', new NoStorageError('no bucket'), EXIT.invalid],
  ['ViewError', new ViewError('state file x: not found'), EXIT.invalid],
  ['SandboxOptionsError', new SandboxOptionsError('sandbox: --speed must be >= 0'), EXIT.invalid],
  // A statement of the PostgreSQL state that failed where the store did not expect it: a bug.
  ['PgError', new PgError('relation "tasks" does not exist', '42P01', undefined), EXIT.internal],
  ['StorageError', new StorageError('no such bucket', EXIT.invalid), EXIT.invalid],
  ['StorageError', new StorageError('refused', EXIT.unauthorized), EXIT.unauthorized],
  ['StoreError', new StoreError('damaged', { kind: 'corrupt', file: `${CWD}/s.db` }), EXIT.invalid],
  ['StoreError', new StoreError('newer', { kind: 'newer', file: `${CWD}/s.db` }), EXIT.invalid],
  ['StoreError', new StoreError('path', { kind: 'path', file: `${CWD}/s.db` }), EXIT.invalid],
  ['StoreError', new StoreError('read-only', { kind: 'permission', file: `${CWD}/s.db` }), EXIT.invalid],
  ['StoreError', new StoreError('locked', { kind: 'busy', file: `${CWD}/s.db` }), EXIT.invalid],
  ['StoreError', new StoreError('full', { kind: 'full', file: `${CWD}/s.db` }), EXIT.interrupted],
  // A PostgreSQL server short of connections, memory or a configured limit: run again later.
  ['StoreError', new StoreError('no slot', { kind: 'server', file: 'postgres://h/db' }), EXIT.interrupted],
  ['StoreError', new StoreError('no such task'), EXIT.internal],
  ['StoreError', new StoreError('older', { kind: 'older', file: `${CWD}/s.db` }), EXIT.internal],
  ['RunError', new RunError('invalid', 'bad'), EXIT.invalid],
  ['RunError', new RunError('refused', 'over budget'), EXIT.refused],
  ['RunError', new RunError('busy', 'held by pid 1'), EXIT.interrupted],
  ['RunError', new RunError('interrupted', 'interrupted while opening run r'), EXIT.interrupted],
  ['RunError', new RunError('unauthorized', 'key refused'), EXIT.unauthorized],
  ['ExitError', new ExitError(EXIT.someFailed, 'some failed'), EXIT.someFailed],
  // Caught below the CLI and turned into outcomes: reaching it would be a bug.
  ['FileRefused', new FileRefused('rows.csv', { kind: 'too-big', size: 1 }), EXIT.internal],
  ['UnsafePathError', new UnsafePathError('out/x', 'a link'), EXIT.internal],
  ['OverBudgetError', new OverBudgetError('t1 may cost up to 0.2 tokens', 0, 200_000), EXIT.internal],
  [
    'DownloadFailure',
    new DownloadFailure({ ok: false, type: 'network', message: 'reset', retrySafe: true }),
    EXIT.internal,
  ],
  ['DiskError', new DiskError(new Error('ENOSPC')), EXIT.internal],
  ['ThrottleAbortedError', new ThrottleAbortedError(), EXIT.internal],
  ['ObjectPutError', new ObjectPutError('put failed', true), EXIT.internal],
  ['ResponseTooLargeError', new ResponseTooLargeError(1024), EXIT.internal],
  ['ProbeFailure', new ProbeFailure('cannot measure'), EXIT.internal],
  ['QueryError', new QueryError('bad cursor'), EXIT.internal],
];

/** `class X extends Y` in every source file: name, parent, exported or not, file. */
function classesInSource(): Array<{ name: string; parent: string; exported: boolean; file: string }> {
  const found: Array<{ name: string; parent: string; exported: boolean; file: string }> = [];
  for (const file of globSync('src/**/*.ts', { cwd: ROOT, absolute: true })) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^(export )?(?:abstract )?class (\w+) extends (\w+)/gm)) {
      found.push({ name: m[2] as string, parent: m[3] as string, exported: m[1] !== undefined, file });
    }
  }
  return found;
}

/** The codes docs/troubleshooting.md gives each error class, from its "which error" table. */
function documentedCodes(): Map<string, number[]> {
  const text = readFileSync(join(ROOT, 'docs', 'troubleshooting.md'), 'utf8');
  const section = text.slice(text.indexOf('## Which error ends with which code'));
  const codes = new Map<string, number[]>();
  for (const m of section.matchAll(/^\| `(\w+)` \| ([^|]+) \|/gm)) {
    codes.set(
      m[1] as string,
      [...(m[2] as string).matchAll(/\d+/g)].map((d) => Number(d[0])),
    );
  }
  return codes;
}

describe('errors: one base, one mapping', () => {
  it('every error class of the source extends MediabatchError (directly or through another of ours)', () => {
    const classes = classesInSource();
    const ours = new Set(['MediabatchError']);
    // Parents first: walk until no class joins.
    for (let grew = true; grew; ) {
      grew = false;
      for (const c of classes) {
        if (ours.has(c.parent) && !ours.has(c.name)) {
          ours.add(c.name);
          grew = true;
        }
      }
    }
    const outside = classes
      .filter((c) => /Error$|Failure$|Refused$|^Stop$/.test(c.name) || /Error$/.test(c.parent))
      .filter((c) => !ours.has(c.name) && c.name !== 'MediabatchError')
      .map((c) => `${relative(ROOT, c.file)}: ${c.name} extends ${c.parent}`);
    expect(outside).toEqual([]);
    // Every exported one is in the table above; the others are private to their module.
    const tested = new Set(CASES.map(([name]) => name));
    const exported = classes.filter((c) => c.exported && ours.has(c.name) && c.name !== 'MediabatchError');
    expect(exported.map((c) => c.name).filter((name) => !tested.has(name))).toEqual([]);
  });

  it.each(CASES)(
    '%s maps to its code, and that code is the one troubleshooting.md gives it',
    (name, error, code) => {
      expect(error.exitCode).toBe(code);
      const exit = exitOf(error, CWD);
      if (code === EXIT.internal) {
        expect(exit).toBeUndefined();
      } else {
        expect(exit?.exitCode).toBe(code);
        expect(exit?.details).toEqual(error.details);
      }
      const documented = documentedCodes().get(name);
      if (name === 'ExitError') return; // the CLI's own, with whichever code it decides
      if (documented === undefined) expect(code).toBe(EXIT.internal);
      else expect(documented).toContain(code);
    },
  );

  it('gives every class the page lists a test above, and every code of the page a name in EXIT', () => {
    const tested = new Set(CASES.map(([name]) => name));
    const documented = documentedCodes();
    expect([...documented.keys()].filter((name) => !tested.has(name))).toEqual([]);
    const named = new Set<number>(Object.values(EXIT));
    expect([...documented.values()].flat().filter((code) => !named.has(code))).toEqual([]);
    expect(EXIT.internal).toBe(70);
  });

  it('names a state file as the user gave it, relative to the working folder', () => {
    const error = new StoreError(`state file ${CWD}/state/m.db is locked by another process`, {
      kind: 'busy',
      file: `${CWD}/state/m.db`,
    });
    expect(exitOf(error, CWD)?.message).toBe('state file state/m.db is locked by another process');
    expect(exitOf(error, '/elsewhere')?.message).toBe(error.message);
  });

  it('is not fooled by an error that only looks like ours', () => {
    expect(exitOf(Object.assign(new Error('x'), { exitCode: 1 }), CWD)).toBeUndefined();
    expect(exitOf('a string', CWD)).toBeUndefined();
  });
});
