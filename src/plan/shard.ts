// Shards: a run split over n machines, each started by an engine with its own index (a
// Kubernetes Indexed Job, an AWS Batch array, a Slurm array, a CI matrix). Pure: which shard a task
// belongs to, the shard a command or an environment names, a shard run's id, and its budget share.
//
// A task's shard is FNV-1a (32 bits) of the UTF-8 bytes of its id, mod n: it depends on nothing but the
// id and n, so adding tasks to a manifest never moves a task that already ran. A chain stays whole: the
// tasks of a connected group of `after:` links all take the shard of the group's root, its first task in
// manifest order that waits for nobody. (Linking two groups with a new task joins them: the later group
// then follows the earlier root; the docs say so.)

import type { TaskSpec } from '../manifest/types.js';
import { MICRO, toMicro } from '../util/money.js';

export interface Shard {
  /** 1-based, as the user writes it. */
  index: number;
  count: number;
}

/** The most shards a run may have: far more than any engine starts copies of one command. */
export const MAX_SHARDS = 10_000;

export type ShardParse = { ok: true; shard: Shard } | { ok: false; message: string };

/** `--shard i/n`, counted from 1: one line naming the value when it is not that. */
export function parseShard(value: string, what = '--shard'): ShardParse {
  const m = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(value);
  if (!m)
    return {
      ok: false,
      message: `${what}: expected i/n with whole numbers, e.g. 1/3, got ${JSON.stringify(value)}`,
    };
  return shardOf(Number(m[1]), Number(m[2]), `${what} ${value}`);
}

function shardOf(index: number, count: number, what: string): ShardParse {
  if (count < 1 || count > MAX_SHARDS) {
    return { ok: false, message: `${what}: the shard count must be from 1 to ${MAX_SHARDS}, got ${count}` };
  }
  if (index < 1 || index > count) {
    return {
      ok: false,
      message: `${what}: the shard index counts from 1 to ${count}, got ${index}${index === 0 ? ' (engines count from 0: use --shard-from-env, which converts)' : ''}`,
    };
  }
  return { ok: true, shard: { index, count } };
}

/**
 * The variables `--shard-from-env` reads, in this order: the first one set gives the index. All but
 * MEDIABATCH_SHARD_INDEX count from 0 and are converted. The count comes from MEDIABATCH_SHARD_COUNT, or
 * the engine's own count where it has one (Slurm's SLURM_ARRAY_TASK_COUNT); `--shard-count` overrides it.
 */
export const SHARD_INDEX_VARIABLES = [
  { name: 'MEDIABATCH_SHARD_INDEX', base: 1, engine: 'mediabatch (e.g. a GitHub Actions matrix)' },
  { name: 'JOB_COMPLETION_INDEX', base: 0, engine: 'a Kubernetes Indexed Job' },
  { name: 'AWS_BATCH_JOB_ARRAY_INDEX', base: 0, engine: 'an AWS Batch array job' },
  { name: 'SLURM_ARRAY_TASK_ID', base: 0, engine: 'a Slurm array' },
] as const;

/**
 * The shard the engine's environment names. Slurm's task ids run from the array's own minimum
 * (`--array=1-3` gives 1, 2, 3): SLURM_ARRAY_TASK_MIN is subtracted, so any range works.
 */
export function shardFromEnv(env: NodeJS.ProcessEnv, countFlag?: number): ShardParse {
  const found = SHARD_INDEX_VARIABLES.find((v) => (env[v.name] ?? '') !== '');
  if (!found) {
    const names = SHARD_INDEX_VARIABLES.map((v) => v.name).join(', ');
    return { ok: false, message: `--shard-from-env: none of ${names} is set; give --shard i/n instead` };
  }
  const raw = env[found.name] ?? '';
  if (!/^\d+$/.test(raw.trim())) {
    return {
      ok: false,
      message: `--shard-from-env: ${found.name} must be a whole number, got ${JSON.stringify(raw)}`,
    };
  }
  let zeroBased = Number(raw) - (found.base === 1 ? 1 : 0);
  if (found.name === 'SLURM_ARRAY_TASK_ID' && /^\d+$/.test(env['SLURM_ARRAY_TASK_MIN'] ?? '')) {
    zeroBased -= Number(env['SLURM_ARRAY_TASK_MIN']);
  }
  const count = countFlag ?? countFromEnv(env, found.name);
  if (count === undefined) {
    return {
      ok: false,
      message: `--shard-from-env: ${found.name} gives the index, and nothing gives the count: set MEDIABATCH_SHARD_COUNT or --shard-count`,
    };
  }
  return shardOf(zeroBased + 1, count, `--shard-from-env (${found.name}=${raw})`);
}

function countFromEnv(env: NodeJS.ProcessEnv, indexVariable: string): number | undefined {
  const names = [
    'MEDIABATCH_SHARD_COUNT',
    ...(indexVariable === 'SLURM_ARRAY_TASK_ID' ? ['SLURM_ARRAY_TASK_COUNT'] : []),
  ];
  for (const name of names) {
    const v = env[name] ?? '';
    if (/^\d+$/.test(v.trim())) return Number(v);
  }
  return undefined;
}

/** FNV-1a, 32 bits, of the UTF-8 bytes of a string. Fixed for good: changing it would move tasks. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The 1-based shard of n that a task id (or its chain's root) falls in. */
export function shardIndexOf(id: string, count: number): number {
  return (fnv1a(id) % count) + 1;
}

/**
 * The connected groups of `after:` links, noted in manifest order, each with its root: the first task
 * that waits for nobody. Only chained tasks are held (a task with no link in or out is its own root).
 */
export class ChainGroups {
  readonly #parent = new Map<string, string>();
  /** Manifest position of each task seen that waits for nobody (candidate roots). */
  readonly #sourceAt = new Map<string, number>();
  readonly #seenAt = new Map<string, number>();
  #roots: Map<string, string> | undefined;
  #position = 0;

  /** A task in manifest order with the ids it waits for (empty when none). */
  note(id: string, upstreams: readonly string[]): void {
    const at = this.#position++;
    if (upstreams.length === 0) {
      if (this.#parent.has(id)) this.#sourceAt.set(id, at);
      else this.#seenAt.set(id, at);
      return;
    }
    this.#add(id);
    for (const up of upstreams) {
      this.#add(up);
      this.#union(id, up);
    }
    this.#roots = undefined;
  }

  /** The id whose hash decides this task's shard: its group's root, or itself. */
  keyOf(id: string): string {
    if (!this.#parent.has(id)) return id;
    this.#roots ??= this.#rootsByGroup();
    return this.#roots.get(this.#find(id)) ?? this.#find(id);
  }

  #add(id: string): void {
    if (this.#parent.has(id)) return;
    this.#parent.set(id, id);
    // A source seen before any link named it: now part of a group.
    const at = this.#seenAt.get(id);
    if (at !== undefined) {
      this.#sourceAt.set(id, at);
      this.#seenAt.delete(id);
    }
  }

  #find(id: string): string {
    let root = id;
    for (let p = this.#parent.get(root); p !== undefined && p !== root; p = this.#parent.get(root)) root = p;
    // Path compression: later finds are one step.
    for (let at = id; at !== root; ) {
      const next = this.#parent.get(at) as string;
      this.#parent.set(at, root);
      at = next;
    }
    return root;
  }

  #union(a: string, b: string): void {
    const ra = this.#find(a);
    const rb = this.#find(b);
    if (ra !== rb) this.#parent.set(ra, rb);
  }

  #rootsByGroup(): Map<string, string> {
    const best = new Map<string, { id: string; at: number }>();
    for (const [id, at] of this.#sourceAt) {
      if (!this.#parent.has(id)) continue;
      const group = this.#find(id);
      const now = best.get(group);
      if (!now || at < now.at) best.set(group, { id, at });
    }
    return new Map([...best].map(([group, b]) => [group, b.id]));
  }
}

/** Whether a task falls in a shard: by its chain's root when it is chained, by its own id otherwise. */
export function shardFilter(shard: Shard, groups?: ChainGroups): (id: string) => boolean {
  if (shard.count === 1) return () => true;
  return (id) => shardIndexOf(groups ? groups.keyOf(id) : id, shard.count) === shard.index;
}

const SHARD_RUN = /^(.+)\.shard-(\d+)-of-(\d+)$/;

/** A shard's run id: `<run>.shard-<i>-of-<n>` (run ids hold no dot otherwise, so it reads back unambiguously). */
export function shardRunId(baseRunId: string, shard: Shard): string {
  return `${baseRunId}.shard-${shard.index}-of-${shard.count}`;
}

/** The run and shard a shard run's id names; undefined for a run that is not a shard. */
export function parseShardRunId(runId: string): { base: string; shard: Shard } | undefined {
  const m = SHARD_RUN.exec(runId);
  if (!m) return undefined;
  return { base: m[1] as string, shard: { index: Number(m[2]), count: Number(m[3]) } };
}

/** The folder name of a run's results: shards share their run's (`<output>/<run>/`). */
export function resultsRunId(runId: string): string {
  return parseShardRunId(runId)?.base ?? runId;
}

/**
 * A shard's share of the manifest's budget: budget × the shard's worst case ÷ the whole run's worst
 * case, in micro-tokens and rounded down, so the shares never add up to more than the budget.
 */
export function budgetShare(budget: number, shardMax: number, wholeMax: number, shard: Shard): number {
  const b = BigInt(toMicro(budget));
  const whole = BigInt(toMicro(wholeMax));
  // Nothing costs anything: the budget is split evenly (nothing will be spent either way).
  const micro = whole === 0n ? b / BigInt(shard.count) : (b * BigInt(toMicro(shardMax))) / whole;
  return Number(micro) / MICRO;
}

/**
 * The filter of a shard over a manifest's tasks. Chained manifests need every task's links first (a
 * downstream may come before its upstream): `specs` is iterated once for them, never for others.
 */
export function shardFilterOf(
  shard: Shard,
  chained: boolean,
  specs: () => Iterable<Pick<TaskSpec, 'id' | 'after'>>,
): (id: string) => boolean {
  if (!chained || shard.count === 1) return shardFilter(shard);
  const groups = new ChainGroups();
  for (const spec of specs()) groups.note(spec.id, spec.after?.map((u) => u.taskId) ?? []);
  return shardFilter(shard, groups);
}
