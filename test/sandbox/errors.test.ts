// Authentication, money refusals (100, 101), injected faults (500, charge-then-error) and the control endpoints.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { isLoopbackAddress } from '../../src/sandbox/server.js';
import { clientFor, closeAll, openSandbox, PATHS } from './helpers.js';

afterEach(closeAll);

const image = { model: 'flat-image', prompt: 'a mug' };
const video = { model: 'flow22_spicy', prompt: 'x', resolution: '720p' };

describe('authentication', () => {
  it.each([
    ['balance, no key', 'GET', '/api/v1/user/tokens', null, 'Token is required'],
    ['balance, wrong key', 'GET', '/api/v1/user/tokens', 'wrong', 'Token is required'],
    ['face swap, no key', 'POST', PATHS.faceSwap, null, 'Token Error'],
    ['face swap, wrong key', 'POST', PATHS.faceSwap, 'wrong', 'Token Error'],
    ['images, no key', 'POST', PATHS.images, null, 'Token is required'],
    ['images, wrong key', 'POST', PATHS.images, 'wrong', 'Token Error'],
    ['jobs/detail, wrong key', 'GET', '/api/v1/jobs/detail?img_uuid=x', 'wrong', 'Token Error'],
  ])('%s -> 401 %s', async (_name, method, path, key, msg) => {
    const { sandbox, api } = await openSandbox();
    const answer = method === 'GET' ? await api.get(path, key) : await api.post(path, image, key);
    expect(answer).toEqual({ status: 401, body: { code: 401, msg } });
    expect(sandbox.state()).toMatchObject({ balance: 1000, jobs: [] });
  });

  it('accepts the key given by --api-key', async () => {
    const { api } = await openSandbox({ apiKey: 'k-123' });
    expect((await api.get('/api/v1/user/tokens', 'k-123')).body).toEqual({
      code: 0,
      msg: 'Success',
      data: { count: 1000 },
    });
    expect((await api.get('/api/v1/user/tokens')).status).toBe(401);
  });
});

describe('money', () => {
  it('answers code 100 with HTTP 200 when the balance is short, charging nothing', async () => {
    const { sandbox, api } = await openSandbox({ balance: 9.5 });
    expect(await api.submit(PATHS.videos, video)).toEqual({
      status: 200,
      body: { code: 100, msg: 'tokens is not enough' },
    });
    expect(sandbox.state()).toMatchObject({ balance: 9.5, jobs: [], quota: { used: 0 } });
  });

  it('answers code 101 with used and quota once the monthly quota would be passed', async () => {
    const { sandbox, api, clock } = await openSandbox({ quota: 25, speed: 0 });
    expect((await api.submit(PATHS.videos, video)).body.code).toBe(0);
    expect((await api.submit(PATHS.videos, video)).body.code).toBe(0);
    expect(await api.submit(PATHS.videos, video)).toEqual({
      status: 200,
      body: { code: 101, msg: 'API key quota exceeded: 20 of 25 tokens used (monthly)' },
    });
    expect(sandbox.state()).toMatchObject({
      balance: 980,
      quota: { limit: 25, used: 20, period: 'monthly', month: '2024-10' },
    });
    // A new month starts with a fresh quota.
    clock.advance(31 * 24 * 3600);
    expect((await api.submit(PATHS.videos, video)).body.code).toBe(0);
    expect(sandbox.state().quota).toMatchObject({ used: 10, month: '2024-11' });
  });

  it('checks the balance before the quota', async () => {
    const { api } = await openSandbox({ balance: 1, quota: 1 });
    expect((await api.submit(PATHS.videos, video)).body.code).toBe(100);
  });

  it('reports the balance as a whole number and keeps the exact figure in the state', async () => {
    const { sandbox, api } = await openSandbox({ balance: 10 });
    await api.submit(PATHS.audio, { model: 'song-replace-section', audio_url: 'x', infill_start_s: 0 }); // refused
    for (let i = 0; i < 3; i++) await api.submit(PATHS.images, image);
    expect(sandbox.state().balance).toBe(9.4);
    expect((await api.get('/api/v1/user/tokens')).body.data).toEqual({ count: 9 });
    expect(sandbox.state().requests).toEqual({ submit: 4, poll: 0, balance: 1, download: 0 });
  });

  it('charges list price x (1 - discount)', async () => {
    const { sandbox, api } = await openSandbox({ discount: 0.25 });
    expect((await api.submit(PATHS.videos, video)).body.data.cost).toBe(7.5);
    expect((await api.submit(PATHS.images, image)).body.data.cost).toBe(0.15);
    expect(sandbox.state()).toMatchObject({
      balance: 992.35,
      jobs: [{ list_price: 10, cost: 7.5 }, { list_price: 0.2 }],
    });
  });
});

describe('injected faults', () => {
  it('answers 500 with an empty msg at --error-rate 1, charging nothing', async () => {
    const { sandbox, api } = await openSandbox({ errorRate: 1 });
    expect(await api.submit(PATHS.images, image)).toEqual({ status: 500, body: { code: 500, msg: '' } });
    expect(sandbox.state()).toMatchObject({ balance: 1000, jobs: [] });
  });

  it('charges and creates the job, then answers a gateway 502 page or drops the connection, at --charge-then-error-rate 1', async () => {
    const { sandbox } = await openSandbox({ chargeThenErrorRate: 1, seed: 11 });
    const outcomes: string[] = [];
    for (let i = 0; i < 12; i++) {
      try {
        const res = await request(`${sandbox.baseUrl}${PATHS.images}`, {
          method: 'POST',
          headers: { authorization: 'Bearer sandbox-key', 'content-type': 'application/json' },
          body: JSON.stringify(image),
        });
        // Not the envelope: a client must not take it for the spec's "failed before charging" 500.
        expect(res.statusCode).toBe(502);
        expect(await res.body.text()).toContain('502 Bad Gateway');
        outcomes.push('502');
      } catch (error) {
        expect(String((error as Error).message)).toMatch(/closed|reset|socket/i);
        outcomes.push('dropped');
      }
    }
    expect(new Set(outcomes)).toEqual(new Set(['502', 'dropped']));
    const state = sandbox.state();
    expect(state.jobs).toHaveLength(12);
    expect(state.balance).toBeCloseTo(1000 - 12 * 0.2, 6);
    expect(state.jobs.map((j) => (j.answer === 'error-502' ? '502' : 'dropped'))).toEqual(outcomes);
  });

  it('delays every request by --latency', async () => {
    const { api } = await openSandbox({ latencyMs: 150 });
    const started = performance.now();
    await api.get('/api/v1/user/tokens');
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('changes faults at run time through POST /_sandbox/config and refuses bad values', async () => {
    const { sandbox, api } = await openSandbox();
    const changed = await api.post('/_sandbox/config', { errorRate: 1, balance: 3 }, null);
    expect(changed.body).toMatchObject({ code: 0, data: { errorRate: 1, balance: 3 } });
    expect((await api.submit(PATHS.images, image)).status).toBe(500);
    const refused = await api.post('/_sandbox/config', { failRate: 2, speedy: 1 }, null);
    expect(refused.status).toBe(400);
    expect(refused.body.msg).toMatch(
      /speedy: unknown setting.*failRate: must be a number from 0 to 1, got 2/,
    );
    expect(sandbox.state().settings.failRate).toBe(0);
    expect(() => sandbox.configure({ discount: -1 })).toThrow(
      /discount: must be a number from 0 to 1, got -1/,
    );
  });
});

describe('control endpoints', () => {
  it('serves /_sandbox/state without a key, with every job, charge and refund', async () => {
    const { sandbox } = await openSandbox({ quota: 100 });
    const api = clientFor(sandbox.baseUrl);
    await api.submit(PATHS.images, image);
    const { status, body } = await api.get('/_sandbox/state', null);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      balance: 999.8,
      quota: { limit: 100, used: 0.2, period: 'monthly' },
      jobs: [
        {
          model: 'flat-image',
          status: 'pending',
          cost: 0.2,
          refunded: 0,
          created_at: '2024-10-11T10:00:00.000Z',
          callbacks: [],
        },
      ],
      requests: { submit: 1, poll: 0, balance: 0, download: 0 },
    });
  });

  it.each([
    ['127.0.0.1', true],
    ['127.0.0.2', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['10.0.0.5', false],
    ['::ffff:192.168.1.2', false],
    ['fe80::1', false],
    [undefined, false],
  ])(
    'treats %s as loopback: %s (the state and config endpoints answer only loopback)',
    (address, loopback) => {
      expect(isLoopbackAddress(address)).toBe(loopback);
    },
  );

  it('answers unknown paths with a 404 envelope', async () => {
    const { api } = await openSandbox();
    expect(await api.get('/api/v2/nothing')).toMatchObject({ status: 404, body: { code: 404 } });
  });

  it('refuses to start with an invalid option', async () => {
    await expect(openSandbox({ failRate: 1.5 })).rejects.toThrow(
      /failRate: must be a number from 0 to 1, got 1.5/,
    );
  });
});
