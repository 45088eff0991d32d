// Two `mediabatch schedule` replicas (real processes) on one state, a cron firing every 2 seconds: each
// slot is fired by exactly one of them, the other says it was handled elsewhere, and the sandbox is asked
// once per task of each run. On PostgreSQL (the fleet's case) and on one SQLite file. A replica killed
// with kill -9 after claiming a slot and before making its run (held there by a slow input to measure):
// the other takes the slot over and fires it, once.

import { writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/exit-codes.js';
import { formatInZone } from '../../src/schedule/zone.js';
import { openStore } from '../../src/store/index.js';
import { type Child, spawnCli } from '../helpers/child.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';
import { type Served, serveFixtures } from '../media/serve.js';

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

const MANIFEST = [
  'version: 1',
  'name: tick',
  'run: "{{name}}-{{datetime}}"',
  'schedule: "*/2 * * * * *"',
  'timezone: UTC',
  'output: out',
  'tasks:',
  '  - id: "shot-{{n}}"',
  '    model: flat-image',
  '    matrix: { n: [1, 2] }',
  '    input: { prompt: "A studio photo of mug {{n}}" }',
  '',
].join('\n');

function replica(env: RunEnv, state: string, probe = false): Child {
  const flags = probe ? [] : ['--no-probe'];
  return spawnCli(['--state', state, 'schedule', 'tick.yaml', ...flags, '--allow-local-output'], {
    cwd: env.dir,
    env: {
      MEDIABATCH_API_KEY: SANDBOX_KEY,
      MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
      MEDIABATCH_POLL_SCALE: FAST_POLLS,
    },
  });
}

function slots(out: string, pattern: RegExp): string[] {
  return [...out.matchAll(pattern)].map((m) => m[1] ?? '');
}
const FIRED = /tick\.yaml: firing \(due ([^)]+)\)/g;
/** The run each firing made, named on its firing line (said once the run exists). */
const FIRED_RUN = /tick\.yaml: firing \(due [^)]+\): run (\S+)/g;
/** Slots this replica claimed and gave back: the SIGTERM that ended the test came before its run was made. */
const CUT = /tick\.yaml: the firing due (\S+) was stopped before its run was made: not counted as fired/g;
/** Slots this replica owned and did not fire: its own previous run, or the other's, was still going. */
const SKIPPED = /tick\.yaml: skipped the firing due (\S+): /g;
const ELSEWHERE = /tick\.yaml: the firing due (\S+) was already handled by another mediabatch schedule/g;

async function until(what: string, check: () => boolean, ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function twoReplicas(env: RunEnv, state: (dir: string) => string): Promise<void> {
  writeFileSync(join(env.dir, 'tick.yaml'), MANIFEST);
  const replicas = [replica(env, state(env.dir)), replica(env, state(env.dir))];
  try {
    const [a, b] = replicas as [Child, Child];
    const finished = () => `${a.stdout()}${b.stdout()}`.match(/: run tick-\S+ finished:/g)?.length ?? 0;
    const bothTalked = () =>
      slots(a.stdout(), ELSEWHERE).length > 0 && slots(b.stdout(), ELSEWHERE).length > 0;
    await until('four finished runs, and each replica having seen one fired elsewhere', () => {
      return finished() >= 4 && bothTalked();
    });
    // Which replica wins a slot is a race: on a loaded machine one can win every slot it could fire (the
    // other's wins fall while the winner's run is still going, and are skipped). The one that fired then
    // stops, and the other, alone on the state now, fires the next slot and finishes that run.
    const quiet = [a, b].find((r) => slots(r.stdout(), FIRED).length === 0);
    if (quiet !== undefined) {
      const busy = quiet === a ? b : a;
      busy.proc.kill('SIGTERM');
      await busy.exited;
      await until('the other replica firing a slot and finishing its run', () =>
        /: run tick-\S+ finished:/.test(quiet.stdout()),
      );
    }
  } finally {
    for (const r of replicas) r.proc.kill('SIGTERM');
  }
  const codes = await Promise.all(replicas.map((r) => r.exited));
  for (const [i, r] of replicas.entries()) {
    expect([EXIT.ok, EXIT.interrupted], `replica ${i}: ${r.stderr()}`).toContain(codes[i]);
  }
  const [a, b] = replicas.map((r) => r.stdout()) as [string, string];
  const firedA = slots(a, FIRED);
  const firedB = slots(b, FIRED);
  const ownedA = [...firedA, ...slots(a, SKIPPED)];
  const ownedB = [...firedB, ...slots(b, SKIPPED)];
  // Every slot is owned (fired, or skipped with a reason) by exactly one replica; the other, when it was
  // up, says it was handled elsewhere. A slot a replica claimed and gave back when the test stopped it
  // before its run was made is owned by none, or fired by the other replica then.
  expect(ownedA.filter((s) => ownedB.includes(s))).toEqual([]);
  const elsewhereA = slots(a, ELSEWHERE);
  const elsewhereB = slots(b, ELSEWHERE);
  expect(elsewhereA.length).toBeGreaterThan(0);
  expect(elsewhereB.length).toBeGreaterThan(0);
  const claimedA = [...ownedA, ...slots(a, CUT)];
  const claimedB = [...ownedB, ...slots(b, CUT)];
  for (const s of elsewhereA) expect(claimedB, `A says ${s} was handled elsewhere`).toContain(s);
  for (const s of elsewhereB) expect(claimedA, `B says ${s} was handled elsewhere`).toContain(s);
  expect(firedA.length).toBeGreaterThan(0);
  expect(firedB.length).toBeGreaterThan(0);

  // One run per fired slot, with its own id; the sandbox was asked once per task the runs sent.
  const store = openStore(state(env.dir));
  try {
    const runs = store.runs.listRuns({ manifestPath: join(env.dir, 'tick.yaml') });
    // A firing is said once its run exists, naming it: the runs are exactly the ones the firings named (a
    // firing the test's SIGTERM cut before its run was made says so, and names none; one that finishes a run
    // a stopped replica left unfinished names that run again).
    const named = [...slots(a, FIRED_RUN), ...slots(b, FIRED_RUN)];
    expect(named).toHaveLength(firedA.length + firedB.length);
    expect(runs.map((r) => r.id).sort()).toEqual([...new Set(named)].sort());
    const sent = runs.flatMap((r) => store.tasks.tasksOfRun(r.id)).filter((t) => t.state !== 'pending');
    expect(env.state().jobs).toHaveLength(sent.length);
    expect(runs.filter((r) => store.tasks.countTasksByState(r.id).done === 2).length).toBeGreaterThanOrEqual(
      4,
    );
  } finally {
    store.close();
  }
}

/** Two replicas in a folder and a sandbox of their own, on the state `state` names in that folder. */
async function inOwnFolder(state: (dir: string) => string): Promise<void> {
  const env = await makeRunEnv({ balance: 1000 });
  try {
    await twoReplicas(env, state);
  } finally {
    await env.close();
  }
}

// The two backends at once: each test waits on the clock (slots 2 s apart), not the CPU, and nothing is
// shared between them but the PostgreSQL server.
describe.concurrent('two mediabatch schedule replicas on one state', () => {
  it('on PostgreSQL: one run per period, the other replica says it was fired elsewhere', async () => {
    const database = pg.freshDatabase();
    await inOwnFolder(() => database);
  }, 150_000);

  it('on one SQLite file: the same', async () => {
    await inOwnFolder((dir) => join(dir, 'state.db'));
  }, 150_000);
});

/** A talking avatar priced from its measured inputs: a firing measures them before it makes its run. */
function avatarManifest(media: string): string {
  return [
    'version: 1',
    'name: tick',
    'run: "{{name}}-{{datetime}}"',
    'schedule: "*/15 * * * * *"',
    'timezone: UTC',
    'output: out',
    'tasks:',
    '  - id: talk',
    '    model: ai-talking-avatar-video',
    `    input: { video_url: "${media}/video-12s.mp4", audio_url: "${media}/speech-8s.mp3" }`,
    '',
  ].join('\n');
}

/**
 * Two replicas; the one that claims the first slot is held while it measures the inputs (the media server
 * does not answer yet) and killed there with kill -9, found by the claim's holder in the state. The other
 * takes the slot over and fires it: one run for the slot, the sandbox asked once.
 */
async function killedClaimer(state: (dir: string) => string): Promise<void> {
  const env = await makeRunEnv({ balance: 1000 });
  const held: ServerResponse[] = [];
  let holding = true;
  const media: Served = await serveFixtures({
    ranges: true,
    routes: (_req, res) => {
      if (!holding) return false;
      held.push(res);
      return true;
    },
  });
  const replicas: Child[] = [];
  try {
    writeFileSync(join(env.dir, 'tick.yaml'), avatarManifest(media.base));
    replicas.push(replica(env, state(env.dir), true), replica(env, state(env.dir), true));
    const path = join(env.dir, 'tick.yaml');
    const claimOf = () => {
      const store = openStore(state(env.dir));
      try {
        return store.schedules.getSchedule(path);
      } finally {
        store.close();
      }
    };
    await until('a replica claiming a slot and measuring its inputs', () => {
      return held.length > 0 && claimOf()?.claim !== undefined;
    });
    const row = claimOf();
    const slot = row?.lastFiredAt ?? new Date(0);
    const holder = row?.claim?.holder ?? '';
    const killed = replicas.find((r) => holder.startsWith(`${r.proc.pid}@`));
    const survivor = replicas.find((r) => r !== killed);
    if (killed === undefined || survivor === undefined)
      throw new Error(`no replica holds the claim (${holder})`);
    killed.proc.kill('SIGKILL');
    expect(await killed.exited).toBe('SIGKILL');
    for (const res of held.splice(0)) res.destroy();
    holding = false;

    const due = formatInZone(slot, 'UTC');
    const firedRun = () => /^run (\S+)/.exec(survivor.stdout().split(`firing (due ${due}): `)[1] ?? '')?.[1];
    await until('the other replica firing the slot and finishing its run', () => {
      const run = firedRun();
      return run !== undefined && survivor.stdout().includes(`: run ${run} finished:`);
    }).catch((error: Error) => {
      // What the survivor said is what tells why.
      throw new Error(`${error.message}; it said:\n${survivor.stdout()}${survivor.stderr()}`);
    });
    survivor.proc.kill('SIGTERM');
    expect([EXIT.ok, EXIT.interrupted], survivor.stderr()).toContain(await survivor.exited);

    const out = survivor.stdout();
    expect(out).toContain(
      `tick.yaml: the firing due ${due} was claimed by ${holder}, which is gone without making its run: taking it`,
    );
    const firings = [...out.matchAll(/tick\.yaml: firing \(due ([^)]+)\): run (\S+)/g)];
    expect(firings.filter((m) => m[1] === due)).toHaveLength(1);
    expect(killed.stdout()).not.toContain(`firing (due ${due})`);
    const runId = firings.find((m) => m[1] === due)?.[2];
    const store = openStore(state(env.dir));
    try {
      // One run per fired slot: the slot's run, and any later slot the survivor fired before it stopped.
      const runs = store.runs.listRuns({ manifestPath: path }).map((r) => r.id);
      expect(runs.sort()).toEqual(firings.map((m) => m[2]).sort());
      expect(runs).toContain(runId);
      expect(store.tasks.countTasksByState(runId ?? '').done).toBe(1);
      const sent = runs.flatMap((id) => store.tasks.tasksOfRun(id)).filter((t) => t.state !== 'pending');
      expect(env.state().jobs).toHaveLength(sent.length);
    } finally {
      store.close();
    }
  } finally {
    for (const r of replicas)
      if (r.proc.exitCode === null && r.proc.signalCode === null) r.proc.kill('SIGKILL');
    await Promise.all(replicas.map((r) => r.exited));
    for (const res of held) res.destroy();
    await media.close();
    await env.close();
  }
}

describe.concurrent('a schedule replica killed between claiming a slot and making its run', () => {
  it('on PostgreSQL: the other replica fires that slot, once', async () => {
    const database = pg.freshDatabase();
    await killedClaimer(() => database);
  }, 150_000);

  it('on one SQLite file: the same', async () => {
    await killedClaimer((dir) => join(dir, 'state.db'));
  }, 150_000);
});
