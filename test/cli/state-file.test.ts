// A broken state file through the real CLI process: exit 1, exactly one line on stderr, no stack.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS, openStore } from '../../src/store/index.js';
import { cliArgv, spawnCli } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { folder, lines } from './helpers.js';

const MANIFEST = `version: 1
name: demo
tasks:
  - id: hero
    model: flat-image
    input: { prompt: a mug }
`;

const ENV = { MEDIABATCH_API_KEY: 'test-key-123456', MEDIABATCH_BASE_URL: 'http://127.0.0.1:9' };

/**
 * `mediabatch <args>` in `cwd`; nothing listens at the base URL, and the store is opened first. The first
 * case of each table runs as a real process (what it prints is all a user sees: no stack, no second line);
 * the rest run the same CLI in-process, where the line and the code come from, a second or two sooner each.
 */
async function mediabatch(cwd: string, args: string[], how: 'process' | 'in-process') {
  if (how === 'in-process') {
    const { code, stderr } = await cli(args, { cwd, env: ENV, now: () => new Date() });
    return { code, stderr };
  }
  const child = spawnCli(args, { cwd, env: ENV });
  const code = await child.exited;
  return { code, stderr: child.stderr() };
}

/** A state file made by this mediabatch, closed. */
function realState(file: string): Buffer {
  openStore(file).close();
  return readFileSync(file);
}

const corrupt = (shown: string) =>
  `mediabatch: state file ${shown} is not a mediabatch database or is damaged: restore a backup or move it away`;

describe('a broken state file ends in one line and exit 1', () => {
  it.each<[string, (dir: string) => void, string]>([
    [
      'garbage',
      (dir) => writeFileSync(join(dir, 'state/x.db'), 'not a database, just text long enough for a header\n'),
      corrupt('state/x.db'),
    ],
    [
      'truncated',
      (dir) => {
        const bytes = realState(join(dir, 'state/real.db'));
        writeFileSync(join(dir, 'state/x.db'), bytes.subarray(0, bytes.length >> 1));
      },
      corrupt('state/x.db'),
    ],
    [
      'damaged pages',
      (dir) => {
        const bytes = Buffer.from(realState(join(dir, 'state/real.db')));
        bytes.fill(0x5a, 4096, 3 * 4096);
        writeFileSync(join(dir, 'state/x.db'), bytes);
      },
      corrupt('state/x.db'),
    ],
    [
      "another program's database",
      (dir) => {
        const db = new Database(join(dir, 'state/x.db'));
        db.exec('CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)');
        db.close();
      },
      corrupt('state/x.db'),
    ],
    [
      'written by a newer mediabatch',
      (dir) => {
        const file = join(dir, 'state/x.db');
        realState(file);
        const db = new Database(file);
        db.prepare('INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)').run(
          MIGRATIONS.length + 3,
          'from the future',
          '2030-01-01T00:00:00.000Z',
        );
        db.close();
      },
      `mediabatch: state file state/x.db was written by a newer mediabatch (schema ${MIGRATIONS.length + 3}, this one knows ${MIGRATIONS.length}): upgrade mediabatch`,
    ],
  ])('status --state on a %s file', async (name, make, expected) => {
    const dir = await folder({});
    mkdirSync(join(dir, 'state'));
    make(dir);
    const how = name === 'garbage' ? 'process' : 'in-process';
    const { code, stderr } = await mediabatch(dir, ['--state', 'state/x.db', 'status'], how);
    expect({ code, stderr: lines(stderr) }).toEqual({ code: 1, stderr: [expected] });
  });

  it.each<[string, string, (dir: string) => void, string]>([
    [
      'a path through a file',
      'state.db/x.db',
      (dir) => writeFileSync(join(dir, 'state.db'), ''),
      'mediabatch: state file state.db/x.db cannot be created: part of its folder path is a file, not a folder; check --state',
    ],
    [
      'a folder',
      'state',
      (dir) => mkdirSync(join(dir, 'state')),
      'mediabatch: state file state is a folder: give the path of a file with --state',
    ],
    [
      'a full disk',
      '/dev/full',
      () => {},
      'mediabatch: state file /dev/full cannot be written: the disk is full; free some space and run again',
    ],
  ])('run --state on %s', async (name, state, make, expected) => {
    const dir = await folder({ 'm.yaml': MANIFEST });
    make(dir);
    const how = name === 'a full disk' ? 'process' : 'in-process';
    const { code, stderr } = await mediabatch(
      dir,
      ['--state', state, 'run', 'm.yaml', '--yes', '--no-probe'],
      how,
    );
    // A full disk is resumable once there is room (exit 4); the other problems need the user's fix (exit 1).
    expect({ code, stderr: lines(stderr) }).toEqual({
      code: state === '/dev/full' ? 4 : 1,
      stderr: [expected],
    });
  });

  // Root may write anywhere, so the unwritable folder is tried as an ordinary user.
  it.runIf(process.getuid?.() === 0 && canRunAsNobody())(
    'run --state in a folder it cannot write (as an ordinary user)',
    async () => {
      const dir = await folder({ 'm.yaml': MANIFEST });
      chmodSync(dir, 0o755);
      mkdirSync(join(dir, 'locked'), { mode: 0o555 });
      const [node, ...args] = cliArgv(['--state', 'locked/x.db', 'run', 'm.yaml', '--yes', '--no-probe']);
      let code = 0;
      let stderr = '';
      try {
        execFileSync(node ?? process.execPath, args, {
          cwd: dir,
          uid: 65534,
          gid: 65534,
          env: {
            PATH: process.env.PATH ?? '',
            HOME: dir,
            MEDIABATCH_API_KEY: 'test-key-123456',
            MEDIABATCH_BASE_URL: 'http://127.0.0.1:9',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
      } catch (error) {
        code = (error as { status: number }).status;
        stderr = String((error as { stderr: Buffer }).stderr);
      }
      expect({ code, stderr: lines(stderr) }).toEqual({
        code: 1,
        stderr: [
          'mediabatch: state file locked/x.db cannot be written (permission denied): fix the permissions of the file and its folder, or choose another --state',
        ],
      });
    },
  );
});

function canRunAsNobody(): boolean {
  try {
    execFileSync(process.execPath, ['-e', ''], { uid: 65534, gid: 65534, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
