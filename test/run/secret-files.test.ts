// The API key is scrubbed from every file a run writes — job.json, sheet.json, the four report
// files, the folder's mark — and from every object it puts in a bucket, even when a hostile or buggy server
// echoes the key into its job records and the user pasted the key into a prompt.
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { forgetSecrets } from '../../src/util/secrets.js';
import { makeRunEnv, type RunEnv } from '../helpers/run-env.js';
import { startS3, type TestS3 } from '../helpers/s3.js';

/** A proxy that answers every jobs/detail with the caller's Authorization header echoed into the record. */
interface EchoProxy {
  baseUrl: string;
  /** The bodies of the submissions it passed on. */
  submitted: string[];
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function startEchoProxy(upstream: string): Promise<EchoProxy> {
  const submitted: string[] = [];
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    if (req.method === 'POST') submitted.push(body.toString('utf8'));
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (typeof v === 'string' && k !== 'host' && k !== 'accept-encoding') headers[k] = v;
    }
    const answer = await request(`${upstream}${req.url ?? '/'}`, {
      method: (req.method ?? 'GET') as 'GET',
      headers,
      ...(body.length > 0 ? { body } : {}),
    });
    let text = Buffer.from(await answer.body.arrayBuffer());
    if (req.url?.startsWith('/api/v1/jobs/detail') && answer.statusCode === 200) {
      const parsed = JSON.parse(text.toString('utf8')) as { data?: Record<string, unknown> };
      if (parsed.data) parsed.data['debug_echo'] = { authorization: req.headers.authorization };
      text = Buffer.from(JSON.stringify(parsed));
    }
    const type = answer.headers['content-type'];
    res.writeHead(answer.statusCode, typeof type === 'string' ? { 'content-type': type } : {});
    res.end(text);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    submitted,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** Every file under `root`, hidden ones (the folder's mark) included. */
async function everyFile(root: string): Promise<string[]> {
  const entries = await readdir(root, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

const manifestWithKey = (key: string, output: string) => `version: 1
name: leaky
output: ${output}
tasks:
  - id: still
    model: flat-image
    input: { prompt: "a mug, and by mistake my key ${key}" }
  - id: hero
    model: oc-maker
    input: { prompt: "a mascot named ${key} as JSON with name and oc_prompt", image_render_model: render-a }
`;

let env: RunEnv | undefined;
let proxy: EchoProxy | undefined;
let s3: TestS3 | undefined;
afterEach(async () => {
  await proxy?.close();
  await env?.close();
  await s3?.close();
  env = undefined;
  proxy = undefined;
  s3 = undefined;
  forgetSecrets();
});

async function leakyRun(output: string, extraEnv: Record<string, string> = {}) {
  const key = `sk-SENTINEL-${randomBytes(8).toString('hex')}`;
  env = await makeRunEnv({ apiKey: key });
  proxy = await startEchoProxy(env.sandbox.baseUrl);
  const { writeFile } = await import('node:fs/promises');
  await writeFile(join(env.dir, 'leaky.yaml'), manifestWithKey(key, output));
  const run = await env.run(['run', 'leaky.yaml', '--yes'], {
    env: { MEDIABATCH_BASE_URL: proxy.baseUrl, ...extraEnv },
  });
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  // A key pasted into a prompt is not kept in the state file, whose stored request is what is sent (and
  // sent again after a crash): src/store/tasks.ts. What the server echoes is scrubbed from the files only.
  expect(proxy.submitted.filter((b) => b.includes('[redacted]') && !b.includes(key))).toHaveLength(2);
  return { key, run };
}

async function expectNoKey(files: string[], key: string): Promise<void> {
  for (const file of files) {
    const bytes = await readFile(file);
    expect(bytes.includes(key), file).toBe(false);
    expect(bytes.includes(encodeURIComponent(key)), file).toBe(false);
  }
}

describe('the API key in files a run writes', () => {
  it('is scrubbed from job.json, sheet.json, the reports and the gallery, though the server echoes it and a prompt holds it', async () => {
    const { key } = await leakyRun('out');
    const runDir = join(env?.dir ?? '', 'out', 'leaky');
    const files = await everyFile(runDir);
    const names = files.map((f) => f.slice(runDir.length + 1)).sort();
    expect(names).toEqual(
      expect.arrayContaining([
        '.mediabatch-run.json',
        'hero/job.json',
        'hero/sheet.json',
        'index.html',
        'report.csv',
        'report.json',
        'report.md',
        'still/job.json',
      ]),
    );
    await expectNoKey(files, key);
    // And the state database beside it (the record the server echoed is kept there too); not the
    // manifest, where the user wrote the key.
    const beside = await everyFile(env?.dir ?? '');
    expect(beside.some((f) => f.endsWith('state.db'))).toBe(true);
    await expectNoKey(
      beside.filter((f) => !f.endsWith('leaky.yaml')),
      key,
    );
    // The echo did reach job.json (so the check above looked at a leak), with the key cut out.
    const job = JSON.parse(await readFile(join(runDir, 'still/job.json'), 'utf8')) as {
      job: { debug_echo?: { authorization?: string } };
    };
    expect(job.job.debug_echo).toEqual({ authorization: 'Bearer [redacted]' });
    const report = await readFile(join(runDir, 'report.json'), 'utf8');
    expect(report).toContain('a mug, and by mistake my key [redacted]');
  });

  it('is scrubbed from every object the run puts in a bucket', async () => {
    s3 = await startS3();
    const { key } = await leakyRun(`s3://${s3.bucket}/results`, {
      MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
    });
    // s3rver keeps each object's bytes in `<key>._S3rver_object`, beside its metadata.
    const stored = await everyFile(s3.dir);
    const objects = stored.filter((f) => f.endsWith('._S3rver_object'));
    const jobs = objects.filter((f) => f.includes('job.json'));
    expect(jobs.length).toBeGreaterThanOrEqual(2);
    expect(objects.some((f) => f.includes('report.json'))).toBe(true);
    expect(objects.some((f) => f.includes('index.html'))).toBe(true);
    await expectNoKey(stored, key);
    const echoed = await Promise.all(jobs.map((f) => readFile(f, 'utf8')));
    expect(echoed.every((text) => text.includes('Bearer [redacted]'))).toBe(true);
  });
});
