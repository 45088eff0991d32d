// `mediabatch sandbox`: flags in, base URL as the first line of stdout, a clean stop on a signal.
import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { gathered, parseSandboxFlags, sandboxCommand } from '../../src/sandbox/cli.js';
import { SANDBOX_DEFAULTS, SANDBOX_FLAGS } from '../../src/sandbox/options.js';
import { QUIRKS } from '../../src/sandbox/quirks.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { clientFor, closeAll } from './helpers.js';

afterEach(closeAll);

describe('parseSandboxFlags', () => {
  it('turns commander strings into options', () => {
    expect(
      parseSandboxFlags({
        port: '0',
        balance: '12.5',
        quota: '500',
        speed: '0',
        latency: '20',
        linkTtl: '60',
        seed: '9',
      }),
    ).toEqual({
      ok: true,
      options: { port: 0, balance: 12.5, quota: 500, speed: 0, latencyMs: 20, linkTtlSeconds: 60, seed: 9 },
    });
  });

  it.each([
    [{ port: '70000' }, '--port: must be a whole number from 0 to 65535, got 70000'],
    [{ failRate: '1.5' }, '--fail-rate: must be a number from 0 to 1, got 1.5'],
    [{ latency: 'soon' }, '--latency: must be a number, got "soon"'],
    [{ seed: '1.5' }, '--seed: must be a whole number, got 1.5'],
    [{ apiKey: ' ' }, '--api-key: must not be empty'],
    [{ linkTtl: '-1' }, '--link-ttl: must be a number >= 0, got -1'],
    [{ accountConcurrency: '0' }, '--account-concurrency: must be a whole number >= 1 or null, got 0'],
    [
      { quirks: 'gzip,slow' },
      `--quirks: unknown quirk "slow"; known quirks are: ${QUIRKS.join(', ')}, or all`,
    ],
  ])('refuses %o', (flags, message) => {
    expect(parseSandboxFlags(flags)).toEqual({ ok: false, issues: [message] });
  });

  it('reads --quirks as a list or all, and --account-concurrency as a whole number', () => {
    expect(parseSandboxFlags({ quirks: ' gzip, bom ', accountConcurrency: '2' })).toEqual({
      ok: true,
      options: { quirks: ['gzip', 'bom'], accountConcurrency: 2 },
    });
    expect(parseSandboxFlags({ quirks: 'all' })).toEqual({ ok: true, options: { quirks: QUIRKS } });
  });

  it('describes every flag, each with a default the CLI can show', () => {
    for (const { option } of SANDBOX_FLAGS) expect(option in SANDBOX_DEFAULTS).toBe(true);
  });
});

describe('sandboxCommand', () => {
  it('prints the base URL first, serves, and stops on SIGTERM', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const signals = new EventEmitter();
    let ready: Sandbox | undefined;
    const running = sandboxCommand(
      { port: '0', balance: '5', quirks: 'waiting,request-id' },
      {
        stdout: { write: (t: string) => out.push(t) },
        stderr: { write: (t: string) => err.push(t) },
        signals,
        onReady: (s) => {
          ready = s;
        },
      },
    );
    await expect.poll(() => ready, { timeout: 5000 }).toBeDefined();
    expect(out[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\n$/);
    const api = clientFor(out[0]?.trim() ?? '');
    const tokens = (await api.get('/api/v1/user/tokens')).body;
    expect(tokens.data).toEqual({ count: 5 });
    expect(tokens.request_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(err.join('')).toMatch(/GET \/api\/v1\/user\/tokens 200/);
    expect(err.join('')).not.toMatch(/Bearer/);
    expect(err.join('')).toContain('quirks waiting,request-id');
    signals.emit('SIGTERM');
    await running;
    expect(err.at(-1)).toBe('sandbox: stopped\n');
    await expect(api.get('/api/v1/user/tokens')).rejects.toThrow();
  });

  it('writes a line for every request, in the order answered, all before it says it stopped', async () => {
    const err: string[] = [];
    const signals = new EventEmitter();
    let ready: Sandbox | undefined;
    const running = sandboxCommand(
      { port: '0', speed: '0', seed: '3' },
      {
        stdout: { write: () => true },
        stderr: { write: (t: string) => err.push(t) },
        signals,
        onReady: (s) => {
          ready = s;
        },
      },
    );
    await expect.poll(() => ready, { timeout: 5000 }).toBeDefined();
    const api = clientFor(ready?.baseUrl ?? '');
    const polls = Array.from({ length: 40 }, (_, i) => api.poll(`job-${i}`));
    const answers = await Promise.all([...polls, api.get('/api/v1/user/tokens', null)]);
    expect(answers.map((a) => a.status)).toEqual([...Array(40).fill(404), 401]);
    signals.emit('SIGTERM');
    await running;
    const lines = err.join('').split('\n').slice(1, -1);
    expect(lines.at(-1)).toBe('sandbox: stopped');
    const requests = lines.slice(0, -1);
    expect(requests).toHaveLength(41);
    expect(requests.filter((l) => /^GET \/api\/v1\/jobs\/detail 404 \d+ ms$/.test(l))).toHaveLength(40);
    expect(requests.filter((l) => /^GET \/api\/v1\/user\/tokens 401 \d+ ms$/.test(l))).toHaveLength(1);
  });

  it('gathers the lines of one turn of the event loop into one write, in order', async () => {
    const writes: string[] = [];
    const lines = gathered({ write: (t: string) => writes.push(t) });
    lines.add('GET /a 200 1 ms');
    lines.add('GET /b 404 0 ms');
    expect(writes).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual(['GET /a 200 1 ms\nGET /b 404 0 ms\n']);
    lines.add('GET /c 200 2 ms');
    lines.flush();
    lines.flush();
    expect(writes).toEqual(['GET /a 200 1 ms\nGET /b 404 0 ms\n', 'GET /c 200 2 ms\n']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toHaveLength(2);
  });

  it('refuses invalid flags before listening', async () => {
    await expect(sandboxCommand({ errorRate: '2' })).rejects.toThrow(
      /--error-rate: must be a number from 0 to 1, got 2/,
    );
  });
});
