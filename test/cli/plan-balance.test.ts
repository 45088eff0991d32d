// `plan` with credentials asks the API for the balance, and never submits anything.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { cli } from '../helpers/cli.js';
import { folder, lines } from './helpers.js';

const MANIFEST = `version: 1
name: priced
tasks:
  - id: "clip-{{index}}"
    model: flow22_spicy
    repeat: 3
    input: { prompt: a sunrise, resolution: 720p }
`;

let sandbox: Sandbox;

beforeEach(async () => {
  sandbox = await startSandbox({ port: 0, apiKey: 'sandbox-key', balance: 100 });
});

afterEach(async () => {
  await sandbox.close();
});

async function plan(env: NodeJS.ProcessEnv, args: string[] = []) {
  const cwd = await folder({ 'm.yaml': MANIFEST });
  return cli(['plan', 'm.yaml', ...args], { cwd, env });
}

const withKey = (key: string) => ({ MEDIABATCH_API_KEY: key, MEDIABATCH_BASE_URL: sandbox.baseUrl });

describe('plan and the balance', () => {
  it('shows the balance against the total, and submits nothing', async () => {
    const r = await plan(withKey('sandbox-key'));
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // 3 tasks x 10 tokens (720p) = 30 of 100
    expect(lines(r.stdout)).toContain('Balance: 100 tokens; 70 tokens left after the run at most.');
    expect(sandbox.state().requests).toMatchObject({ submit: 0, balance: 1 });
    expect(sandbox.state().jobs).toEqual([]);
  });

  it('says plainly when the balance is not enough', async () => {
    sandbox.configure({ balance: 25 });
    const r = await plan(withKey('sandbox-key'));
    expect(r.code).toBe(3);
    expect(lines(r.stdout)).toContain(
      'Balance: 25 tokens; NOT ENOUGH: the plan can cost 5 tokens more. Top up, or trim the tasks.',
    );
    expect(r.stderr).toBe(
      'mediabatch: the plan does not fit: the run can cost up to 30 tokens but the balance is 25 tokens\n',
    );
    expect(sandbox.state().requests.submit).toBe(0);
  });

  it('gives the balance and what is left in --json', async () => {
    const r = await plan(withKey('sandbox-key'), ['--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      balance: 100,
      leftAfterRun: 70,
      totals: { tokens: 30 },
      fits: { balance: true, quota: null, budget: null },
    });
    expect(sandbox.state().requests.submit).toBe(0);
  });

  it('stops with exit 5 and one line when the key is refused, never printing the key', async () => {
    const r = await plan(withKey('wrong-key-123'));
    expect(r.code).toBe(5);
    expect(r.stdout).toBe('');
    expect(lines(r.stderr)).toEqual([
      'mediabatch: the API refused the credentials (401): check MEDIABATCH_API_KEY and the base URL',
    ]);
    expect(r.stderr).not.toContain('wrong-key-123');
    expect(sandbox.state().requests.submit).toBe(0);
  });

  it('says how to add credentials when there are none', async () => {
    const r = await plan({});
    expect(r.code).toBe(0);
    expect(lines(r.stdout)).toContain(
      'Balance: not checked; to compare the plan with your balance, set MEDIABATCH_API_KEY (and MEDIABATCH_BASE_URL) in the environment.',
    );
    expect(sandbox.state().requests.balance).toBe(0);
  });

  it('says what is missing when the key is set but no base URL is', async () => {
    const r = await plan({ MEDIABATCH_API_KEY: 'sandbox-key' });
    expect(r.code).toBe(0);
    expect(lines(r.stdout)).toContain(
      'Balance: not checked; MEDIABATCH_API_KEY is set but no base URL is: set MEDIABATCH_BASE_URL, --base-url, or base_url in mediabatch.config.yaml.',
    );
  });

  it('still plans when the API cannot be reached, and says so', async () => {
    const { baseUrl } = sandbox;
    await sandbox.close();
    const r = await plan({ MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: baseUrl });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\nBalance: could not be fetched \(.+\)\.\n/);
    sandbox = await startSandbox({ port: 0 });
  });
});
