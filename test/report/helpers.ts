// A real run for the report tests: the sandbox in-process on loopback, a manifest driven by the real CLI.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SandboxOptions } from '../../src/sandbox/options.js';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { type CliRun, cli } from '../helpers/cli.js';

export const KEY = 'sandbox-key';
export interface RealRun {
  tmp: string;
  /** The state file, relative to tmp (as a user types it). */
  state: string;
  runDir: string;
  sandbox: Sandbox;
  env: NodeJS.ProcessEnv;
  result: CliRun;
  /** The CLI in tmp with the sandbox's credentials. */
  mb(argv: string[], env?: NodeJS.ProcessEnv): Promise<CliRun>;
  close(): Promise<void>;
}

export async function realRun(opts: {
  manifest: (media: (name: string) => string) => string;
  runId: string;
  sandbox?: SandboxOptions;
}): Promise<RealRun> {
  const tmp = mkdtempSync(join(tmpdir(), 'mediabatch-report-'));
  const media = await serveFixtures();
  const sandbox = await startSandbox({ port: 0, speed: 0, apiKey: KEY, balance: 1000, ...opts.sandbox });
  writeFileSync(join(tmp, 'manifest.yaml'), opts.manifest(media.url));
  // Polls at the tests' pace (as run-env's): at the real one each job is first looked at after 2 s.
  const env = {
    MEDIABATCH_API_KEY: KEY,
    MEDIABATCH_BASE_URL: sandbox.baseUrl,
    MEDIABATCH_POLL_SCALE: '0.01',
  };
  const state = 'state/mediabatch.db';
  const mb = (argv: string[], extra: NodeJS.ProcessEnv = env) =>
    // The real clock, as the store's: the ledger's month and the report's month must be the same one.
    cli(['--state', state, ...argv], { env: extra, cwd: tmp, now: () => new Date() });
  const result = await mb(['run', 'manifest.yaml', '--yes']);
  return {
    tmp,
    state,
    runDir: join(tmp, 'out', opts.runId),
    sandbox,
    env,
    result,
    mb,
    close: async () => {
      await sandbox.close();
      await media.close();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

const FIXTURES = fileURLToPath(new URL('../fixtures/media/', import.meta.url));

/** test/fixtures/media over loopback HTTP, as a user's media host would serve it. */
async function serveFixtures(): Promise<{ url(name: string): string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const name = decodeURIComponent((req.url ?? '/').slice(1).split('?')[0] ?? '');
    if (!/^[\w.-]+$/.test(name)) return void res.writeHead(404).end();
    readFile(join(FIXTURES, name)).then(
      (bytes) => res.writeHead(200, { 'content-length': bytes.length }).end(bytes),
      () => res.writeHead(404).end('not found'),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (name) => `http://127.0.0.1:${port}/${name}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
