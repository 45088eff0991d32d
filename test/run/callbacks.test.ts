// Callbacks end to end (docs/callbacks.md): the CLI in-process against the sandbox, which sends real status
// callbacks over loopback to the run's receiver. Where a test must know exactly which requests were
// made, the sandbox runs on a clock the test moves, and polling runs at its real pace (the fallback is a
// minute away), so every jobs/detail request the sandbox counts was caused by a callback.
import { writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CliRun } from '../helpers/cli.js';
import { images, makeRunEnv, type RunEnv, type TaskDecl, taskStates } from '../helpers/run-env.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function env(options: Parameters<typeof makeRunEnv>[0]): Promise<RunEnv> {
  const e = await makeRunEnv(options);
  closers.push(() => e.close());
  return e;
}

/** A sandbox clock that moves only when the test moves it: jobs stay where they are until then. */
function testClock() {
  let at = Date.now();
  return {
    now: () => at,
    advance(ms: number) {
      at += ms;
    },
  };
}

/** Ports nothing listens on now; held together while they are picked, so they differ. */
async function freePorts(n: number): Promise<number[]> {
  const servers = Array.from({ length: n }, () => createServer());
  for (const server of servers) {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  }
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  for (const server of servers) await new Promise<void>((resolve) => server.close(() => resolve()));
  return ports;
}

async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  if (port === undefined) throw new Error('no free port');
  return port;
}

/** `--listen` and `--callback-url` for a receiver on `port` that the sandbox reaches at `publicPort`. */
function listenArgs(port: number, publicPort = port): string[] {
  return ['--listen', `127.0.0.1:${port}`, '--callback-url', `http://127.0.0.1:${publicPort}`];
}

const videos = (n: number): TaskDecl[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `clip-${i + 1}`,
    model: 'flow22_spicy',
    input: { prompt: `clip number ${i + 1}`, resolution: '480p' },
  }));

async function post(url: string, body: string): Promise<number> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  await response.arrayBuffer();
  return response.status;
}

const until = (check: () => void, timeout = 15_000) => vi.waitFor(check, { timeout, interval: 5 });
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function uuidOf(e: RunEnv, taskId: string): string {
  const [row] = e.query<{ img_uuid: string | null }>('SELECT img_uuid FROM tasks WHERE task_id = ?', taskId);
  if (!row?.img_uuid) throw new Error(`${taskId} has no img_uuid yet`);
  return row.img_uuid;
}

function callbackUrlOf(e: RunEnv, taskId: string): string {
  const uuid = uuidOf(e, taskId);
  const url = e.state().jobs.find((j) => j.img_uuid === uuid)?.callback_url;
  if (!url) throw new Error(`the job of ${taskId} was sent without a callback URL`);
  return url;
}

function runToken(e: RunEnv): string | null {
  return (
    e.query<{ callback_token: string | null }>('SELECT callback_token FROM runs')[0]?.callback_token ?? null
  );
}

/** `[callback, polling]` from the line `Results: N arrived by callback, M by polling (…)`. */
function arrivals(result: CliRun): [number, number] {
  const m = /Results: (\d+) arrived by callback, (\d+) by polling/.exec(result.stdout);
  if (!m) throw new Error(`no Results line in:\n${result.stdout}`);
  return [Number(m[1]), Number(m[2])];
}

function ledger(e: RunEnv): { task_id: string; kind: string; tokens: number }[] {
  return e.query('SELECT task_id, kind, tokens FROM ledger ORDER BY task_id, kind');
}

/** A job record as the service would send it, claiming `status`. */
function claim(imgUuid: string, status: string | undefined, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    code: 0,
    msg: 'success',
    data: { img_uuid: imgUuid, ...(status === undefined ? {} : { status }), ...extra },
  });
}

describe('callbacks: results arrive by callback, polling is only the safety net', () => {
  it('the same manifest with a receiver: the same files and money, far fewer polls', async () => {
    const tasks = [...images(10), ...videos(2)];
    // Seconds become tens of milliseconds on both sides: the jobs' durations and our polling.
    const options = { speed: 0.05, callbackRetryDelayMs: 10 };
    const scale = { MEDIABATCH_POLL_SCALE: '0.02' };
    // With a receiver polling is the safety net, 60 s scaled: at 0.02 its first look came 0.8 s after an
    // image's callback was due, and a loaded machine (sandbox, receiver and run in one process) delivered
    // some later than that. At 0.1 it looks after 6 s, past the longest job (4.5 s): what a callback
    // brings arrives by callback, however slow the machine.
    const safetyNet = { MEDIABATCH_POLL_SCALE: '0.1' };
    const polled = await env(options);
    const called = await env(options);
    const port = await freePort();

    const withoutCallbacks = await polled.run(
      ['run', await polled.manifest({ tasks, concurrency: 12 }), '--yes'],
      {
        env: scale,
      },
    );
    const withCallbacks = await called.run(
      ['run', await called.manifest({ tasks, concurrency: 12 }), '--yes', ...listenArgs(port)],
      { env: safetyNet },
    );

    expect(withoutCallbacks.code).toBe(0);
    expect(withCallbacks.code).toBe(0);
    expect(Object.values(taskStates(called))).toEqual(Array(12).fill('done'));
    expect(await called.files('out')).toEqual(await polled.files('out'));
    const money = (e: RunEnv) => e.state().jobs.reduce((n, j) => n + j.cost - j.refunded, 0);
    expect(money(called)).toBe(money(polled));
    expect(called.state().balance).toBe(polled.state().balance);
    expect(called.state().requests.submit).toBe(12);
    expect(called.state().requests.download).toBe(polled.state().requests.download);

    // One confirming look per result, plus the odd fallback look at a long video.
    const polls = { with: called.state().requests.poll, without: polled.state().requests.poll };
    expect(polls.with).toBeLessThan(polls.without / 2);
    const [byCallback, byPolling] = arrivals(withCallbacks);
    expect(byCallback + byPolling).toBe(12);
    expect(byCallback).toBeGreaterThanOrEqual(10);
    expect(withoutCallbacks.stdout).not.toContain('Results:');

    const token = runToken(called);
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    for (const job of called.state().jobs) {
      expect(job.callback_url).toMatch(
        new RegExp(`^http://127\\.0\\.0\\.1:${port}/mediabatch/callback/${token}/[A-Za-z0-9_-]{16}$`),
      );
      expect(job.callbacks.map((c) => [c.status, c.outcome])).toEqual([
        ['processing', 'delivered'],
        ['success', 'delivered'],
      ]);
    }
    // The token lives in the URL given to the service, never in the stored request.
    const bodies = called.query<{ body: string }>('SELECT body FROM tasks');
    for (const { body } of bodies) expect(body).not.toContain('custom_callback_url');
  }, 60_000);
});

interface ForgeryCase {
  name: string;
  /** Builds the request from the receiver's real URL for img-1 and the jobs of img-1 and img-2. */
  forge: (at: { url: string; uuid1: string; uuid2: string }) => { url: string; body: string };
  status: number;
  /** jobs/detail requests it causes: a claim that could end the job is looked at, nothing else. */
  polls: number;
}

const FORGERIES: ForgeryCase[] = [
  {
    name: 'a wrong token',
    forge: ({ url, uuid1 }) => ({
      url: url.replace(/\/callback\/[^/]+\//, `/callback/${'A'.repeat(32)}/`),
      body: claim(uuid1, 'success'),
    }),
    status: 404,
    polls: 0,
  },
  {
    name: 'no token at all',
    forge: ({ url, uuid1 }) => ({
      url: url.replace(/\/callback\/[^/]+\//, '/callback/'),
      body: claim(uuid1, 'success'),
    }),
    status: 404,
    polls: 0,
  },
  {
    name: 'success claimed (with links of its own) while the job is processing',
    forge: ({ url, uuid1 }) => ({
      url,
      body: claim(uuid1, 'success', { json: [{ type: 'image', value: 'http://127.0.0.1:9/evil.png' }] }),
    }),
    status: 200,
    polls: 1,
  },
  {
    name: 'failed claimed while the job is processing',
    forge: ({ url, uuid1 }) => ({ url, body: claim(uuid1, 'failed') }),
    status: 200,
    polls: 1,
  },
  {
    name: 'a status nobody knows',
    forge: ({ url, uuid1 }) => ({ url, body: claim(uuid1, 'finished!') }),
    status: 200,
    polls: 1,
  },
  {
    name: 'no status at all',
    forge: ({ url, uuid1 }) => ({ url, body: claim(uuid1, undefined) }),
    status: 200,
    polls: 1,
  },
  {
    name: "success claimed naming another task's img_uuid",
    forge: ({ url, uuid2 }) => ({ url, body: claim(uuid2, 'success') }),
    status: 200,
    polls: 0,
  },
  {
    name: 'a key that names no task of the run',
    forge: ({ url, uuid1 }) => ({
      url: url.replace(/[^/]+$/, 'AAAAAAAAAAAAAAAA'),
      body: claim(uuid1, 'success'),
    }),
    status: 200,
    polls: 0,
  },
  {
    name: 'a 10 MB body',
    forge: ({ url, uuid1 }) => ({
      url,
      body: claim(uuid1, 'success', { pad: 'x'.repeat(10 * 1024 * 1024) }),
    }),
    status: 413,
    polls: 0,
  },
  {
    name: 'a body that is not JSON',
    forge: ({ url }) => ({ url, body: '{"data": {"status": "success"' }),
    status: 400,
    polls: 0,
  },
];

describe('callbacks: a forged or malformed callback changes nothing wrong', () => {
  it.each(FORGERIES)(
    '$name: answered $status, the tasks wait for jobs/detail',
    async (c) => {
      const clock = testClock();
      const e = await env({ now: clock.now, speed: 1, callbackRetryDelayMs: 10 });
      const port = await freePort();
      const file = await e.manifest({ tasks: images(2) });
      const run = e.run(['run', file, '--yes', ...listenArgs(port)], { env: { MEDIABATCH_POLL_SCALE: '1' } });
      await until(() => expect(taskStates(e)).toEqual({ 'img-1': 'submitted', 'img-2': 'submitted' }));
      // Both jobs are processing (their `processing` callbacks are heard and need no look); none has ended.
      clock.advance(2_000);
      e.sandbox.advance();
      await e.sandbox.callbacksSettled();
      expect(e.state().jobs.map((j) => j.status)).toEqual(['processing', 'processing']);
      const pollsBefore = e.state().requests.poll;
      expect(pollsBefore).toBe(0);

      const at = { url: callbackUrlOf(e, 'img-1'), uuid1: uuidOf(e, 'img-1'), uuid2: uuidOf(e, 'img-2') };
      const forged = c.forge(at);
      expect(await post(forged.url, forged.body)).toBe(c.status);
      await until(() => expect(e.state().requests.poll).toBe(pollsBefore + c.polls));
      await pause(50);

      expect(e.state().requests.poll).toBe(pollsBefore + c.polls);
      expect(Object.values(taskStates(e))).not.toContain('done');
      expect(Object.values(taskStates(e))).not.toContain('failed');
      expect(Object.values(taskStates(e))).not.toContain('downloading');
      const events = e.query<{ status: string }>('SELECT status FROM job_events');
      expect(events.map((r) => r.status)).not.toContain('success');
      expect(events.map((r) => r.status)).not.toContain('failed');
      expect(ledger(e).filter((r) => r.kind === 'refund')).toEqual([]);
      expect(await e.files('out')).toEqual([]);
      expect(e.state().requests.download).toBe(0);

      // The jobs end: the genuine callbacks are still heard, even after a forged claim of the same status.
      clock.advance(10_000);
      e.sandbox.advance();
      const result = await run;
      expect(result.code).toBe(0);
      expect(taskStates(e)).toEqual({ 'img-1': 'done', 'img-2': 'done' });
      expect(arrivals(result)).toEqual([2, 0]);
      expect(ledger(e).map((r) => [r.task_id, r.kind])).toEqual([
        ['img-1', 'charge'],
        ['img-2', 'charge'],
      ]);
      expect(e.state().requests.download).toBe(2);
    },
    30_000,
  );

  it('duplicated and reordered callbacks: the task stays done, charged once, with one set of files', async () => {
    const clock = testClock();
    const e = await env({ now: clock.now, speed: 1, callbackRetryDelayMs: 10 });
    const port = await freePort();
    // The video keeps the run (and its receiver) going after the image is done.
    const file = await e.manifest({ tasks: [...images(1), ...videos(1)] });
    const run = e.run(['run', file, '--yes', ...listenArgs(port)], { env: { MEDIABATCH_POLL_SCALE: '1' } });
    await until(() => expect(taskStates(e)).toEqual({ 'img-1': 'submitted', 'clip-1': 'submitted' }));
    const url = callbackUrlOf(e, 'img-1');
    const uuid = uuidOf(e, 'img-1');

    // The image ends (3 to 8 s), the video does not (30 to 90 s). The service's success callback races
    // two copies of the same record, as a retried delivery would.
    clock.advance(10_000);
    e.sandbox.advance();
    const detail = await fetch(`${e.sandbox.baseUrl}/api/v1/jobs/detail?img_uuid=${uuid}`, {
      headers: { authorization: 'Bearer sandbox-key' },
    });
    const record = (await detail.json()) as { data: Record<string, unknown> };
    expect(record.data['status']).toBe('success');
    const copy = JSON.stringify(record);
    expect(await Promise.all([post(url, copy), post(url, copy)])).toEqual([200, 200]);
    await until(() => expect(taskStates(e)['img-1']).toBe('done'));
    const filesAfterDone = await e.files('out');
    const downloadsAfterDone = e.state().requests.download;
    const pollsAfterDone = e.state().requests.poll;

    // Late and out of order: success again, then processing and failed after success.
    for (const body of [copy, claim(uuid, 'processing'), claim(uuid, 'failed'), copy]) {
      expect(await post(url, body)).toBe(200);
    }
    await pause(50);
    expect(taskStates(e)['img-1']).toBe('done');
    expect(e.state().requests.poll).toBe(pollsAfterDone);
    expect(e.state().requests.download).toBe(downloadsAfterDone);
    expect(await e.files('out')).toEqual(filesAfterDone);

    clock.advance(100_000);
    e.sandbox.advance();
    const result = await run;
    expect(result.code).toBe(0);
    expect(taskStates(e)).toEqual({ 'img-1': 'done', 'clip-1': 'done' });
    expect(arrivals(result)).toEqual([2, 0]);
    const image = (await e.files('out/batch/img-1')).filter((f) => f !== 'job.json');
    expect(image).toHaveLength(1);
    expect(e.state().requests.download).toBe(2);
    expect(ledger(e).map((r) => [r.task_id, r.kind])).toEqual([
      ['clip-1', 'charge'],
      ['img-1', 'charge'],
    ]);
    const events = e.query<{ status: string; source: string }>(
      'SELECT status, source FROM job_events WHERE img_uuid = ? ORDER BY status',
      uuid,
    );
    expect(events).toEqual([{ status: 'success', source: 'callback' }]);
  }, 30_000);
});

/** An HTTP server on `port` that passes every request on to `to`; the sandbox's way to the receiver. */
async function forwarder(port: number, to: number): Promise<void> {
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      fetch(`http://127.0.0.1:${to}${req.url ?? '/'}`, {
        method: req.method ?? 'POST',
        headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
        body: Buffer.concat(chunks),
      })
        .then(async (answer) => res.writeHead(answer.status).end(Buffer.from(await answer.arrayBuffer())))
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
}

describe('callbacks: a receiver out of reach loses nothing', () => {
  it('callbacks dropped while the public address is down: the fallback polling finishes those tasks', async () => {
    const clock = testClock();
    const e = await env({ now: clock.now, speed: 1, callbackRetryDelayMs: 10 });
    const [port, publicPort] = (await freePorts(2)) as [number, number];
    const file = await e.manifest({ tasks: images(6), concurrency: 3 });
    // The fallback look comes 1.2 s after a job is sent (a minute, scaled).
    const run = e.run(['run', file, '--yes', ...listenArgs(port, publicPort)], {
      env: { MEDIABATCH_POLL_SCALE: '0.02' },
    });
    await until(() => expect(e.state().jobs).toHaveLength(3));

    // Nothing listens at the public address: every delivery is refused, retried 3 times, then dropped.
    clock.advance(10_000);
    e.sandbox.advance();
    await e.sandbox.callbacksSettled();
    const first = e.state().jobs.slice(0, 3);
    for (const job of first) {
      expect(job.callbacks.map((c) => [c.status, c.outcome, c.attempts.length])).toEqual([
        ['processing', 'dropped', 4],
        ['success', 'dropped', 4],
      ]);
    }
    await until(() => expect(e.state().jobs).toHaveLength(6));

    // The address comes back: the next jobs' results arrive by callback.
    await forwarder(publicPort, port);
    clock.advance(10_000);
    e.sandbox.advance();
    const result = await run;
    expect(result.code).toBe(0);
    expect(Object.values(taskStates(e))).toEqual(Array(6).fill('done'));
    expect(arrivals(result)).toEqual([3, 3]);
    for (const job of e.state().jobs.slice(3)) {
      expect(job.callbacks.map((c) => c.outcome)).toEqual(['delivered', 'delivered']);
    }
    expect(ledger(e).filter((r) => r.kind === 'charge')).toHaveLength(6);
    expect(e.state().requests.download).toBe(6);
  }, 30_000);
});

/**
 * A loopback proxy in front of the sandbox that holds every submission answer until `release()`: the
 * job exists and runs, but the run does not know its img_uuid yet.
 */
async function slowAnswers(upstream: string): Promise<{ baseUrl: string; release: () => void }> {
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const name of ['authorization', 'content-type']) {
        const value = req.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const method = req.method ?? 'GET';
      fetch(`${upstream}${req.url ?? '/'}`, {
        method,
        headers,
        ...(method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
      })
        .then(async (answer) => {
          const body = Buffer.from(await answer.arrayBuffer());
          if (method === 'POST') await released;
          res.writeHead(answer.status, {
            'content-type': answer.headers.get('content-type') ?? 'text/plain',
          });
          res.end(body);
        })
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        release();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, release };
}

describe('callbacks: a callback that outruns the submission answer', () => {
  it('is looked at as soon as the answer is recorded, not a fallback interval later', async () => {
    const clock = testClock();
    const e = await env({ now: clock.now, speed: 1, callbackRetryDelayMs: 10 });
    const proxy = await slowAnswers(e.sandbox.baseUrl);
    const port = await freePort();
    const file = await e.manifest({ tasks: images(1) });
    const run = e.run(['run', file, '--yes', ...listenArgs(port)], {
      env: { MEDIABATCH_POLL_SCALE: '1', MEDIABATCH_BASE_URL: proxy.baseUrl },
    });
    await until(() => expect(e.state().jobs).toHaveLength(1));
    expect(taskStates(e)).toEqual({ 'img-1': 'submitting' });
    // The job ends and its callbacks are delivered while the run still waits for the answer.
    clock.advance(10_000);
    e.sandbox.advance();
    await e.sandbox.callbacksSettled();
    expect(e.state().jobs[0]?.callbacks.map((c) => [c.status, c.outcome])).toEqual([
      ['processing', 'delivered'],
      ['success', 'delivered'],
    ]);
    proxy.release();
    // Polling would look first after a minute; the test's 15 s limit would fail it.
    const result = await run;
    expect(result.code).toBe(0);
    expect(taskStates(e)).toEqual({ 'img-1': 'done' });
    expect(arrivals(result)).toEqual([1, 0]);
    expect(e.state().requests.poll).toBe(1);
  }, 15_000);
});

async function receiverUp(port: number): Promise<void> {
  await until(async () => {
    const answer = await fetch(`http://127.0.0.1:${port}/`);
    await answer.arrayBuffer();
    expect(answer.status).toBe(404);
  });
}

describe('callbacks: a restarted run', () => {
  it('keeps its token, so callbacks for jobs sent before the restart are accepted', async () => {
    const clock = testClock();
    const e = await env({ now: clock.now, speed: 1, callbackRetryDelayMs: 10 });
    const port = await freePort();
    const file = await e.manifest({ tasks: images(3), concurrency: 3 });
    const args = ['run', file, '--yes', ...listenArgs(port)];
    const slow = { env: { MEDIABATCH_POLL_SCALE: '1' } };

    const first = e.run(args, slow);
    await until(() => expect(Object.values(taskStates(e))).toEqual(Array(3).fill('submitted')));
    e.signals.emit('SIGINT');
    expect((await first).code).toBe(4);
    const token = runToken(e);
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);

    const second = e.run(args, slow);
    await receiverUp(port);
    // The jobs end now; their callbacks carry the URL (and token) the first process gave them.
    clock.advance(10_000);
    e.sandbox.advance();
    const result = await second;
    expect(result.code).toBe(0);
    expect(runToken(e)).toBe(token);
    expect(Object.values(taskStates(e))).toEqual(Array(3).fill('done'));
    // Polling alone would have waited a minute: every result came by callback.
    expect(arrivals(result)).toEqual([3, 0]);
    expect(e.state().requests.submit).toBe(3);
    for (const job of e.state().jobs) {
      expect(job.callback_url).toContain(`/mediabatch/callback/${token}/`);
      expect(job.callbacks.at(-1)).toMatchObject({ status: 'success', outcome: 'delivered' });
    }
  }, 30_000);
});

describe('callbacks: run --sandbox --listen', () => {
  it('works end to end through the CLI and says how the results arrived', async () => {
    const e = await env({});
    const file = await e.manifest({ tasks: images(4) });
    const result = await e.run(
      ['run', file, '--sandbox', '--sandbox-speed', '0.05', '--yes', '--listen', '127.0.0.1:0'],
      {
        // The sandbox's own scale: fallback looks every 6 s, well after these jobs end.
        env: { MEDIABATCH_POLL_SCALE: '0.1' },
      },
    );
    expect(result.code).toBe(0);
    const receiver =
      /Callbacks: receiver on (http:\/\/127\.0\.0\.1:\d+); the service is told (\S+)\/mediabatch\/callback\/…/.exec(
        result.stdout,
      );
    expect(receiver?.[2]).toBe(receiver?.[1]);
    expect(result.stdout).toContain('Run batch: 4 done\n');
    expect(result.stdout).toContain(
      '  Results: 4 arrived by callback, 0 by polling (8 callbacks received, 0 ignored)\n',
    );
    expect(Object.values(taskStates(e))).toEqual(Array(4).fill('done'));
    // The run's own sandbox was used, not the test's.
    expect(e.state().requests.submit).toBe(0);
  }, 30_000);

  it.each([
    [
      ['--listen', '127.0.0.1:0'],
      '--listen needs --callback-url (or callback_url in the manifest): the public https address that reaches this receiver',
    ],
    [
      ['--callback-url', 'https://hooks.example.com'],
      '--callback-url needs --listen host:port (or listen in the manifest): the receiver this URL reaches',
    ],
    [
      ['--listen', '127.0.0.1:0', '--callback-url', 'hooks.example.com'],
      '--callback-url: must be an http or https URL such as https://hooks.example.com, got "hooks.example.com"',
    ],
    [
      ['--listen', '127.0.0.1:0', '--callback-url', 'ftp://hooks.example.com'],
      '--callback-url: must be an http or https URL such as https://hooks.example.com, got "ftp://hooks.example.com"',
    ],
    [
      ['--listen', '127.0.0.1:0', '--callback-url', 'https://hooks.example.com/in?key=1'],
      '--callback-url: must have no query or fragment (the task\'s path is appended to it), got "https://hooks.example.com/in?key=1"',
    ],
    [
      ['--listen', 'everywhere', '--callback-url', 'https://hooks.example.com'],
      '--listen: must be host:port such as 127.0.0.1:8080 (port 0 picks a free one), got "everywhere"',
    ],
  ])('%j is refused before anything is sent (exit 1)', async (flags, message) => {
    const e = await env({});
    const file = await e.manifest({ tasks: images(1) });
    const result = await e.run(['run', file, '--yes', ...flags]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`mediabatch: ${message}\n`);
    expect(e.state().requests.submit).toBe(0);
  });
});

describe('callbacks: a plain callback_url without a receiver', () => {
  it('goes to the service when sending, is not part of the stored request, and changing it changes no task', async () => {
    const e = await env({});
    const manifest = (url: string, count: number) =>
      [
        'version: 1',
        'name: batch',
        'output: out',
        `callback_url: ${url}`,
        'tasks:',
        '  - id: "img-{{index}}"',
        '    model: flat-image',
        `    repeat: ${count}`,
        '    input: { prompt: "plain callback {{index}}" }',
        '',
      ].join('\n');
    await writeFile(join(e.dir, 'plain.yaml'), manifest('http://127.0.0.1:9/first', 2));
    expect((await e.run(['run', 'plain.yaml', '--yes'])).code).toBe(0);
    expect(e.state().jobs.map((j) => j.callback_url)).toEqual([
      'http://127.0.0.1:9/first',
      'http://127.0.0.1:9/first',
    ]);
    const bodies = e.query<{ body: string }>('SELECT body FROM tasks');
    expect(bodies).toHaveLength(2);
    for (const { body } of bodies) expect(body).not.toContain('custom_callback_url');

    // Another receiver of the user's, and one more task: the two sent tasks are unchanged, not resubmitted.
    await writeFile(join(e.dir, 'plain.yaml'), manifest('http://127.0.0.1:9/second', 3));
    const again = await e.run(['run', 'plain.yaml', '--yes']);
    expect(again.code).toBe(0);
    expect(e.state().jobs.map((j) => j.callback_url)).toEqual([
      'http://127.0.0.1:9/first',
      'http://127.0.0.1:9/first',
      'http://127.0.0.1:9/second',
    ]);
  });
});
