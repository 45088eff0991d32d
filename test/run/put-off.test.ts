// Tasks put off for a passing reason (a chained task whose upstream's job record cannot be fetched again
// now, a task whose submissions the service keeps failing) are tried again within the run after a growing
// pause; only one that still cannot go when everything else is finished is left pending, and the run's
// last line says why and the command that continues it. Real HTTP to the sandbox through a proxy that
// answers chosen requests 500 (nothing forwarded, nothing charged), a real SQLite file.
import { afterEach, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../helpers/fault-proxy.js';
import {
  hintIn,
  makeRunEnv,
  type RunEnv,
  reason,
  type TaskDecl,
  taskStates,
  voiceToAvatar,
} from '../helpers/run-env.js';

let env: RunEnv | undefined;
let proxy: FaultProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  await env?.close();
  proxy = undefined;
  env = undefined;
});

/** A speech, a talking avatar that speaks it, and a still that waits for nothing. */
function chainAndOne(e: RunEnv): TaskDecl[] {
  return [...voiceToAvatar(e), { id: 'still', model: 'flat-image', input: { prompt: 'a mug' } }];
}

/** Looks at the voice's job once it was seen done: what the downstream asks for fresh links. */
function voiceLookAfterDone(e: RunEnv) {
  return (a: { path: string; imgUuid: string | null; seenDone(id: string): boolean }): boolean => {
    if (a.path !== '/api/v1/jobs/detail' || a.imgUuid === null || !a.seenDone(a.imgUuid)) return false;
    return (
      (e.state().jobs.find((j) => j.img_uuid === a.imgUuid)?.request as { text?: unknown } | undefined)
        ?.text !== undefined
    );
  };
}

describe('tasks put off for a passing reason', () => {
  it('a downstream whose upstream record fails more looks than one round retries is sent later in the run', async () => {
    // Links live 10 minutes, less than a downstream needs ahead: its upstream's record is fetched again.
    env = await makeRunEnv({ linkTtlSeconds: 600 });
    const e = env;
    const isLook = voiceLookAfterDone(e);
    let looks = 0;
    // Ten looks fail: more than one round's six (a first look and five retries).
    proxy = await startFaultProxy(e.sandbox.baseUrl, (a) => isLook(a) && ++looks <= 10);
    const file = await e.manifest({ tasks: chainAndOne(e) });
    const result = await e.run(['run', file, '--yes'], { env: { MEDIABATCH_BASE_URL: proxy.baseUrl } });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(taskStates(e)).toEqual({ voice: 'done', avatar: 'done', still: 'done' });
    expect(proxy.faults).toBe(10);
    expect(e.state().jobs).toHaveLength(3);
  });

  it('one that still cannot go when all else is finished: exit 4, one line why, and the printed command finishes it', async () => {
    env = await makeRunEnv({ linkTtlSeconds: 600 });
    const e = env;
    const isLook = voiceLookAfterDone(e);
    let failing = true;
    proxy = await startFaultProxy(e.sandbox.baseUrl, (a) => failing && isLook(a));
    const file = await e.manifest({ tasks: chainAndOne(e) });
    const first = await e.run(['run', file, '--yes'], { env: { MEDIABATCH_BASE_URL: proxy.baseUrl } });
    expect(first.code).toBe(4);
    expect(reason(first)).toBe(
      `1 task(s) are unfinished (avatar: not submitted yet: voice: its job record could not be fetched again for fresh links: HTTP 500 with code 500): \`mediabatch run batch.yaml --run-id batch --state ${e.db}\` continues the run`,
    );
    // Five rounds of six looks each, a growing pause between rounds; the rest of the run finished.
    expect(proxy.faults).toBe(30);
    expect(taskStates(e)).toEqual({ voice: 'done', avatar: 'pending', still: 'done' });
    expect(e.state().jobs).toHaveLength(2);

    // The service recovered; typed as printed: the downstream is sent, nothing is sent twice.
    failing = false;
    const second = await e.type(hintIn(reason(first)), { env: { MEDIABATCH_BASE_URL: proxy.baseUrl } });
    expect(second.stderr).toBe('');
    expect(second.code).toBe(0);
    expect(taskStates(e)).toEqual({ voice: 'done', avatar: 'done', still: 'done' });
    expect(e.state().jobs).toHaveLength(3);
  });

  it('a task whose submissions fail past its retries is submitted again later in the run, charged once', async () => {
    env = await makeRunEnv();
    const e = env;
    let posts = 0;
    // Eight submissions answered 500: one round's six attempts, then two more after the pause.
    proxy = await startFaultProxy(e.sandbox.baseUrl, (a) => a.method === 'POST' && ++posts <= 8);
    const file = await e.manifest({
      tasks: [{ id: 'still', model: 'flat-image', input: { prompt: 'a mug' } }],
    });
    const result = await e.run(['run', file, '--yes'], { env: { MEDIABATCH_BASE_URL: proxy.baseUrl } });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(taskStates(e)).toEqual({ still: 'done' });
    expect(proxy.faults).toBe(8);
    expect(e.state().jobs).toHaveLength(1);
    const attempts = e.query<{ outcome: string }>("SELECT outcome FROM attempts WHERE task_id = 'still'");
    expect(attempts.filter((a) => a.outcome === 'not_charged')).toHaveLength(8);
  });
});
