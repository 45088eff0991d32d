// Every command mediabatch prints for a person to type, built in one place from the run's own invocation:
// the state file it lives in, whether it is a sandbox run, the account settings and API it used, its shard
// and run id. A command printed without them fails (`not found in state/mediabatch.db`, `no API key`) or,
// worse, starts another paid run: a shard's `run` without `--shard i/n --run-id` is a new unsharded run of
// the whole manifest. So a printed `run` always names its run (`--run-id`) and its shard, and carries the
// budget it was given, so that it continues that run and never spends more than it could.
//
// Pure: strings in, a command line out, quoted for a POSIX shell (single quotes).

import { isAbsolute, relative } from 'node:path';
import { parseShardRunId, type Shard } from '../plan/shard.js';
import { isPostgresUrl, redactUrl } from '../store/location.js';
import { shellLine } from '../util/shell.js';

/** The state file of real runs when `--state` is not given. */
export const DEFAULT_STATE_FILE = 'state/mediabatch.db';
/** Where `--sandbox` keeps its runs, apart from real ones, when `--state` is not given. */
export const SANDBOX_STATE_FILE = 'state/sandbox.db';

/** The base URL a run of the embedded sandbox is bound to (its port changes at every start). */
export const EMBEDDED_SANDBOX = 'the embedded sandbox (--sandbox)';

/** How a run was started and how it is reached now: what a command about it must carry. */
export interface RunInvocation {
  /** The run's id: a shard's own (`<run>.shard-<i>-of-<n>`) or the run's. */
  runId: string;
  /** The manifest, as the person reaches it from their working folder. */
  manifest: string;
  /** The state file as the person reaches it (`--state`); left out of commands when it is the default. */
  state: string;
  /** A run of the embedded sandbox (`run --sandbox`): no key or base URL needed, its own state file. */
  sandbox?: boolean;
  /** `--config`: the account settings file the run was started with. */
  config?: string;
  /** `--base-url`, when the run was started with one (not from the environment or the config file). */
  baseUrl?: string;
  /** `--budget`: the budget the run was given on the command line, kept so that a resume spends no more. */
  budget?: number;
  /** `--allow-outside-data`: the manifest reads data files outside its folder. */
  allowOutsideData?: boolean;
  /** `--allow-local-output`: a PostgreSQL state's workers write to a local folder they share. */
  allowLocalOutput?: boolean;
  /**
   * `--allow-partial`: the run was started knowing it may not all fit (budget, balance, quota, disk); without
   * it the same command would be refused where the run stood, not continue it.
   */
  allowPartial?: boolean;
}

/** One command for a person: what it does to the run. */
export type CommandStep =
  /** Continue the run: submits what is pending, watches what is sent, fetches what is paid. */
  | { command: 'run'; retryInDoubt?: boolean; retryFailed?: boolean; waitForReview?: boolean }
  /** List what awaits a decision, or decide on the named results (ids or globs). */
  | { command: 'review'; approve?: readonly string[]; reject?: readonly string[]; reroll?: readonly string[] }
  | { command: 'status' }
  | { command: 'report' }
  | { command: 'view' }
  /** One report of a run's shards, from their report files (or folders, or s3:// prefixes). */
  | { command: 'merge'; inputs: readonly string[]; out?: string };

export { shellLine, shellQuote } from '../util/shell.js';

/** The shard a run id names, if it is a shard's run. */
export function shardOfRun(runId: string): { base: string; shard: Shard } | undefined {
  return parseShardRunId(runId);
}

/** A path that does not start with `-`, which the command line would read as an option. */
function asOperand(path: string): string {
  return path.startsWith('-') ? `./${path}` : path;
}

/** `--state`, `--sandbox` and `--config` as the command needs them to reach the same run. */
function reachFlags(inv: RunInvocation, withConfig: boolean): string[] {
  const defaultState = inv.sandbox ? SANDBOX_STATE_FILE : DEFAULT_STATE_FILE;
  return [
    ...(inv.sandbox ? ['--sandbox'] : []),
    // Whatever the caller was given, a printed command never carries the URL's password.
    ...(inv.state !== defaultState ? ['--state', typableState(inv.state)] : []),
    ...(withConfig && inv.config !== undefined ? ['--config', inv.config] : []),
  ];
}

/** The words of `run` that continue this run and no other: its shard, its run id, its budget. */
function runWords(inv: RunInvocation, step: Extract<CommandStep, { command: 'run' }>): string[] {
  const shard = shardOfRun(inv.runId);
  return [
    'run',
    asOperand(inv.manifest),
    ...(shard ? ['--shard', `${shard.shard.index}/${shard.shard.count}`, '--run-id', shard.base] : []),
    ...(shard ? [] : ['--run-id', inv.runId]),
    ...reachFlags(inv, true),
    // The embedded sandbox has a new address at each start: a recorded one would be wrong.
    ...(inv.baseUrl !== undefined && !inv.sandbox ? ['--base-url', inv.baseUrl] : []),
    ...(inv.budget !== undefined ? ['--budget', String(inv.budget)] : []),
    ...(inv.allowOutsideData ? ['--allow-outside-data'] : []),
    ...(inv.allowLocalOutput ? ['--allow-local-output'] : []),
    ...(inv.allowPartial ? ['--allow-partial'] : []),
    ...(step.retryInDoubt ? ['--retry-in-doubt'] : []),
    ...(step.retryFailed ? ['--retry-failed'] : []),
    ...(step.waitForReview ? ['--wait-for-review'] : []),
  ];
}

function reviewWords(inv: RunInvocation, step: Extract<CommandStep, { command: 'review' }>): string[] {
  const ids = (flag: string, list: readonly string[] | undefined) =>
    list !== undefined && list.length > 0 ? [flag, list.join(',')] : [];
  return [
    'review',
    inv.runId,
    ...reachFlags(inv, false),
    ...ids('--approve', step.approve),
    ...ids('--reject', step.reject),
    ...ids('--reroll', step.reroll),
  ];
}

/** The words after `mediabatch` of a command about the run. */
export function commandWords(inv: RunInvocation, step: CommandStep): string[] {
  switch (step.command) {
    case 'run':
      return runWords(inv, step);
    case 'review':
      return reviewWords(inv, step);
    case 'status':
      return ['status', inv.runId, ...reachFlags(inv, false)];
    case 'report':
      return ['report', inv.runId, ...reachFlags(inv, true)];
    case 'view':
      return ['view', inv.runId, ...reachFlags(inv, true)];
    case 'merge':
      return mergeWords(step.inputs, step.out);
  }
}

/** A merge reads report files only: no state file, no account. */
function mergeWords(inputs: readonly string[], out: string | undefined): string[] {
  return ['report', '--merge', ...inputs.map(asOperand), ...(out !== undefined ? ['--out', out] : [])];
}

/**
 * `mediabatch run <manifest>` for a state that has no run yet: the state file and flags of the command
 * that found it empty, so the run it starts lands where that command looks (the sandbox's state file
 * means a sandbox run). `<manifest>` is for the person to fill in, printed as it is.
 */
export function newRunCommandLine(reach: { state: string; config?: string }, manifest?: string): string {
  const inv = { runId: '', manifest: '', sandbox: reach.state === SANDBOX_STATE_FILE, ...reach };
  const target = manifest === undefined ? '<manifest>' : shellLine([asOperand(manifest)]);
  return `mediabatch run ${target} ${shellLine(reachFlags(inv, true))}`.trimEnd();
}

/** `mediabatch schedule <manifest>` on the same state (and config) as the command that prints it. */
export function scheduleCommandLine(reach: { state: string; config?: string }, manifest: string): string {
  const inv = { runId: '', manifest: '', sandbox: reach.state === SANDBOX_STATE_FILE, ...reach };
  return shellLine(['mediabatch', 'schedule', asOperand(manifest), ...reachFlags(inv, true)]);
}

/** `mediabatch report --merge …`: it needs no run's invocation. */
export function mergeCommandLine(inputs: readonly string[], out?: string): string {
  return shellLine(['mediabatch', ...mergeWords(inputs, out)]);
}

/** The command line a person types, `mediabatch …`, quoted for a POSIX shell. */
export function commandLine(inv: RunInvocation, step: CommandStep): string {
  return shellLine(['mediabatch', ...commandWords(inv, step)]);
}

/**
 * What a run keeps of the flags it was started with (in its settings, as `invocation`), so that a command
 * printed later, by `status` or `report` in another shell, still carries them. Paths are absolute.
 */
export interface RecordedInvocation {
  sandbox?: boolean;
  config?: string;
  baseUrl?: string;
  budget?: number;
  allowOutsideData?: boolean;
  allowLocalOutput?: boolean;
  allowPartial?: boolean;
}

/** How the command printing the hint reached the run: its working folder and its own flags. */
export interface Reader {
  /** The working folder paths are shown from; without it, they stay absolute (a file read anywhere). */
  cwd?: string;
  /** The state file as the person gave it (or its default). */
  state: string;
  /** `--config` of the printing command, when given: it wins over the recorded one. */
  config?: string;
}

/** A run's record as far as its invocation goes (a RunRecord of the store fits). */
export interface RunOfInvocation {
  id: string;
  manifestPath: string;
  settings: unknown;
  api: { baseUrl: string } | null;
}

/** A path as the person reaches it from `cwd`: relative when inside it, else as it is. */
function fromCwd(cwd: string | undefined, path: string): string {
  if (cwd === undefined || !isAbsolute(path)) return path;
  const rel = relative(cwd, path);
  return rel === '' ? '.' : rel.startsWith('..') || isAbsolute(rel) ? path : rel;
}

/**
 * A state as a printed command names it: a PostgreSQL URL without its password (in the user part or as
 * `password=`), which then comes from PGPASSWORD or ~/.pgpass as libpq reads them; a file as it is.
 */
export function typableState(state: string): string {
  if (!/^postgres(ql)?:\/\//i.test(state)) return state;
  try {
    const url = new URL(state);
    url.password = '';
    if (url.searchParams.has('password')) url.searchParams.delete('password');
    // URLSearchParams writes spaces as "+", which libpq reads literally (a "+" of the URL is %2B then).
    return url.toString().replace(/\+/g, '%20');
  } catch {
    return 'postgres://(unreadable URL)';
  }
}

/** A state as a line for a person names it: a file as given, a PostgreSQL URL with its password hidden. */
export function stateInLine(state: string): string {
  return isPostgresUrl(state) ? redactUrl(state) : state;
}

/**
 * The state a command opens when `--state` names a PostgreSQL database without a password, as every
 * command mediabatch prints does: the URL of MEDIABATCH_STATE_URL when that names the very same database
 * (the same URL once its password is left out), so that a printed command typed in the shell that holds
 * the password in MEDIABATCH_STATE_URL reaches the run; else the URL as given, whose password libpq then
 * takes from PGPASSWORD or ~/.pgpass.
 */
export function stateWithKnownPassword(given: string, fromEnv: string | undefined): string {
  if (fromEnv === undefined || !isPostgresUrl(given) || !isPostgresUrl(fromEnv)) return given;
  if (hasPassword(given) || !hasPassword(fromEnv)) return given;
  return typableState(fromEnv) === typableState(given) ? fromEnv : given;
}

/** A PostgreSQL URL that carries a password, in its user part or as `password=`. */
function hasPassword(state: string): boolean {
  try {
    const url = new URL(state);
    return url.password !== '' || url.searchParams.has('password');
  } catch {
    return false;
  }
}

/** The recorded flags of a run's settings; nothing for a run recorded before they were kept. */
export function recordedInvocation(settings: unknown): RecordedInvocation {
  const raw = (settings as { invocation?: unknown } | null)?.invocation;
  if (raw === null || typeof raw !== 'object') return {};
  const r = raw as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const out: RecordedInvocation = {};
  if (r['sandbox'] === true) out.sandbox = true;
  const config = text(r['config']);
  if (config !== undefined) out.config = config;
  const baseUrl = text(r['baseUrl']);
  if (baseUrl !== undefined) out.baseUrl = baseUrl;
  if (typeof r['budget'] === 'number' && Number.isFinite(r['budget'])) out.budget = r['budget'];
  if (r['allowOutsideData'] === true) out.allowOutsideData = true;
  if (r['allowLocalOutput'] === true) out.allowLocalOutput = true;
  if (r['allowPartial'] === true) out.allowPartial = true;
  return out;
}

/**
 * The invocation of a recorded run as the printing command reaches it: the state file as this command
 * was given it (it found the run there), the manifest and config from this working folder, and the flags
 * the run was started with.
 */
export function invocationOf(run: RunOfInvocation, reader: Reader): RunInvocation {
  const recorded = recordedInvocation(run.settings);
  const config = reader.config ?? recorded.config;
  return {
    runId: run.id,
    manifest: fromCwd(reader.cwd, run.manifestPath),
    state: typableState(reader.state),
    ...(recorded.sandbox || run.api?.baseUrl === EMBEDDED_SANDBOX ? { sandbox: true } : {}),
    ...(config !== undefined ? { config: reader.config ?? fromCwd(reader.cwd, config) } : {}),
    ...(recorded.baseUrl !== undefined ? { baseUrl: recorded.baseUrl } : {}),
    ...(recorded.budget !== undefined ? { budget: recorded.budget } : {}),
    ...(recorded.allowOutsideData ? { allowOutsideData: true } : {}),
    ...(recorded.allowLocalOutput ? { allowLocalOutput: true } : {}),
    ...(recorded.allowPartial ? { allowPartial: true } : {}),
  };
}
