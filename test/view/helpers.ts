// A real run against the sandbox (in-process, real SQLite and files) with failures and tasks in doubt,
// and raw HTTP (node:http, so the Host header is ours to set) for the view's tests.
import { request } from 'node:http';
import type { SandboxOptions } from '../../src/sandbox/options.js';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';

/** Answers as bytes, with the headers as node gives them. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
}

/** GET (or another method) with exactly these headers; the path is sent as written (no normalising). */
export function raw(
  port: number,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
  body?: string,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method, headers: { host: `127.0.0.1:${port}`, ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString('utf8') });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The sandbox's choices with seed 5 give failed and in-doubt tasks among 12 images (checked by the tests). */
export const FAULTY: SandboxOptions = { failRate: 0.25, chargeThenErrorRate: 0.25, seed: 5 };

/** A finished run `batch` of 12 images and a video, some failed and some in doubt. */
export async function faultyRun(apiKey?: string): Promise<RunEnv> {
  const env = await makeRunEnv({ ...FAULTY, ...(apiKey ? { apiKey } : {}) });
  const file = await env.manifest({
    name: 'batch',
    tasks: [
      ...images(12),
      { id: 'clip', model: 'flow22_spicy', input: { prompt: 'a slow dolly shot', resolution: '480p' } },
    ],
  });
  const result = await env.run(['run', file, '--yes', '--retries', '0']);
  if (![0, 2].includes(result.code)) throw new Error(`run exited ${result.code}: ${result.stderr}`);
  return env;
}
