// Chains. A downstream task waits for its upstream, receives exactly its result (links, ids,
// sheet fields), is priced exactly before it is sent, and is blocked with nothing charged when its
// upstream fails. Over real HTTP against the sandbox, with real SQLite files.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startFaultProxy } from '../helpers/fault-proxy.js';
import { makeRunEnv, type RunEnv, type TaskDecl, taskStates, voiceToAvatar } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** The request the sandbox received for a task, by its img_uuid in the state database. */
function requestOf(e: RunEnv, taskId: string): Record<string, unknown> {
  const [row] = e.query<{ img_uuid: string }>('SELECT img_uuid FROM tasks WHERE task_id = ?', taskId);
  const job = e.state().jobs.find((j) => j.img_uuid === row?.img_uuid);
  if (!job) throw new Error(`no job for ${taskId}`);
  return job.request as Record<string, unknown>;
}

/** The result items of a task's job, as its job.json on disk keeps them. */
function itemsOf(e: RunEnv, taskId: string): Array<Record<string, unknown>> {
  const jobFile = JSON.parse(readFileSync(join(e.dir, 'out', 'batch', taskId, 'job.json'), 'utf8'));
  return jobFile.job.json as Array<Record<string, unknown>>;
}

const withoutQuery = (url: unknown) => String(url).split('?')[0];

/** A still, and a clip that animates it: the smallest chain. */
const STILL_TO_CLIP: TaskDecl[] = [
  { id: 'still', model: 'flat-image', input: { prompt: 'a mug' } },
  {
    id: 'clip',
    model: 'studio-2-6',
    after: 'still',
    input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
  },
];

describe('chains', () => {
  it.each([
    ['', []],
    [' (with every quirk of the real service)', ['all']],
  ])(
    'hands each downstream exactly its upstream result: an image link, a speech link, a song id, sheet fields%s',
    async (_, quirks) => {
      env = await makeRunEnv({ quirks });
      const sandbox = env.sandbox.baseUrl;
      const tasks: TaskDecl[] = [
        {
          id: 'clip',
          model: 'studio-2-6',
          after: { still: 'still' },
          input: { prompt: 'turn', image_url: '{{after.still.image}}', duration: 5, resolution: '720p' },
        },
        { id: 'still', model: 'flat-image', input: { prompt: 'a mug' } },
        {
          id: 'voice',
          model: 'speech-v3',
          input: { text: 'Hello from Acme, where every mug is made by hand, slowly, in our workshop.' },
        },
        {
          id: 'avatar',
          model: 'ai-talking-avatar-video',
          after: 'voice',
          input: {
            video_url: `${sandbox}/_sandbox/media/talking-head.mp4`,
            audio_url: '{{after.audio}}',
            video_mode: 'loop',
            resolution: '540p',
          },
        },
        {
          id: 'song',
          model: 'song-replace-section',
          input: {
            audio_url: `${sandbox}/_sandbox/media/song.mp3`,
            infill_start_s: 12,
            infill_end_s: 24,
            lyrics: 'la',
            full_lyrics: 'la la',
            style: 'pop',
            title: 'Mornings',
          },
        },
        {
          id: 'bridge',
          model: 'song-replace-section',
          after: 'song',
          input: {
            task_id: '{{after.img_uuid}}',
            audio_id: '{{after.songs.2.audio_id}}',
            infill_start_s: 2,
            infill_end_s: 12,
            lyrics: 'bridge',
            full_lyrics: 'la bridge',
            style: '{{after.songs.2.style}}',
            title: '{{after.songs.2.title}} (bridge)',
          },
        },
        {
          id: 'hero',
          model: 'oc-maker',
          input: {
            prompt: 'Invent a mascot as JSON with name and oc_prompt',
            image_render_model: 'render-a',
          },
        },
        {
          id: 'poster',
          model: 'flat-image',
          after: 'hero',
          input: { prompt: 'A poster of {{after.sheet.name}}: {{after.sheet.oc_prompt}}' },
        },
      ];
      const file = await env.manifest({ tasks, concurrency: 8 });
      const result = await env.run(['run', file, '--yes']);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(Object.values(taskStates(env))).toEqual(Array(8).fill('done'));

      const stillLink = itemsOf(env, 'still')[0]?.value;
      expect(withoutQuery(requestOf(env, 'clip').image_url)).toBe(withoutQuery(stillLink));
      const voiceLink = itemsOf(env, 'voice')[0]?.value;
      expect(withoutQuery(requestOf(env, 'avatar').audio_url)).toBe(withoutQuery(voiceLink));

      const [songRow] = env.query<{ img_uuid: string }>("SELECT img_uuid FROM tasks WHERE task_id = 'song'");
      const song2 = itemsOf(env, 'song')[1] ?? {};
      const bridge = requestOf(env, 'bridge');
      expect(bridge.task_id).toBe(songRow?.img_uuid);
      expect(bridge.audio_id).toBe(song2.audio_id);
      expect(bridge.style).toBe(song2.style);
      expect(bridge.title).toBe(`${String(song2.title)} (bridge)`);

      const sheet = itemsOf(env, 'hero').find((i) => i.type === 'json')?.value as Record<string, unknown>;
      expect(requestOf(env, 'poster').prompt).toBe(
        `A poster of ${String(sheet.name)}: ${String(sheet.oc_prompt)}`,
      );

      // Nothing was sent before its upstream was done: each downstream job came after its upstream's end.
      const jobs = env.state().jobs;
      const at = (taskId: string) => {
        const [row] =
          env?.query<{ img_uuid: string }>('SELECT img_uuid FROM tasks WHERE task_id = ?', taskId) ?? [];
        return jobs.findIndex((j) => j.img_uuid === row?.img_uuid);
      };
      const pairs: Array<[string, string]> = [
        ['clip', 'still'],
        ['avatar', 'voice'],
        ['bridge', 'song'],
        ['poster', 'hero'],
      ];
      for (const [down, up] of pairs) expect(at(down)).toBeGreaterThan(at(up));
      // The stored request is the one sent; the planned one (references and all) is kept beside it.
      const [avatarRow] = env.query<{ body: string; planned_body: string }>(
        "SELECT body, planned_body FROM tasks WHERE task_id = 'avatar'",
      );
      expect(JSON.parse(avatarRow?.body ?? '{}').audio_url).toBe(requestOf(env, 'avatar').audio_url);
      expect(JSON.parse(avatarRow?.planned_body ?? '{}').audio_url).toBe('{{after.audio}}');

      // The reports and the gallery show each task's upstreams.
      const runDir = join(env.dir, 'out', 'batch');
      const report = JSON.parse(readFileSync(join(runDir, 'report.json'), 'utf8')) as {
        tasks: Array<{ id: string; after: unknown; planned_estimate: unknown }>;
      };
      expect(report.tasks.find((t) => t.id === 'clip')?.after).toEqual([{ name: 'still', task: 'still' }]);
      expect(report.tasks.find((t) => t.id === 'avatar')?.planned_estimate).toMatchObject({
        min: 3,
        max: 60,
      });
      expect(report.tasks.find((t) => t.id === 'still')?.after).toEqual([]);
      expect(readFileSync(join(runDir, 'report.csv'), 'utf8')).toMatch(/^clip,studio-2-6,.*,still=still,/m);
      expect(readFileSync(join(runDir, 'report.md'), 'utf8')).toContain('| `avatar` ← `voice` |');
      expect(readFileSync(join(runDir, 'index.html'), 'utf8')).toContain(
        '"up":[{"n":"still","t":"still","f":"still"}]',
      );
    },
  );

  it('prices a downstream exactly once its upstream is done: the plan range becomes the measured length', async () => {
    env = await makeRunEnv();
    const sandbox = env.sandbox.baseUrl;
    const tasks: TaskDecl[] = [
      {
        id: 'voice',
        model: 'speech-v3',
        input: { text: 'A line for the presenter to say, long enough for a few seconds of speech.' },
      },
      {
        id: 'avatar',
        model: 'ai-talking-avatar-video',
        after: 'voice',
        input: {
          video_url: `${sandbox}/_sandbox/media/talking-head.mp4`,
          audio_url: '{{after.audio}}',
          video_mode: 'loop',
          resolution: '720p',
        },
      },
    ];
    const file = await env.manifest({ tasks });
    const plan = await env.run(['plan', file]);
    expect(plan.stderr).toBe('');
    expect(plan.code).toBe(0);
    // 3 to 60 s at 1.5 tokens (720p) until the speech exists.
    expect(plan.stdout).toMatch(/avatar +ai-talking-avatar-video +4\.5–90 /);
    expect(plan.stdout).toContain(
      'length of {{after.audio}} known once voice (speech-v3) is done, priced exactly then',
    );
    const run = await env.run(['run', file, '--yes']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    // The progress line's estimate tightened from the plan's 92 to what was charged.
    expect(run.stdout).toContain('0/2 finished · 0 done · 0 of ~92 tokens');
    expect(run.stdout).toMatch(/2\/2 finished · 2 done · ([\d.]+) of ~\1 tokens/);
    const [row] = env.query<{
      est_tokens: number;
      est_min: number;
      est_max: number;
      est_basis: string;
      cost: number;
      planned_estimate: string;
    }>(
      "SELECT est_tokens, est_min, est_max, est_basis, cost, planned_estimate FROM tasks WHERE task_id = 'avatar'",
    );
    expect(row?.est_min).toBe(row?.est_max);
    expect(row?.est_basis).toMatch(/^\d+ s \([\d.]+ s measured, rounded up\) × 1\.5 tokens \(720p\)$/);
    // The exact price is what the sandbox charged; the plan's range is kept for the report.
    expect(row?.cost).toBe(row?.est_tokens);
    expect(JSON.parse(row?.planned_estimate ?? '{}')).toMatchObject({ min: 4.5, max: 90 });
  });

  it('blocks the downstream of a failed upstream: never submitted, nothing charged, said why; a run that resubmits the upstream unblocks it', async () => {
    env = await makeRunEnv();
    const tasks: TaskDecl[] = [
      { id: 'still', model: 'flat-image', input: { prompt: 'SANDBOX_FAIL a mug' } },
      {
        id: 'clip',
        model: 'studio-2-6',
        after: 'still',
        input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
      },
      { id: 'other', model: 'flat-image', input: { prompt: 'a cap' } },
    ];
    const file = await env.manifest({ tasks });
    const balance = env.state().balance;
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(2);
    expect(taskStates(env)).toEqual({ still: 'failed', clip: 'blocked', other: 'done' });
    const [clip] = env.query<{ error: string; img_uuid: string | null }>(
      "SELECT error, img_uuid FROM tasks WHERE task_id = 'clip'",
    );
    expect(clip?.img_uuid).toBeNull();
    expect(clip?.error).toMatch(
      /^waits for still, which failed \(.*\): never submitted, nothing charged; run again with --retry-failed/,
    );
    // Two jobs (still, refunded; other), none for the clip; only the cap's image is paid.
    expect(env.state().jobs).toHaveLength(2);
    expect(env.state().balance).toBe(balance - 0.2);
    expect(result.stdout).toContain('1 blocked');
    // status lists the chained task with what it waits for, and --json gives the same.
    const status = await env.run(['status', 'batch']);
    expect(status.stdout).toMatch(/^clip +blocked +still \(failed\)$/m);
    const json = JSON.parse((await env.run(['status', 'batch', '--json'])).stdout) as { chains: unknown };
    expect(json.chains).toEqual([
      { task: 'clip', state: 'blocked', after: [{ name: '', task: 'still', state: 'failed' }] },
    ]);

    // The still's prompt is fixed; --accept-changes sends it again, and the clip follows.
    await env.manifest({
      tasks: [
        { ...tasks[0], input: { prompt: 'a mug' } } as TaskDecl,
        tasks[1] as TaskDecl,
        tasks[2] as TaskDecl,
      ],
    });
    const again = await env.run(['run', file, '--yes', '--accept-changes']);
    expect(again.code).toBe(0);
    expect(taskStates(env)).toEqual({ still: 'done', clip: 'done', other: 'done' });
  });

  it('passes on a link only while it lives: an upstream whose links expired is not sent on, nothing charged, said why', async () => {
    env = await makeRunEnv({ linkTtlSeconds: 1 });
    const tasks = STILL_TO_CLIP;
    const file = await env.manifest({ tasks });
    const first = await env.run(['run', file, '--yes', '--only', 'still']);
    expect(first.code).toBe(4);
    expect(taskStates(env)).toEqual({ still: 'done', clip: 'pending' });
    await new Promise((r) => setTimeout(r, 1_200));
    const polls = env.state().requests.poll;
    const second = await env.run(['run', file, '--yes']);
    expect(second.code).toBe(2);
    // A new process has no record of the still's links: it asked the service again before deciding.
    expect(env.state().requests.poll).toBeGreaterThan(polls);
    expect(taskStates(env)).toEqual({ still: 'done', clip: 'rejected' });
    const [clip] = env.query<{ error: string; img_uuid: string | null }>(
      "SELECT error, img_uuid FROM tasks WHERE task_id = 'clip'",
    );
    expect(clip?.img_uuid).toBeNull();
    expect(clip?.error).toMatch(
      /^not sent: still: its result links expired at \S+ and a fresh job record does not renew them; submit still again/,
    );
    expect(env.state().jobs).toHaveLength(1);
  });

  it('fetches the upstream record again when its links are near their end, and sends the downstream with a link that works', async () => {
    // Links live 10 minutes: less than the 30 minutes a downstream's link must still have ahead of it.
    env = await makeRunEnv({ linkTtlSeconds: 600, quirks: ['link-403'] });
    const tasks = voiceToAvatar(env);
    const file = await env.manifest({ tasks });
    const result = await env.run(['run', file, '--yes']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    // The sandbox measured the speech through the link it was given (a refused link fails the job).
    expect(taskStates(env)).toEqual({ voice: 'done', avatar: 'done' });
    const [avatar] = env.query<{ cost: number; est_tokens: number }>(
      "SELECT cost, est_tokens FROM tasks WHERE task_id = 'avatar'",
    );
    expect(avatar?.cost).toBe(avatar?.est_tokens);
  });

  it('retries a passing fault while fetching the upstream record again: the downstream is sent, not left pending', async () => {
    env = await makeRunEnv({ linkTtlSeconds: 600 });
    // In front of the sandbox: the first look at a job after it was seen done is answered 500, once.
    const failedOnce = new Set<string>();
    const proxy = await startFaultProxy(env.sandbox.baseUrl, (a) => {
      if (a.imgUuid === null || !a.seenDone(a.imgUuid) || failedOnce.has(a.imgUuid)) return false;
      failedOnce.add(a.imgUuid);
      return true;
    });
    try {
      const file = await env.manifest({ tasks: voiceToAvatar(env) });
      const result = await env.run(['run', file, '--yes'], { env: { MEDIABATCH_BASE_URL: proxy.baseUrl } });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(taskStates(env)).toEqual({ voice: 'done', avatar: 'done' });
      // The voice's record was fetched again (links near their end), refused once, then given.
      expect(failedOnce.size).toBeGreaterThanOrEqual(1);
      expect(env.state().jobs).toHaveLength(2);
    } finally {
      await proxy.close();
    }
  });

  it('submits the downstream anew when its upstream is submitted anew with --accept-changes: it needs the new result', async () => {
    env = await makeRunEnv();
    const tasks: TaskDecl[] = [
      { id: 'still', model: 'flat-image', input: { prompt: 'a mug' } },
      {
        id: 'clip',
        model: 'studio-2-6',
        after: 'still',
        input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
      },
      { id: 'other', model: 'flat-image', input: { prompt: 'a cap' } },
    ];
    const file = await env.manifest({ tasks });
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    const firstClip = requestOf(env, 'clip').image_url;
    // Unchanged: nothing is sent again, the filled-in clip included.
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    expect(env.state().jobs).toHaveLength(3);

    await env.manifest({
      tasks: [
        { ...(tasks[0] as TaskDecl), input: { prompt: 'a red mug' } },
        tasks[1] as TaskDecl,
        tasks[2] as TaskDecl,
      ],
    });
    const refused = await env.run(['run', file, '--yes']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      '1 task was already sent with a different request; run again with --accept-changes',
    );
    const again = await env.run(['run', file, '--yes', '--accept-changes']);
    expect(again.code).toBe(0);
    // The still and the clip again (the clip with the new still), the cap not.
    expect(env.state().jobs).toHaveLength(5);
    expect(taskStates(env)).toEqual({ still: 'done', clip: 'done', other: 'done' });
    const newStill = itemsOf(env, 'still')[0]?.value;
    expect(withoutQuery(requestOf(env, 'clip').image_url)).toBe(withoutQuery(newStill));
    expect(withoutQuery(requestOf(env, 'clip').image_url)).not.toBe(withoutQuery(firstClip));
  });
});

describe('chains: every reference kind, and upstreams that come back', () => {
  it('hands on a video, the N-th file, a song length as a number, lyrics, and two named upstreams at once', async () => {
    env = await makeRunEnv();
    const sandbox = env.sandbox.baseUrl;
    const tasks: TaskDecl[] = [
      { id: 'first', model: 'flat-image', input: { prompt: 'first frame' } },
      { id: 'last', model: 'flat-image', input: { prompt: 'last frame' } },
      {
        id: 'clip',
        model: 'stream-2-0-fast',
        after: { a: 'first', b: 'last' },
        input: {
          prompt: 'morph',
          image_urls: ['{{after.a.image}}', '{{after.b.files.1}}'],
          duration: 4,
          quality: '480p',
        },
      },
      {
        id: 'dance',
        model: 'ai_dance_move',
        after: 'clip',
        input: {
          image_url: `${sandbox}/_sandbox/media/full-body.png`,
          video_url: '{{after.video}}',
          resolution: '480p',
        },
      },
      {
        id: 'song',
        model: 'song-replace-section',
        input: {
          audio_url: `${sandbox}/_sandbox/media/song.mp3`,
          infill_start_s: 12,
          infill_end_s: 24,
          lyrics: '[Chorus] la',
          full_lyrics: '[Verse] mornings [Chorus] la la',
          style: 'pop',
          title: 'Mornings',
        },
      },
      {
        id: 'outro',
        model: 'song-replace-section',
        after: 'song',
        input: {
          task_id: '{{after.img_uuid}}',
          audio_id: '{{after.songs.1.audio_id}}',
          infill_start_s: 20,
          infill_end_s: '{{after.songs.1.audio_duration}}',
          lyrics: '[Outro] bye',
          full_lyrics: '{{after.songs.1.lyrics}} [Outro] bye',
          style: 'pop',
          title: 'Mornings (outro)',
        },
      },
      {
        id: 'cover',
        model: 'voice-cover',
        after: 'song',
        input: {
          audio_url: '{{after.files.2}}',
          reference_audio_url: `${sandbox}/_sandbox/media/voice.wav`,
        },
      },
    ];
    const file = await env.manifest({ tasks, concurrency: 4 });
    const plan = await env.run(['plan', file]);
    expect(plan.code).toBe(0);
    // stream-2-0-fast of duration 4 makes a 4 s video: the dance is priced exactly from the plan on.
    expect(plan.stdout).toMatch(/dance +ai_dance_move +8 /);
    expect(plan.stdout).toContain('{{after.video}}: 4 s, as clip (stream-2-0-fast) is asked to make');
    const result = await env.run(['run', file, '--yes']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(new Set(Object.values(taskStates(env)))).toEqual(new Set(['done']));

    const clip = requestOf(env, 'clip');
    expect((clip.image_urls as string[]).map(withoutQuery)).toEqual([
      withoutQuery(itemsOf(env, 'first')[0]?.value),
      withoutQuery(itemsOf(env, 'last')[0]?.value),
    ]);
    expect(withoutQuery(requestOf(env, 'dance').video_url)).toBe(
      withoutQuery(itemsOf(env, 'clip')[0]?.value),
    );
    const songs = itemsOf(env, 'song');
    const outro = requestOf(env, 'outro');
    // A lone reference keeps its type: the song's length is a number on the wire.
    expect(outro.infill_end_s).toBe(songs[0]?.audio_duration);
    expect(typeof outro.infill_end_s).toBe('number');
    expect(outro.full_lyrics).toBe(`${String(songs[0]?.lyrics)} [Outro] bye`);
    expect(withoutQuery(requestOf(env, 'cover').audio_url)).toBe(withoutQuery(songs[1]?.value));
    // The voice cover is billed by the song it was given (its second version), exactly.
    const [cover] = env.query<{ cost: number; est_tokens: number }>(
      "SELECT cost, est_tokens FROM tasks WHERE task_id = 'cover'",
    );
    expect(cover?.cost).toBe(Math.ceil(Number(songs[1]?.audio_duration)) * 0.02);
    expect(cover?.cost).toBe(cover?.est_tokens);
  });

  it('blocks the downstream of an upstream in doubt, nothing charged for it; --retry-in-doubt settles the upstream and the downstream follows', async () => {
    env = await makeRunEnv({ chargeThenErrorRate: 1 });
    const tasks = STILL_TO_CLIP;
    const file = await env.manifest({ tasks });
    const balance = env.state().balance;
    const first = await env.run(['run', file, '--yes']);
    expect(first.code).toBe(2);
    expect(taskStates(env)).toEqual({ still: 'in_doubt', clip: 'blocked' });
    const [clip] = env.query<{ error: string }>("SELECT error FROM tasks WHERE task_id = 'clip'");
    expect(clip?.error).toBe(
      'waits for still, which is in doubt (its charge is unknown): never submitted, nothing charged; run again with --retry-in-doubt to settle it, and this task follows',
    );
    // The still was charged (its answer lost); the clip never reached the service.
    expect(env.state().jobs).toHaveLength(1);
    expect(env.state().balance).toBe(balance - 0.2);

    env.sandbox.configure({ chargeThenErrorRate: 0 });
    const retry = await env.run(['run', file, '--yes', '--retry-in-doubt']);
    expect(retry.stderr).toBe('');
    expect(retry.code).toBe(0);
    expect(taskStates(env)).toEqual({ still: 'done', clip: 'done' });
    // The still twice (the lost answer's charge stays: it was in doubt), the clip once, with the new still.
    expect(env.state().jobs).toHaveLength(3);
    expect(env.state().balance).toBeCloseTo(balance - 0.2 - 0.2 - 10.5, 6);
    expect(withoutQuery(requestOf(env, 'clip').image_url)).toBe(
      withoutQuery(itemsOf(env, 'still')[0]?.value),
    );
  });

  it('blocks the downstream of a failed upstream; --retry-failed submits the upstream again and the downstream follows', async () => {
    env = await makeRunEnv({ failRate: 1 });
    const tasks = STILL_TO_CLIP;
    const file = await env.manifest({ tasks });
    const balance = env.state().balance;
    expect((await env.run(['run', file, '--yes'])).code).toBe(2);
    expect(taskStates(env)).toEqual({ still: 'failed', clip: 'blocked' });
    // Charged and refunded: nothing spent, and nothing sent for the clip.
    expect(env.state().jobs).toHaveLength(1);
    expect(env.state().balance).toBeCloseTo(balance, 6);

    env.sandbox.configure({ failRate: 0 });
    const retry = await env.run(['run', file, '--yes', '--retry-failed']);
    expect(retry.code).toBe(0);
    expect(taskStates(env)).toEqual({ still: 'done', clip: 'done' });
    expect(env.state().jobs).toHaveLength(3);
    expect(env.state().balance).toBeCloseTo(balance - 0.2 - 10.5, 6);
  });

  it('blocks the downstream of an unfetched upstream; the next run fetches the result and the downstream follows', async () => {
    env = await makeRunEnv();
    env.sandbox.configure({ refuseDownloads: true });
    const tasks = STILL_TO_CLIP;
    const file = await env.manifest({ tasks });
    const balance = env.state().balance;
    const first = await env.run(['run', file, '--yes']);
    expect(first.code).toBe(4);
    expect(taskStates(env)).toEqual({ still: 'unfetched', clip: 'blocked' });
    expect(env.state().jobs).toHaveLength(1);
    expect(env.state().balance).toBe(balance - 0.2);

    env.sandbox.configure({ refuseDownloads: false });
    const second = await env.run(['run', file, '--yes']);
    expect(second.code).toBe(0);
    expect(taskStates(env)).toEqual({ still: 'done', clip: 'done' });
    // The still was not submitted again: one job each.
    expect(env.state().jobs).toHaveLength(2);
    expect(env.state().balance).toBeCloseTo(balance - 0.2 - 10.5, 6);
    expect(await env.files('out/batch')).toEqual(expect.arrayContaining(['still/1.png', 'clip/1.mp4']));
  });

  it('keeps the budget a hard cap when the upstream result makes the downstream dearer than the plan said: not sent', async () => {
    env = await makeRunEnv();
    const sandbox = env.sandbox.baseUrl;
    const tasks: TaskDecl[] = [
      {
        id: 'avatar',
        model: 'ai-talking-avatar-video',
        input: {
          video_url: `${sandbox}/_sandbox/media/talking-head.mp4`,
          audio_url: `${sandbox}/_sandbox/media/speech.mp3`,
          duration: 3,
          resolution: '540p',
        },
      },
      {
        id: 'dance',
        model: 'ai_dance_move',
        after: 'avatar',
        input: {
          image_url: `${sandbox}/_sandbox/media/full-body.png`,
          video_url: '{{after.video}}',
          resolution: '480p',
        },
      },
    ];
    // The plan: avatar 3 s × 1 = 3, the dance 3 s (what the avatar is asked to make) × 2 = 6; 9 in all.
    const file = await env.manifest({ tasks, budget: 9.5 });
    const plan = await env.run(['plan', file]);
    expect(plan.stdout).toMatch(/dance +ai_dance_move +6 /);
    const balance = env.state().balance;
    const result = await env.run(['run', file, '--yes']);
    // The avatar came back 4 s long (the sandbox's clips are): the dance would cost 8, over the 6.5 left.
    expect(taskStates(env)).toEqual({ avatar: 'done', dance: 'pending' });
    expect(env.state().jobs).toHaveLength(1);
    expect(env.state().balance).toBe(balance - 3);
    expect(result.code).toBe(4);
    expect(result.stderr).toContain(
      '1 task(s) did not fit under the budget of 9.5 tokens (6.5 tokens left; they need up to 8 tokens)',
    );
  });
});

describe('chains: --only', () => {
  it('says when --only leaves out an upstream a selected task waits for; nothing is sent, and selecting both runs the chain', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: STILL_TO_CLIP });
    const alone = await env.run(['run', file, '--yes', '--only', 'clip']);
    expect(alone.code).toBe(4);
    expect(alone.stdout).toContain(
      '--only leaves out tasks that selected ones wait for, so those stay pending: clip waits for still (pending); add the upstreams to --only',
    );
    expect(env.state().jobs).toHaveLength(0);
    const both = await env.run(['run', file, '--yes', '--only', 'still,clip']);
    expect(both.code).toBe(0);
    expect(both.stdout).not.toContain('--only leaves out');
    expect(taskStates(env)).toEqual({ still: 'done', clip: 'done' });
  });
});

describe('chains: budget', () => {
  it('preflight weighs the worst case (exit 3, nothing sent); with --allow-partial the downstream goes once its exact price fits', async () => {
    env = await makeRunEnv();
    const tasks = voiceToAvatar(env);
    // 2 for the speech, 3 to 60 for the avatar (540p): 62 at worst, over a budget of 20.
    const file = await env.manifest({ tasks, budget: 20 });
    const balance = env.state().balance;
    const refused = await env.run(['run', file, '--yes']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(
      'refused: the run can cost up to 62 tokens but the budget of 20 tokens leaves 20 tokens (0 tokens charged already)',
    );
    expect(env.state().jobs).toHaveLength(0);

    const partial = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(partial.stderr).toBe('');
    expect(partial.code).toBe(0);
    expect(taskStates(env)).toEqual({ voice: 'done', avatar: 'done' });
    // The speech is 75 characters, 5 s at 15 characters a second: the avatar costs 5, well under the 18 left.
    const [avatar] = env.query<{ cost: number; est_max: number }>(
      "SELECT cost, est_max FROM tasks WHERE task_id = 'avatar'",
    );
    expect(avatar).toEqual({ cost: 5, est_max: 5 });
    expect(env.state().balance).toBe(balance - 2 - 5);
  });
});

describe('chains: streaming', () => {
  it('submits a downstream as soon as its own upstream is done, while a slow unrelated job still renders', async () => {
    // Images take 0.09-0.24 s at this speed, a 5 s clip 0.9-2.7 s.
    env = await makeRunEnv({ speed: 0.03 });
    const tasks: TaskDecl[] = [
      {
        id: 'slow',
        model: 'studio-2-6',
        input: { prompt: 'a long render', duration: 5, resolution: '720p' },
      },
      { id: 'still', model: 'flat-image', input: { prompt: 'a mug' } },
      { id: 'poster', model: 'flat-image', after: 'still', input: { prompt: 'a poster of {{after.image}}' } },
    ];
    const file = await env.manifest({ tasks, concurrency: 2, order: 'manifest' });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(0);
    const jobOf = (taskId: string) => {
      const [row] =
        env?.query<{ img_uuid: string }>('SELECT img_uuid FROM tasks WHERE task_id = ?', taskId) ?? [];
      const job = env?.state().jobs.find((j) => j.img_uuid === row?.img_uuid);
      if (!job) throw new Error(`no job for ${taskId}`);
      return job;
    };
    // The poster went out after the still ended and before the slow clip did: no waiting for a stage.
    expect(Date.parse(jobOf('poster').created_at)).toBeGreaterThanOrEqual(Date.parse(jobOf('still').ends_at));
    expect(Date.parse(jobOf('poster').created_at)).toBeLessThan(Date.parse(jobOf('slow').ends_at));
  });
});
