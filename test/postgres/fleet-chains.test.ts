// Chains across worker processes, end to end: three `mediabatch run` workers on one PostgreSQL state, a
// manifest of stills each followed by a clip made from the still's result, and one worker killed with
// SIGKILL mid-run. What the user would check, read from outside the workers: the sandbox got each clip
// once, made from the very bytes its still delivered to the bucket; every done task's result is in the
// bucket once; the ledger (plus what is in doubt) is the sandbox's books; the run is closed once.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetStage, jobsByPrompt, sandboxNet, startFleetStage } from '../helpers/fleet.js';

const RUN = 'chains';
const PAIRS = 6;

let stage: FleetStage;
beforeAll(async () => {
  stage = await startFleetStage(['--speed', '0.05', '--latency', '5']);
});
afterAll(async () => {
  await stage?.close();
});

const micro = (tokens: number) => Math.round(tokens * 1e6);

/** The bytes of a bucket object, as the S3 server keeps them on disk. */
function objectBytes(key: string): Buffer {
  return readFileSync(join(stage.s3.dir, stage.s3.bucket, `${key}._S3rver_object`));
}

async function until(check: () => Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('chains across the workers of a fleet', () => {
  it('sends each downstream once, with its upstream’s result, while a worker is killed mid-run', async () => {
    const file = await stage.manifest('chains.yaml', {
      name: RUN,
      concurrency: 3,
      tasks: [
        { id: 'still-{{index}}', model: 'flat-image', repeat: PAIRS, input: { prompt: 'still {{index}}' } },
        {
          id: 'clip-{{index}}',
          model: 'studio-2-6',
          repeat: PAIRS,
          after: 'still-{{index}}',
          input: { prompt: 'clip {{index}}', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
        },
      ],
    });
    const state = stage.database();
    const args = ['run', file, '--yes', '--run-id', RUN];
    // Started together, as a Deployment starts its pods: the first plans the run, the others join it.
    const crew = [stage.spawn(state, args), stage.spawn(state, args), stage.spawn(state, args)];
    // Killed once the chains are under way: stills done and clips sent, others still to come.
    let seen = '';
    await until(async () => {
      const jobs = (await stage.sandbox()).jobs;
      seen = jobs.map((j) => `${(j.request as { prompt: string }).prompt}:${j.status}`).join(', ');
      const clips = jobs.filter((j) => j.model === 'studio-2-6');
      return clips.length >= 2 && clips.some((j) => j.status !== 'success' && j.status !== 'failed');
    }, 'the first clips to be sent').catch((error: Error) => {
      throw new Error(`${error.message}; the sandbox has ${seen}`);
    });
    const victim = crew[1];
    victim?.proc.kill('SIGKILL');
    const codes = await Promise.all(crew.map((w) => w.exited));
    const logs = crew.map((w) => `${w.stdout()}${w.stderr()}`).join('\n---\n');
    expect(codes[1], logs).toBe('SIGKILL');
    // A still the victim was sending is in doubt (its clip blocked): the run ends with 2, else 0.
    for (const code of [codes[0], codes[2]]) expect([0, 2], logs).toContain(code);

    const books = await stage.sandbox();
    const byPrompt = jobsByPrompt(books);
    const taskState = new Map(
      stage.sql(state, `SELECT task_id, state FROM tasks WHERE run_id = '${RUN}'`).map(([id, s]) => [id, s]),
    );
    // Each task sent once at most.
    expect([...byPrompt].filter(([, jobs]) => jobs.length > 1).map(([p]) => p)).toEqual([]);

    // Each clip was sent after its still was done, made from the bytes the still put in the bucket.
    const objects = stage.objects();
    const clips = books.jobs.filter((j) => j.model === 'studio-2-6');
    expect(clips.length).toBeGreaterThanOrEqual(2);
    for (const clip of clips) {
      const index = String((clip.request as { prompt: string }).prompt).split(' ')[1];
      expect(taskState.get(`still-${index}`)).toBe('done');
      const still = objects.filter((key) => key.split('/')[2] === `still-${index}`);
      expect(still).toHaveLength(1);
      const sent = await request(String((clip.request as { image_url: string }).image_url));
      expect(sent.statusCode).toBe(200);
      expect(Buffer.from(await sent.body.arrayBuffer()).equals(objectBytes(still[0] as string))).toBe(true);
    }
    // A clip whose still is not done was never sent, and is said blocked.
    for (let i = 1; i <= PAIRS; i++) {
      if (taskState.get(`still-${i}`) === 'done') continue;
      expect(byPrompt.has(`clip ${i}`)).toBe(false);
      expect(taskState.get(`clip-${i}`)).toBe('blocked');
    }

    // Every done task has its result in the bucket once, and nothing else is there.
    const done = [...taskState].filter(([, s]) => s === 'done').map(([id]) => id);
    expect(done.length).toBeGreaterThanOrEqual(PAIRS);
    expect(objects.map((key) => key.split('/')[2]).sort()).toEqual([...done].sort());

    // The money: the ledger plus what tasks in doubt were charged is the sandbox's books.
    const ledger = stage.sql(state, `SELECT img_uuid, kind, tokens FROM ledger WHERE run_id = '${RUN}'`);
    const booked = new Set(ledger.filter((r) => r[1] === 'charge').map((r) => r[0]));
    const ledgerNet = ledger.reduce(
      (n, [, kind, t]) => n + (kind === 'charge' ? 1 : -1) * micro(Number(t)),
      0,
    );
    let inDoubt = 0;
    for (const [prompt, jobs] of byPrompt) {
      for (const job of jobs) {
        if (booked.has(job.img_uuid)) continue;
        // Charged while nobody recorded the answer: only a task in doubt may be so.
        expect(taskState.get(prompt.replace(' ', '-'))).toBe('in_doubt');
        inDoubt += micro(job.cost) - micro(job.refunded);
      }
    }
    expect(ledgerNet + inDoubt).toBe(sandboxNet(books));
    expect(stage.read(state, (store) => store.runs.getRun(RUN)?.state)).toBe('finished');
    // The kill did happen to a worker of the run, and the work was shared.
    const [lost, senders] =
      stage.sql(
        state,
        `SELECT (SELECT count(*) FROM workers WHERE run_id = '${RUN}' AND lost_at IS NOT NULL),
              (SELECT count(DISTINCT worker_id) FROM attempts WHERE run_id = '${RUN}')`,
      )[0] ?? [];
    expect(Number(lost)).toBe(1);
    expect(Number(senders)).toBeGreaterThan(1);
  }, 90_000);
});
