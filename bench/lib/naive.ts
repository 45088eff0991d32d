// The script the service's documentation suggests, written as a careful user would: `concurrency` workers
// take the tasks in manifest order, submit one, look at it every `pollMs`, and on success write its file
// (fsync, rename). No state, no money checks: the floor mediabatch is compared with.
import { open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ENDPOINTS } from '../../src/catalog/types.js';

export interface NaiveTask {
  id: string;
  body: Record<string, unknown>;
}

export interface NaiveOptions {
  baseUrl: string;
  key: string;
  dir: string;
  concurrency: number;
  pollMs: number;
  tasks: NaiveTask[];
  /** Filled with when each task's job was seen finished (epoch ms), by task id. */
  seen?: Map<string, number>;
}

interface Envelope<T> {
  code: number;
  data?: T;
}

const endpointOf = (model: unknown) =>
  model === 'studio-2-6' ? ENDPOINTS.videos : model === 'speech-v3' ? ENDPOINTS.audio : ENDPOINTS.images;

/** Runs every task; resolves to when each one's file was on disk (epoch ms), by task id. */
export async function naiveLoop(o: NaiveOptions): Promise<Map<string, number>> {
  const headers = { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' };
  const done = new Map<string, number>();
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < o.tasks.length; i = next++) {
      const task = o.tasks[i];
      if (!task) continue;
      const answer = (await (
        await fetch(`${o.baseUrl}${endpointOf(task.body.model)}`, {
          method: 'POST',
          headers,
          body: JSON.stringify(task.body),
        })
      ).json()) as Envelope<{ img_uuid: string }>;
      const uuid = answer.data?.img_uuid;
      if (!uuid) continue;
      for (;;) {
        await sleep(o.pollMs);
        const record = (await (
          await fetch(`${o.baseUrl}/api/v1/jobs/detail?img_uuid=${uuid}`, { headers })
        ).json()) as Envelope<{ status: string; json: { value: string }[] | null }>;
        const status = record.data?.status;
        if (status === 'failed') break;
        const link = record.data?.json?.[0]?.value;
        if (status !== 'success' || !link) continue;
        o.seen?.set(task.id, Date.now());
        const bytes = new Uint8Array(await (await fetch(link)).arrayBuffer());
        const path = join(o.dir, `${task.id}.bin`);
        const file = await open(`${path}.part`, 'w');
        await file.writeFile(bytes);
        await file.sync();
        await file.close();
        await rename(`${path}.part`, path);
        done.set(task.id, Date.now());
        break;
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  return done;
}
