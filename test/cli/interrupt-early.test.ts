// Ctrl-C (or SIGTERM) before `run` takes the signal itself — while it measures the manifest's media for
// the plan, while its preflight asks the service for the balance — and in a command that never takes it
// (`plan`): the interrupted code and one line, never a death by the signal (a shell's 130 and no word).
// Real processes, real signals; a loopback server that holds every request until told, so each signal
// lands in the phase named.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { shellLine } from '../../src/util/shell.js';
import { cliArgv, spawnCli } from '../helpers/child.js';

/** Holds every request (seen, never answered) while `holding`; then forwards to `upstream`, if any. */
async function holdingServer(upstream?: string) {
  const seen: string[] = [];
  const held: ServerResponse[] = [];
  const state = { holding: true };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${(req.url ?? '/').split('?')[0]}`);
    if (state.holding || upstream === undefined) {
      held.push(res);
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const answer = await request(`${upstream}${req.url ?? '/'}`, {
      method: (req.method ?? 'GET') as 'GET',
      headers: { authorization: req.headers.authorization ?? '', 'content-type': 'application/json' },
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
    });
    const body = Buffer.from(await answer.body.arrayBuffer());
    res.writeHead(answer.statusCode, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    state,
    /** Resolves once a request whose line starts with `prefix` came in. */
    async asked(prefix: string): Promise<void> {
      for (let i = 0; i < 600 && !seen.some((s) => s.startsWith(prefix)); i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      if (!seen.some((s) => s.startsWith(prefix)))
        throw new Error(`never asked ${prefix}: ${seen.join(', ')}`);
    },
    close: async () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

type Holding = Awaited<ReturnType<typeof holdingServer>>;

let dir: string | undefined;
let servers: Holding[] = [];
let sandbox: Sandbox | undefined;
afterEach(async () => {
  for (const s of servers) await s.close();
  servers = [];
  await sandbox?.close();
  sandbox = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

async function folderWith(tasks: unknown[]): Promise<string> {
  dir = await mkdtemp(join(tmpdir(), 'mb-early-'));
  await writeFile(join(dir, 'batch.yaml'), stringify({ version: 1, name: 'batch', output: 'out', tasks }));
  return dir;
}

/** The manifest's last stderr line, without the program's name. */
function lastLine(stderr: string): string {
  const lines = stderr.trim().split('\n');
  return lines[lines.length - 1] ?? '';
}

describe('an interrupt before a command takes it', () => {
  it('run, while the plan measures a media input: exit 4, one line, nothing submitted', async () => {
    const media = await holdingServer();
    servers.push(media);
    const cwd = await folderWith([
      {
        id: 'avatar',
        model: 'ai-talking-avatar-video',
        input: {
          video_url: `${media.url}/talking-head.mp4`,
          audio_url: `${media.url}/voice.mp3`,
          video_mode: 'loop',
        },
      },
    ]);
    const child = spawnCli(['run', 'batch.yaml', '--yes', '--state', 'state.db'], {
      cwd,
      env: { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: media.url },
    });
    await media.asked('GET /');
    child.proc.kill('SIGINT');
    expect(await child.exited).toBe(4);
    expect(lastLine(child.stderr())).toBe(
      'mediabatch: interrupted (SIGINT): nothing was submitted; run the same command again',
    );
    expect(media.seen.some((s) => s.startsWith('POST'))).toBe(false);
  });

  it('run, while the preflight asks for the balance (SIGTERM): exit 4, one line; the same command then runs it', async () => {
    sandbox = await startSandbox({ port: 0, speed: 0, seed: 5, apiKey: 'sandbox-key' });
    const api = await holdingServer(sandbox.baseUrl);
    servers.push(api);
    const cwd = await folderWith([{ id: 'still', model: 'flat-image', input: { prompt: 'a mug' } }]);
    const env = {
      MEDIABATCH_API_KEY: 'sandbox-key',
      MEDIABATCH_BASE_URL: api.url,
      MEDIABATCH_POLL_SCALE: '0.01',
    };
    const first = spawnCli(['run', 'batch.yaml', '--yes', '--state', 'state.db'], { cwd, env });
    await api.asked('GET /api/');
    first.proc.kill('SIGTERM');
    expect(await first.exited).toBe(4);
    expect(lastLine(first.stderr())).toBe(
      'mediabatch: interrupted (SIGTERM): nothing was submitted; run the same command again',
    );
    expect(sandbox.state().jobs).toHaveLength(0);

    api.state.holding = false;
    const again = spawnCli(['run', 'batch.yaml', '--yes', '--state', 'state.db'], { cwd, env });
    expect(await again.exited).toBe(0);
    expect(again.stderr()).toBe('');
    expect(sandbox.state().jobs).toHaveLength(1);
  });

  it('run, at its question on a terminal: Ctrl-C is "not confirmed", exit 3, nothing submitted', async () => {
    sandbox = await startSandbox({ port: 0, speed: 0, seed: 5, apiKey: 'sandbox-key' });
    const cwd = await folderWith([{ id: 'still', model: 'flat-image', input: { prompt: 'a mug' } }]);
    // A terminal of its own (util-linux's script): the question is asked only of a person at one.
    const line = shellLine(cliArgv(['run', 'batch.yaml', '--state', 'state.db']));
    const child = spawn('script', ['-qfec', line, '/dev/null'], {
      cwd,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        MEDIABATCH_API_KEY: 'sandbox-key',
        MEDIABATCH_BASE_URL: sandbox.baseUrl,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const asked = new Promise<void>((resolve) =>
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
        if (out.includes('[y/N]')) resolve();
      }),
    );
    await asked;
    child.stdin.write('\x03');
    expect(await exited).toBe(3);
    expect(out).toContain('mediabatch: not confirmed (Ctrl-C); nothing was submitted');
    expect(sandbox.state().jobs).toHaveLength(0);
  });

  it('plan, which never takes the signal, while it measures a media input: exit 4 and one line', async () => {
    const media = await holdingServer();
    servers.push(media);
    const cwd = await folderWith([
      {
        id: 'avatar',
        model: 'ai-talking-avatar-video',
        input: {
          video_url: `${media.url}/head.mp4`,
          audio_url: `${media.url}/voice.mp3`,
          video_mode: 'loop',
        },
      },
    ]);
    const child = spawnCli(['plan', 'batch.yaml', '--state', 'state.db'], { cwd, env: {} });
    await media.asked('GET /');
    child.proc.kill('SIGINT');
    expect(await child.exited).toBe(4);
    expect(lastLine(child.stderr())).toBe(
      'mediabatch: interrupted (SIGINT): what was done is recorded; run the same command again',
    );
  });
});
