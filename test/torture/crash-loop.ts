// The crash torture: a run against a faulty sandbox (failed jobs, 500s, charges whose answer is lost,
// latency), killed with SIGKILL at seeded random moments and started again until it ends. Then every
// money guarantee is checked from the sandbox's own state and the state database, and a sentinel API
// key is searched for everywhere the run wrote. Shared by `npm run torture` (500 tasks, 20 kills) and
// the small version in `npm test`.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { stringify } from 'yaml';
import type { SandboxState } from '../../src/sandbox/server.js';
import { startProxiedSandbox } from '../helpers/charge-proxy.js';
import { seeded, spawnCli } from '../helpers/child.js';
import { type TaskRow, walk } from '../helpers/run-env.js';
import { type Guarantee, guarantee } from './guarantees.js';

export interface CrashTortureOptions {
  images: number;
  lines: number;
  kills: number;
  seed: number;
  /** Longest pause between "To submit:" and the kill, in ms. */
  killWindowMs: number;
  concurrency: number;
  failRate: number;
  errorRate: number;
  chargeThenErrorRate: number;
  latencyMs: number;
  log?: (line: string) => void;
}

export interface CrashFigures {
  tasks: number;
  kills: number;
  rounds: number;
  exitCodes: (number | string)[];
  states: Record<string, number>;
  maxChargesPerTask: number;
  chargeThenErrorFaults: number;
  tasksInDoubt: number;
  /** Tasks in doubt without a lost answer: killed between the intent and its answer. */
  inDoubtFromKills: number;
  filesChecked: number;
  partFiles: number;
  integrity: string;
  ledgerNet: number;
  /** Net charges of jobs the runner never learned of (all tasks in doubt). */
  unseenNet: number;
  balanceChange: number;
  sentinelHits: number;
  placesSearched: number;
}

export interface CrashTorture {
  figures: CrashFigures;
  guarantees: Guarantee[];
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
/** Token amounts are decimals (0.2); sums of them differ from exact in the last bits. */
const same = (a: number, b: number) => Math.abs(a - b) < 1e-6;

export async function crashTorture(o: CrashTortureOptions): Promise<CrashTorture> {
  const log = o.log ?? (() => undefined);
  const dir = await mkdtemp(join(tmpdir(), 'mb-torture-'));
  const key = `sk-SENTINEL-${createHash('sha256').update(String(o.seed)).digest('hex').slice(0, 24)}`;
  const sandbox = await startProxiedSandbox([
    '--speed',
    '0',
    '--balance',
    '100000',
    '--api-key',
    key,
    '--seed',
    String(o.seed),
    '--fail-rate',
    String(o.failRate),
    '--error-rate',
    String(o.errorRate),
    '--charge-then-error-rate',
    String(o.chargeThenErrorRate),
    '--latency',
    String(o.latencyMs),
  ]);
  const sandboxState = async () =>
    (await (await request(`${sandbox.sandboxUrl}/_sandbox/state`)).body.json()) as SandboxState;
  try {
    const balanceBefore = (await sandboxState()).balance;
    const tasks = [
      ...Array.from({ length: o.images }, (_, i) => ({
        id: `shot-${i + 1}`,
        model: 'flat-image',
        input: { prompt: `torture product shot ${i + 1}` },
      })),
      ...Array.from({ length: o.lines }, (_, i) => ({
        id: `line-${i + 1}`,
        model: 'speech-v3',
        input: { text: `Torture voice line number ${i + 1}.` },
      })),
    ];
    await writeFile(
      join(dir, 'torture.yaml'),
      stringify({ version: 1, name: 'torture', concurrency: o.concurrency, output: 'out', tasks }),
    );
    const env = sandbox.env(key);
    const random = seeded(o.seed);
    const outputs: [string, Buffer][] = [];
    const exitCodes: (number | string)[] = [];
    let kills = 0;
    const maxRounds = o.kills + 10;
    for (let round = 0; round < maxRounds; round++) {
      const child = spawnCli(
        [
          '--state',
          'state.db',
          '--log-file',
          'run.log',
          '--log-level',
          'debug',
          'run',
          'torture.yaml',
          '--yes',
        ],
        { cwd: dir, env },
      );
      if (kills < o.kills && (await child.waitFor('  To submit:'))) {
        await new Promise((r) => setTimeout(r, Math.floor(random() * o.killWindowMs)));
        if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
      }
      const code = await child.exited;
      exitCodes.push(code);
      outputs.push(
        [`stdout ${round}`, Buffer.from(child.stdout())],
        [`stderr ${round}`, Buffer.from(child.stderr())],
      );
      if (code === 'SIGKILL') {
        kills++;
        // A killed process leaves its write-ahead log behind: keep a copy to search for the key.
        if (existsSync(join(dir, 'state.db-wal'))) {
          outputs.push([`state.db-wal after kill ${kills}`, await readFile(join(dir, 'state.db-wal'))]);
        }
        log(`round ${round + 1}: killed (${kills}/${o.kills})`);
        continue;
      }
      log(`round ${round + 1}: exit ${code}`);
      if (code === 0 || code === 2) break;
      if (code !== 4) throw new Error(`run exited ${code}: ${child.stderr()}`);
      // 4: tasks left unfinished (e.g. the API kept answering 500): the same command continues.
    }
    await copyFile(join(dir, 'state.db'), join(dir, 'state-copy.db'));

    const db = new Database(join(dir, 'state.db'), { readonly: true, fileMustExist: true });
    let rows: TaskRow[];
    let files: { task_id: string; path: string; bytes: number; sha256: string }[];
    let ledger: { img_uuid: string; kind: string; tokens: number }[];
    let integrity: string;
    try {
      integrity = String(db.pragma('integrity_check', { simple: true }));
      rows = db.prepare('SELECT * FROM tasks WHERE run_id = ? ORDER BY seq').all('torture') as TaskRow[];
      files = db
        .prepare('SELECT task_id, path, bytes, sha256 FROM files WHERE run_id = ?')
        .all('torture') as typeof files;
      ledger = db.prepare('SELECT img_uuid, kind, tokens FROM ledger').all() as typeof ledger;
    } finally {
      db.close();
    }
    const state = await sandboxState();
    const jobs = new Map(state.jobs.map((j) => [j.img_uuid, j]));
    const byKey = sandbox.proxy.jobsByKey();
    const chargesOf = (t: TaskRow) => {
      const body = JSON.parse(t.body) as { prompt?: string; text?: string };
      return byKey.get(body.prompt ?? body.text ?? '') ?? [];
    };
    const taskOfJob = new Map<string, TaskRow>();
    for (const t of rows) for (const id of chargesOf(t)) taskOfJob.set(id, t);

    const states: Record<string, number> = {};
    for (const t of rows) states[t.state] = (states[t.state] ?? 0) + 1;
    const maxCharges = Math.max(0, ...rows.map((t) => chargesOf(t).length));
    const faults = state.jobs.filter((j) => j.answer !== 'ok');
    const inDoubt = rows.filter((t) => t.state === 'in_doubt');

    // Files of every task done: on disk, with the size and hash the database recorded.
    const fileProblems: string[] = [];
    let filesChecked = 0;
    for (const t of rows.filter((r) => r.state === 'done')) {
      const own = files.filter((f) => f.task_id === t.task_id);
      if (own.length === 0) fileProblems.push(`${t.task_id}: done without files`);
      for (const f of own) {
        filesChecked++;
        if (!existsSync(f.path)) {
          fileProblems.push(`${t.task_id}: ${f.path} missing`);
          continue;
        }
        const bytes = await readFile(f.path);
        if (bytes.length !== f.bytes)
          fileProblems.push(`${t.task_id}: ${f.path} is ${bytes.length} bytes, recorded ${f.bytes}`);
        if (createHash('sha256').update(bytes).digest('hex') !== f.sha256)
          fileProblems.push(`${t.task_id}: ${f.path} does not match its sha256`);
      }
      if (!existsSync(join(dir, 'out', 'torture', t.task_id, 'job.json')))
        fileProblems.push(`${t.task_id}: no job.json`);
    }
    const everything = await walk(dir);
    const partFiles = everything.filter((f) => f.endsWith('.part'));

    // Money: what the ledger knows matches the sandbox; what it does not know belongs to tasks in doubt.
    const ledgerProblems: string[] = [];
    const charged = new Set<string>();
    for (const entry of ledger) {
      const job = jobs.get(entry.img_uuid);
      if (!job) ledgerProblems.push(`${entry.img_uuid}: in the ledger, unknown to the sandbox`);
      else if (entry.kind === 'charge' && !same(entry.tokens, job.cost))
        ledgerProblems.push(`${entry.img_uuid}: charge ${entry.tokens}, the sandbox took ${job.cost}`);
      else if (entry.kind === 'refund' && !same(entry.tokens, job.refunded))
        ledgerProblems.push(`${entry.img_uuid}: refund ${entry.tokens}, the sandbox gave ${job.refunded}`);
      if (entry.kind === 'charge') charged.add(entry.img_uuid);
    }
    const unseen = state.jobs.filter((j) => !charged.has(j.img_uuid));
    for (const job of unseen) {
      const task = taskOfJob.get(job.img_uuid);
      if (task?.state !== 'in_doubt')
        ledgerProblems.push(
          `${job.img_uuid}: charged, missing from the ledger, task ${task?.task_id ?? '?'} is ${task?.state ?? 'unknown'}`,
        );
    }
    const ledgerNet = sum(ledger.map((e) => (e.kind === 'charge' ? e.tokens : -e.tokens)));
    const unseenNet = sum(unseen.map((j) => j.cost - j.refunded));
    const balanceChange = balanceBefore - state.balance;
    const wrongEnd = rows.filter((t) => !['done', 'failed', 'in_doubt', 'rejected'].includes(t.state));
    const refundProblems = rows
      .filter((t) => t.state === 'failed')
      .filter((t) => {
        const job = t.img_uuid ? jobs.get(t.img_uuid) : undefined;
        return job?.status !== 'failed' || !same(job.refunded, job.cost) || !same(t.refunded ?? -1, job.cost);
      })
      .map((t) => t.task_id);
    const faultsNotInDoubt = faults.filter((j) => taskOfJob.get(j.img_uuid)?.state !== 'in_doubt');

    // The sentinel key: console output, log, database (and the WAL of each kill), reports, every file.
    const haystacks: [string, Buffer][] = [...outputs];
    for (const f of everything) haystacks.push([f, await readFile(join(dir, f))]);
    const hits = haystacks.filter(
      ([, bytes]) => bytes.includes(key) || bytes.includes(Buffer.from(key, 'utf16le')),
    );
    const reports = everything.filter((f) => /report\.(md|json|csv)$|index\.html$/.test(f));

    const figures: CrashFigures = {
      tasks: rows.length,
      kills,
      rounds: exitCodes.length,
      exitCodes,
      states,
      maxChargesPerTask: maxCharges,
      chargeThenErrorFaults: faults.length,
      tasksInDoubt: inDoubt.length,
      inDoubtFromKills: inDoubt.filter((t) => !chargesOf(t).some((id) => jobs.get(id)?.answer !== 'ok'))
        .length,
      filesChecked,
      partFiles: partFiles.length,
      integrity,
      ledgerNet: Math.round(ledgerNet * 1e6) / 1e6,
      unseenNet: Math.round(unseenNet * 1e6) / 1e6,
      balanceChange: Math.round(balanceChange * 1e6) / 1e6,
      sentinelHits: hits.length,
      placesSearched: haystacks.length,
    };
    const guarantees = [
      guarantee(
        'the run ended (exit 0 or 2)',
        [0, 2].includes(exitCodes.at(-1) as number),
        `exit codes ${exitCodes.join(', ')}`,
      ),
      guarantee(
        'every task of the manifest is in the database',
        rows.length === tasks.length,
        `${rows.length} of ${tasks.length}`,
      ),
      guarantee(
        'every task ended done, failed, rejected or in doubt',
        wrongEnd.length === 0,
        wrongEnd.map((t) => `${t.task_id}: ${t.state}`),
      ),
      guarantee(
        'every sandbox job is tied to a task',
        sum([...byKey.values()].map((v) => v.length)) === state.jobs.length,
        `${state.jobs.length} jobs`,
      ),
      guarantee('at most one charge per task', maxCharges <= 1, `max ${maxCharges}`),
      guarantee(
        'every charge whose answer was lost left its task in doubt',
        faultsNotInDoubt.length === 0,
        faultsNotInDoubt.map((j) => j.img_uuid),
      ),
      guarantee('every failed task was refunded in full', refundProblems.length === 0, refundProblems),
      guarantee(
        'every task done has its files with the recorded size and hash',
        fileProblems.length === 0,
        fileProblems,
      ),
      guarantee('no .part files left', partFiles.length === 0, partFiles),
      guarantee('PRAGMA integrity_check is ok', integrity === 'ok', integrity),
      guarantee(
        'the ledger agrees with the sandbox, job by job',
        ledgerProblems.length === 0,
        ledgerProblems,
      ),
      guarantee(
        'ledger net + charges never answered = the sandbox balance change',
        same(ledgerNet + unseenNet, balanceChange),
        `${figures.ledgerNet} + ${figures.unseenNet} vs ${figures.balanceChange}`,
      ),
      guarantee('reports were written', reports.length > 0, reports),
      guarantee(
        'the API key appears nowhere',
        hits.length === 0,
        hits.map(([where]) => where),
      ),
    ];
    return { figures, guarantees };
  } finally {
    await sandbox.close();
    await rm(dir, { recursive: true, force: true });
  }
}
