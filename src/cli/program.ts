import { resolve } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import type { Config } from '../config.js';
import { DEFAULT_STATE_FILE, SANDBOX_STATE_FILE, stateWithKnownPassword } from '../results/invocation.js';
import type { SandboxCommandOptions } from '../sandbox/cli.js';
import { SANDBOX_FLAGS } from '../sandbox/options.js';
import { sandboxJournalAnchor } from '../store/location.js';
import type { Logger } from '../util/log.js';
import { scrub } from '../util/secrets.js';
import type { RunFlags } from './commands/run.js';
import type { ScheduleFlags } from './commands/schedule.js';
import { EXIT, exitOf } from './errors.js';
import type { CliIO } from './io.js';
import type { ShardFlags } from './shard.js';

interface ReportFlags extends ShardFlags {
  json?: boolean;
  sandbox?: boolean;
  merge?: string[];
  out?: string;
}

import { mapStack } from './stack.js';

export interface GlobalOptions {
  state: string;
  baseUrl?: string;
  logLevel: string;
  logFile?: string;
  config?: string;
}

export { SANDBOX_STATE_FILE };

/**
 * Long on purpose: the declarative table of every command and option; each action only calls its command.
 * Builds the commander program; each action resolves to an exit code stored in `result`.
 */
function buildProgram(io: CliIO, result: { code: number }): Command {
  const program = new Command('mediabatch')
    .description(
      'Run batches of paid media-generation tasks from YAML manifests: priced first, never charged twice.',
    )
    .version('0.1.0')
    .addOption(
      new Option('--state <file>', 'state database: a SQLite file, or postgres://…').default(
        DEFAULT_STATE_FILE,
        'MEDIABATCH_STATE_URL, else state/mediabatch.db',
      ),
    )
    .option('--base-url <url>', 'API base URL (default: MEDIABATCH_BASE_URL or base_url in the config file)')
    .option('--log-level <level>', 'log level: fatal, error, warn, info, debug, trace', 'info')
    .option('--log-file <file>', 'append structured JSON log lines to this file')
    .option(
      '--config <file>',
      'account settings file (default: mediabatch.config.yaml in the working folder)',
    )
    .showHelpAfterError('(add --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    });

  // A fleet's workers take their state from the environment (a Secret): MEDIABATCH_STATE_URL stands for
  // --state when the flag is not given. A command mediabatch printed names the database without its
  // password: typed where MEDIABATCH_STATE_URL holds the password of that same database, it takes it there.
  program.hook('preAction', () => {
    const url = io.env.MEDIABATCH_STATE_URL;
    if (url === undefined || url === '') return;
    if (program.getOptionValueSource('state') === 'default') {
      program.setOptionValueWithSource('state', url, 'env');
    } else {
      program.setOptionValueWithSource('state', stateWithKnownPassword(globals().state, url), 'cli');
    }
  });
  const globals = () => program.opts<GlobalOptions>();
  /**
   * The state file: the sandbox's own for sandbox runs, unless --state was given (MEDIABATCH_STATE_URL
   * names the real runs' state, a fleet's database: sandbox runs never go there unless asked by --state).
   */
  const stateFor = (sandbox: boolean | undefined): string => {
    const path =
      sandbox && program.getOptionValueSource('state') !== 'cli' ? SANDBOX_STATE_FILE : globals().state;
    stateInUse.set(program, path);
    return path;
  };
  /** How a command reached its state file and account, for the commands it prints (src/run/invocation.ts). */
  const reach = (sandbox: boolean | undefined) => {
    const configFile = globals().config;
    return { statePath: stateFor(sandbox), ...(configFile !== undefined ? { configFile } : {}) };
  };
  const config = async () => {
    const g = globals();
    // Loaded by the commands that read it: zod, YAML and the catalog are not needed for --help.
    const { loadConfig } = await import('../config.js');
    const cfg = await loadConfig({ cwd: io.cwd, env: io.env, ...(g.config ? { configFile: g.config } : {}) });
    if (g.baseUrl) cfg.baseUrl = g.baseUrl;
    return cfg;
  };
  /** Long-running commands log to --log-file; the logger is flushed whatever happens. */
  const withLogger = async (
    command: (ctx: { io: CliIO; config: Config; statePath: string; logger: Logger }) => Promise<number>,
  ): Promise<number> => {
    const g = globals();
    const cfg = await config();
    // pino loads only for the commands that log.
    const { createLogger } = await import('../util/log.js');
    const logger = createLogger({
      level: g.logLevel,
      ...(g.logFile ? { file: resolve(io.cwd, g.logFile) } : {}),
    });
    try {
      return await command({ io, config: cfg, statePath: g.state, logger });
    } finally {
      logger.flush();
    }
  };

  program
    .command('validate')
    .description("parse, expand and check every task against the API's rules; no network")
    .argument('<manifest...>', 'manifest files')
    .option('--json', 'print the result as JSON')
    .addOption(allowOutsideOption())
    .addOption(shardOption())
    .addOption(shardFromEnvOption())
    .addOption(shardCountOption())
    .action(async (files: string[], opts: { json?: boolean; allowOutsideData?: boolean } & ShardFlags) => {
      const { validateCommand } = await import('./commands/validate.js');
      result.code = await validateCommand(files, opts, io);
    });

  program
    .command('plan')
    .description(
      'dry run: every task with its price, totals per model, and your balance when credentials are set',
    )
    .argument('<manifest>', 'manifest file')
    .option('--json', 'print the plan as JSON (the exact request bodies included)')
    .addOption(noProbeOption())
    .addOption(allowOutsideOption())
    .addOption(shardOption())
    .addOption(shardFromEnvOption())
    .addOption(shardCountOption())
    .addOption(sandboxOption('plan'))
    .action(
      async (
        file: string,
        opts: { json?: boolean; probe: boolean; allowOutsideData?: boolean; sandbox?: boolean } & ShardFlags,
      ) => {
        const { shardOfFlags } = await import('./shard.js');
        const shard = shardOfFlags(opts, io.env);
        const cfg = await config();
        const { planCommand } = await import('./commands/plan.js');
        const { makeBalanceSource, makeMeasure } = await import('./wiring.js');
        const statePath = stateFor(opts.sandbox);
        const balance = makeBalanceSource(
          cfg,
          opts.sandbox ? sandboxJournalAnchor(io.cwd, statePath) : undefined,
        );
        result.code = await planCommand(file, opts, {
          io,
          config: cfg,
          ...(shard ? { shard } : {}),
          allowOutside: opts.allowOutsideData ?? false,
          statePath,
          ...(opts.probe ? { measure: makeMeasure() } : {}),
          ...(balance ? { balance } : {}),
        });
      },
    );

  program
    .command('run')
    .description(
      'preflight, then submit, watch, download and report; resumes the run if it exists and is unfinished',
    )
    .argument('<manifest>', 'manifest file')
    .option('-y, --yes', 'do not ask for confirmation on a terminal')
    .option(
      '--json',
      'write NDJSON events on stdout (submitted, done, failed, …, summary); the display goes to stderr',
    )
    .option(
      '--allow-partial',
      'start even when the estimate exceeds balance, quota or budget; stop cleanly when money runs out',
    )
    .option('--retry-in-doubt', 'submit again the tasks whose answer was lost (they may be charged twice)')
    .option(
      '--accept-changes',
      'submit anew the tasks whose request changed since they were sent (charged again)',
    )
    .option(
      '--concurrency <n>',
      "tasks in flight at once (default: the manifest's concurrency)",
      positiveInt('--concurrency'),
    )
    .option(
      '--retries <n>',
      "submit a task again up to n times when the service fails its job (refunded); default: the manifest's retries",
      nonNegativeInt('--retries'),
    )
    .option('--only <ids>', 'submit only these tasks: ids or globs, comma-separated ("hero-*,line-3")')
    .option(
      '--limit <n>',
      'submit at most n pending tasks (a smoke test before the batch)',
      positiveInt('--limit'),
    )
    .addOption(
      new Option(
        '--order <order>',
        "which pending task goes next: longest (the longest expected job first) or manifest (as written); default: the manifest's order setting",
      ).choices(['longest', 'manifest']),
    )
    .option(
      '--retry-failed',
      'submit again the tasks whose job failed (refunded) or that the API rejected (never charged)',
    )
    .option(
      '--run-id <id>',
      "drive this run id instead of the one the manifest's run template gives now (resume an older run)",
    )
    .option(
      '--new-run',
      "start the run the manifest's run template gives now even if an older run of it is unfinished",
    )
    .option(
      '--listen <host:port>',
      'receive status callbacks on this address during the run (port 0: any free port)',
    )
    .option(
      '--callback-url <url>',
      'the public URL that reaches --listen (with --sandbox it defaults to the receiver itself)',
    )
    .option(
      '--wait-for-review',
      'keep going until every reviewed result (review: true) is decided with `mediabatch review`',
    )
    .option('--sandbox', 'start an embedded sandbox of the API and run against it (no account, no money)')
    .option(
      '--sandbox-reset',
      "with --sandbox: start the embedded sandbox's account afresh (it keeps its balance across sandbox runs)",
    )
    .option(
      '--sandbox-speed <factor>',
      'job timing of the embedded sandbox: 1 realistic, 0 instant',
      nonNegative('--sandbox-speed'),
      0.1,
    )
    .addOption(noProbeOption())
    .addOption(allowOutsideOption())
    .option(
      '--budget <tokens>',
      "a budget for this run in tokens, instead of the manifest's (a shard's instead of its share)",
      nonNegative('--budget'),
    )
    .addOption(shardOption())
    .addOption(shardFromEnvOption())
    .addOption(shardCountOption())
    .option(
      '--allow-local-output',
      'with a postgres:// state: write results to the local output folder (the workers share that disk)',
    )
    .option('--view', 'serve the live page of the run while it goes and print its address (see `view`)')
    .action(async (file: string, opts: RunFlags) => {
      // Trying things never touches real runs: sandbox runs keep their own state file unless --state says.
      const reached = reach(opts.sandbox);
      const baseUrlFlag = globals().baseUrl;
      const { runCommand } = await import('./commands/run.js');
      result.code = await withLogger((ctx) =>
        runCommand(file, opts, { ...ctx, ...reached, ...(baseUrlFlag ? { baseUrlFlag } : {}) }),
      );
    });

  program
    .command('schedule')
    .description(
      "long-lived: fires each manifest's `schedule` (cron syntax, in its timezone) as a new run, one at a time; stop with SIGTERM or Ctrl-C",
    )
    .argument('<manifest...>', 'manifest files, each with a schedule')
    .option(
      '--catch-up',
      'on start (and after the machine slept), run the latest firing missed meanwhile; older ones are never replayed',
    )
    .option('-y, --yes', 'accepted for symmetry with run: schedule never asks')
    .option(
      '--allow-partial',
      'start runs even when the estimate exceeds balance, quota or budget; they stop cleanly when money runs out',
    )
    .option(
      '--concurrency <n>',
      "tasks in flight at once per run (default: the manifest's concurrency)",
      positiveInt('--concurrency'),
    )
    .addOption(noProbeOption())
    .option(
      '--allow-local-output',
      "with a postgres:// state: write each fired run's results to the local output folder (the replicas share that disk)",
    )
    .action(async (files: string[], opts: ScheduleFlags) => {
      const { scheduleCommand } = await import('./commands/schedule.js');
      result.code = await withLogger((ctx) => scheduleCommand(files, opts, ctx));
    });

  program
    .command('status')
    .description('progress of one run (its tasks by state and the failing ones), or the list of runs')
    .argument('[run]', 'run id (default: list every run)')
    .option('--json', 'print as JSON')
    .addOption(sandboxOption('status'))
    .addOption(shardOption())
    .addOption(shardFromEnvOption())
    .addOption(shardCountOption())
    .action(async (run: string | undefined, opts: { json?: boolean; sandbox?: boolean } & ShardFlags) => {
      const { statusCommand } = await import('./commands/status.js');
      result.code = await statusCommand(run, opts, { io, ...reach(opts.sandbox) });
    });

  program
    .command('review')
    .description(
      'list the results awaiting a decision (review: true), or approve, reject or re-roll them (a re-roll is charged)',
    )
    .argument('<run>', 'run id')
    .option(
      '--approve <ids>',
      'approve these results: ids or globs, comma-separated; their downstreams go on',
    )
    .option('--reject <ids>', 'reject these results: their downstreams are skipped, nothing charged')
    .option(
      '--reroll <ids>',
      'generate these again (a new charge each, inside the budget); the earlier result is kept',
    )
    .option('--note <text>', 'a note kept with the decision')
    .option('-y, --yes', 'do not ask before a re-roll')
    .option('--json', 'print as JSON')
    .addOption(sandboxOption('review'))
    .action(async (run: string, opts: import('./commands/review.js').ReviewFlags & { sandbox?: boolean }) => {
      const { reviewCommand } = await import('./commands/review.js');
      result.code = await reviewCommand(run, opts, { io, ...reach(opts.sandbox) });
    });

  program
    .command('report')
    .description(
      "(re)writes the run's report.json, report.csv, report.md and index.html, and prints report.md",
    )
    .argument('[run]', 'run id (default: the newest run)')
    .option('--json', 'print report.json instead of report.md')
    .addOption(sandboxOption('report'))
    .option(
      '--merge <inputs...>',
      'one report and gallery for a run split into shards, from their report.shard-i-of-n.json files: the files, their folder, or an s3:// prefix',
    )
    .option(
      '--out <folder>',
      'with --merge: where to write (default: the folder or prefix of the first input)',
    )
    .addOption(shardOption())
    .addOption(shardFromEnvOption())
    .addOption(shardCountOption())
    .action(async (run: string | undefined, opts: ReportFlags) => {
      const cfg = await config();
      if (opts.merge) {
        const { reportMergeCommand } = await import('./commands/report-merge.js');
        result.code = await reportMergeCommand(opts.merge, opts, { io, config: cfg });
        return;
      }
      const { reportCommand } = await import('./commands/report.js');
      result.code = await reportCommand(run, opts, { io, ...reach(opts.sandbox), config: cfg });
    });

  program
    .command('view')
    .description(
      'serve a live page of the runs (progress, spend, failures, results, workers) until Ctrl-C; it writes only the review decisions made on it',
    )
    .argument('[run]', 'run id the printed address opens (default: the list of runs)')
    .addOption(sandboxOption('view'))
    .option(
      '--host <address>',
      'address to listen on; 0.0.0.0 exposes it to the network (warned)',
      '127.0.0.1',
    )
    .option('--port <n>', 'port to listen on (0: any free port)', nonNegativeInt('--port'), 0)
    .action(async (run: string | undefined, opts: { sandbox?: boolean; host: string; port: number }) => {
      const cfg = await config();
      const { viewCommand } = await import('./commands/view.js');
      result.code = await viewCommand(run, opts, { io, ...reach(opts.sandbox), config: cfg });
    });

  program
    .command('balance')
    .description("the account balance, and the local ledger's spend per month and API key")
    .option('--json', 'print as JSON')
    .addOption(sandboxOption('balance'))
    .action(async (opts: { json?: boolean; sandbox?: boolean }) => {
      const cfg = await config();
      const { balanceCommand } = await import('./commands/balance.js');
      const { makeBalanceSource } = await import('./wiring.js');
      const statePath = stateFor(opts.sandbox);
      const balance = makeBalanceSource(
        cfg,
        opts.sandbox ? sandboxJournalAnchor(io.cwd, statePath) : undefined,
      );
      // The sandbox's account is not the real one: its key is the embedded sandbox's, its quota none.
      const account = opts.sandbox
        ? { apiKey: (await import('../sandbox/embedded.js')).EMBEDDED_SANDBOX_KEY }
        : cfg;
      result.code = await balanceCommand(opts, {
        io,
        ...reach(opts.sandbox),
        config: account,
        ...(balance ? { balance } : {}),
        ...(opts.sandbox ? { sandbox: true } : {}),
      });
    });

  const sandbox = program
    .command('sandbox')
    .description('serve the local emulator of the API until stopped (Ctrl-C); prints its base URL first');
  for (const flag of SANDBOX_FLAGS) sandbox.option(flag.flag, flag.description);
  sandbox.action(async (opts: SandboxCommandOptions) => {
    const { sandboxCommand } = await import('../sandbox/cli.js');
    await sandboxCommand(opts, {
      stdout: io.stdout,
      stderr: io.stderr,
      signals: io.signals ?? process,
    });
  });

  return program;
}

// --shard is checked by the command, not by commander: a bad value is the product's one line, exit 1.
function shardOption(): Option {
  return new Option(
    '--shard <i/n>',
    'only shard i of n (counted from 1): a run of its own over a stable share of the tasks',
  );
}

function shardFromEnvOption(): Option {
  return new Option(
    '--shard-from-env',
    'the shard from the engine: MEDIABATCH_SHARD_INDEX (from 1), JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX or SLURM_ARRAY_TASK_ID (from 0); the count from MEDIABATCH_SHARD_COUNT (or SLURM_ARRAY_TASK_COUNT) or --shard-count',
  );
}

function shardCountOption(): Option {
  return new Option('--shard-count <n>', 'the shard count for --shard-from-env').argParser(
    positiveInt('--shard-count'),
  );
}

/** `--sandbox` of the commands that read state or the account: the sandbox's own state file and balance. */
function sandboxOption(command: 'plan' | 'balance' | 'status' | 'review' | 'report' | 'view'): Option {
  const what = {
    plan: "the run of `run --sandbox` and the embedded sandbox's balance",
    balance: "the embedded sandbox's balance (what sandbox runs spent so far) and its ledger",
    status: 'the runs of `run --sandbox`',
    review: 'a run of `run --sandbox`',
    report: 'a run of `run --sandbox`',
    view: 'the runs of `run --sandbox`',
  }[command];
  return new Option('--sandbox', `${what} (${SANDBOX_STATE_FILE} unless --state)`);
}

function noProbeOption(): Option {
  return new Option(
    '--no-probe',
    'do not measure input media; lengths come from media_seconds or become ranges',
  );
}

function allowOutsideOption(): Option {
  return new Option(
    '--allow-outside-data',
    "let foreach read data files outside the manifest's folder (absolute paths, ../, links out)",
  );
}

function wholeNumberAtLeast(min: number) {
  return (flag: string) =>
    (value: string): number => {
      const n = Number(value);
      if (!Number.isInteger(n) || n < min)
        throw new InvalidArgumentError(`${flag} must be a whole number >= ${min}, got ${value}`);
      return n;
    };
}
const positiveInt = wholeNumberAtLeast(1);
const nonNegativeInt = wholeNumberAtLeast(0);

function nonNegative(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < 0)
      throw new InvalidArgumentError(`${flag} must be a number >= 0, got ${value}`);
    return n;
  };
}

/** The state file a command opened (the sandbox's for `run --sandbox`), to name it in errors. */
const stateInUse = new WeakMap<Command, string>();

/**
 * SQLite's own errors from a store write (a full disk mid-run, a file made read-only) are about the state
 * file: worded as such, naming it, never an internal error. SQLite is loaded already when they happen.
 */
async function asStateFileError(error: unknown, program: Command, io: CliIO): Promise<unknown> {
  const code = String((error as { code?: unknown } | null)?.code ?? '');
  if (!code.startsWith('SQLITE_')) return error;
  const { stateFileError } = await import('../store/db.js');
  const state = stateInUse.get(program) ?? program.opts<GlobalOptions>().state;
  return stateFileError(error, resolve(io.cwd, state)) ?? error;
}

/** Runs the CLI in-process and returns the exit code; prints one line saying why on any non-zero exit. */
export async function runCli(argv: readonly string[], io: CliIO): Promise<number> {
  const result = { code: EXIT.ok as number };
  const program = buildProgram(io, result);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return result.code;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are exits with code 0; anything else is a usage error.
      if (error.exitCode === 0) return EXIT.ok;
      return EXIT.invalid;
    }
    const expected = exitOf(await asStateFileError(error, program, io), io.cwd);
    if (expected) {
      for (const line of expected.details) io.stderr.write(`${scrub(line)}\n`);
      io.stderr.write(`mediabatch: ${scrub(expected.message)}\n`);
      return expected.exitCode;
    }
    const message =
      error instanceof Error ? (error.stack ? mapStack(error.stack) : error.message) : String(error);
    io.stderr.write(`${scrub(message)}\n`);
    io.stderr.write('mediabatch: internal error; please report it with the lines above\n');
    return EXIT.internal;
  }
}
