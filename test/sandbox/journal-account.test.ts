// The embedded sandbox's account across processes: its moves are kept in the journal and made again by
// the next one (a real sandbox over HTTP, then a second on the same journal); a reset starts afresh, and
// a line cut by a crash is skipped.
import { appendFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { journalAccount, resetAccount } from '../../src/sandbox/journal.js';
import { startSandbox } from '../../src/sandbox/server.js';

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

async function submit(baseUrl: string): Promise<void> {
  const res = await request(`${baseUrl}/api/v1/images/generations`, {
    method: 'POST',
    headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'flat-image', prompt: 'a mug' }),
  });
  expect(res.statusCode).toBe(200);
  await res.body.text();
}

describe('the embedded sandbox keeps its account in its journal', () => {
  it('goes on from the balance the last process left, and starts afresh after a reset', async () => {
    dir = await mkdtemp(join(tmpdir(), 'mb-journal-'));
    const journal = join(dir, 'sandbox-jobs.jsonl');
    const first = await startSandbox({ port: 0, speed: 0, apiKey: 'k', journal });
    await submit(first.baseUrl);
    await submit(first.baseUrl);
    const left = first.state().balance;
    await first.close();
    expect(left).toBeLessThan(1000);

    const second = await startSandbox({ port: 0, speed: 0, apiKey: 'k', journal });
    expect(second.state().balance).toBe(left);
    await submit(second.baseUrl);
    const leftAgain = second.state().balance;
    await second.close();
    expect(leftAgain).toBeLessThan(left);
    // A line cut by a crash is skipped; the moves before and after it count.
    appendFileSync(journal, '{"account":{"kind":"charge","cost":');
    appendFileSync(journal, '\n');
    expect(journalAccount(journal, 1000, null).balance).toBe(leftAgain);

    resetAccount(journal);
    const third = await startSandbox({ port: 0, speed: 0, apiKey: 'k', journal });
    expect(third.state().balance).toBe(1000);
    await third.close();
  });

  it('a sandbox without a journal starts at its balance every time', async () => {
    const a = await startSandbox({ port: 0, speed: 0, apiKey: 'k' });
    await submit(a.baseUrl);
    await a.close();
    const b = await startSandbox({ port: 0, speed: 0, apiKey: 'k' });
    expect(b.state().balance).toBe(1000);
    await b.close();
  });
});
