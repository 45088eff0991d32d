// The CLI as a user runs it: a child process with only the environment it is given (no AWS variables
// leak in from the test's process, HOME is an empty folder, so no ~/.aws either).
//
// The AWS SDK's NodeVersionSupportWarning (nine lines on stderr on Node < 22) is not shown by our CLI: it
// sets the SDK's own switch, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED, before any S3 client is
// built. Only that warning: another one still reaches stderr, and a user who sets the switch to `false`
// gets the SDK's warning back. The CLI runs as a real child process (a warning is printed by Node itself,
// which an in-process run would not show), with storage credentials that s3rver refuses: an S3 client is
// built, nothing is charged, and stderr holds exactly the one line that says why.
import { spawn } from 'node:child_process';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SDK_NODE_WARNING_ENV } from '../../src/storage/sdk-warning.js';
import { cliArgv } from '../helpers/child.js';
import { startS3, type TestS3 } from '../helpers/s3.js';

let s3: TestS3;
let dir: string;
beforeAll(async () => {
  s3 = await startS3();
  dir = await mkdtemp(join(tmpdir(), 'mb-sdk-warning-'));
  await copyFile('manifests/local/full-body.png', join(dir, 'face.png'));
  await writeFile(
    join(dir, 'w.yaml'),
    'version: 1\nname: w\ntasks:\n  - id: swap\n    model: video-face-swap\n    input: { reference_video: "https://example.org/v.mp4", reference_img: "file:face.png", start_time: 0, end_time: 2 }\n',
  );
});
afterAll(async () => {
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

/** `mediabatch run w.yaml` in a child process, `preload` imported first; resolves with its exit code and stderr. */
function runChild(
  extraEnv: Record<string, string | undefined>,
  preload?: string,
): Promise<{ code: number | null; stderr: string }> {
  const [node, ...args] = cliArgv(['run', 'w.yaml', '--sandbox', '--yes', '--state', 'w.db']);
  return new Promise((resolve) => {
    const proc = spawn(node ?? process.execPath, preload ? ['--import', preload, ...args] : args, {
      cwd: dir,
      // Not the test process's environment: whatever vitest sets must not decide the outcome.
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: dir,
        MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
        MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
        AWS_ACCESS_KEY_ID: 'WRONGKEY',
        AWS_SECRET_ACCESS_KEY: 'wrong-secret-for-the-warning-test',
        ...extraEnv,
      } as Record<string, string>,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
    });
    proc.on('exit', (code) => resolve({ code, stderr }));
  });
}

const REFUSED =
  /^mediabatch: storage credentials refused by http:\/\/127\.0\.0\.1:\d+ for bucket mediabatch-test \(HTTP 403\); set AWS_ACCESS_KEY_ID\/AWS_SECRET_ACCESS_KEY or AWS_PROFILE$/m;
const oldNode = Number(process.versions.node.split('.')[0]) < 22;

describe("the AWS SDK's Node version warning", () => {
  it('is not printed by the CLI: stderr is the one line that says why the run stopped', async () => {
    const run = await runChild({});
    expect(run.code).toBe(5);
    expect(run.stderr).not.toContain('NodeVersionSupportWarning');
    expect(run.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(REFUSED)]);
  }, 20_000);

  it('other warnings still reach stderr', async () => {
    const other =
      'data:text/javascript,process.emitWarning("another warning, not the SDK%27s", "MediabatchTestWarning")';
    const run = await runChild({}, other);
    expect(run.code).toBe(5);
    expect(run.stderr).toContain("MediabatchTestWarning: another warning, not the SDK's");
    expect(run.stderr).not.toContain('NodeVersionSupportWarning');
  }, 20_000);

  // On Node 22 and later the SDK has nothing to warn about, so there is nothing to bring back.
  it.runIf(oldNode)(
    `comes back when the user sets ${SDK_NODE_WARNING_ENV}=false (so the run above did build a client)`,
    async () => {
      const run = await runChild({ [SDK_NODE_WARNING_ENV]: 'false' });
      expect(run.code).toBe(5);
      expect(run.stderr).toContain('NodeVersionSupportWarning: The AWS SDK for JavaScript (v3)');
      expect(run.stderr).toMatch(REFUSED);
    },
    20_000,
  );
});

describe('storage credentials nowhere to be found', () => {
  it('one line saying where to put them, exit 5, before anything is sent', async () => {
    const run = await runChild({ AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined });
    expect(run.code).toBe(5);
    expect(run.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(
        /^mediabatch: no storage credentials for bucket mediabatch-test at http:\/\/127\.0\.0\.1:\d+: set AWS_ACCESS_KEY_ID\/AWS_SECRET_ACCESS_KEY or AWS_PROFILE \(or ~\/\.aws\/credentials\)$/,
      ),
    ]);
  }, 20_000);
});
