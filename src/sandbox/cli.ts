// `mediabatch sandbox`: serves the sandbox until SIGINT or SIGTERM. The base URL is the first line
// of stdout so scripts can read it (`--port 0` picks a free port); request lines go to stderr.
import type { EventEmitter } from 'node:events';
import { fmtTokensWithUnit } from '../util/numbers.js';
import {
  checkSettings,
  SANDBOX_DEFAULTS,
  SANDBOX_FLAGS,
  type SandboxFlagAttr,
  type SandboxOptions,
  SandboxOptionsError,
  type SandboxSettings,
} from './options.js';
import { parseQuirks } from './quirks.js';
import { type Sandbox, startSandbox } from './server.js';

/** Flag values as commander hands them over: strings, or numbers when a parser or default made them so. */
export type SandboxCommandOptions = Partial<Record<SandboxFlagAttr, string | number>>;

export interface SandboxCommandIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** Where SIGINT and SIGTERM arrive; the process by default. */
  signals: EventEmitter;
  /** Called once the server listens, e.g. by tests that stop it. */
  onReady?: (sandbox: Sandbox) => void;
}

export type FlagsCheck = { ok: true; options: SandboxOptions } | { ok: false; issues: string[] };

const flagOf = (option: string): string =>
  SANDBOX_FLAGS.find((f) => f.option === option)?.flag.split(' ')[0] ?? option;

/** Turns flag values into SandboxOptions; every problem is reported, in the flags' own names. */
export function parseSandboxFlags(raw: SandboxCommandOptions): FlagsCheck {
  const issues: string[] = [];
  const options: SandboxOptions = {};
  const settings: Record<string, number> = {};
  for (const { attr, option } of SANDBOX_FLAGS) {
    const value = raw[attr];
    if (value === undefined) continue;
    if (option === 'host' || option === 'apiKey') {
      const text = String(value).trim();
      if (text === '') issues.push(`${flagOf(option)}: must not be empty`);
      else options[option] = text;
      continue;
    }
    if (option === 'quirks') {
      const quirks = parseQuirks(String(value));
      if (quirks.ok) options.quirks = [...quirks.quirks];
      else issues.push(`--quirks: ${quirks.issue}`);
      continue;
    }
    const number = typeof value === 'number' ? value : Number(String(value).trim() || Number.NaN);
    if (!Number.isFinite(number)) {
      issues.push(`${flagOf(option)}: must be a number, got ${JSON.stringify(value)}`);
    } else if (option === 'port') {
      if (!Number.isInteger(number) || number < 0 || number > 65535) {
        issues.push(`--port: must be a whole number from 0 to 65535, got ${number}`);
      } else options.port = number;
    } else if (option === 'seed') {
      if (!Number.isInteger(number)) issues.push(`--seed: must be a whole number, got ${number}`);
      else options.seed = number;
    } else settings[option] = number;
  }
  const checked = checkSettings(settings);
  if (!checked.ok) {
    for (const issue of checked.issues) {
      const key = issue.slice(0, issue.indexOf(':'));
      issues.push(`${flagOf(key)}${issue.slice(key.length)}`);
    }
  } else Object.assign(options, checked.settings satisfies Partial<SandboxSettings>);
  return issues.length > 0 ? { ok: false, issues } : { ok: true, options };
}

/** Runs the sandbox until a signal arrives; throws (before listening) when a flag is invalid. */
export async function sandboxCommand(
  raw: SandboxCommandOptions,
  io: SandboxCommandIo = { stdout: process.stdout, stderr: process.stderr, signals: process },
): Promise<void> {
  const parsed = parseSandboxFlags(raw);
  if (!parsed.ok) throw new SandboxOptionsError(`sandbox: ${parsed.issues.join('; ')}`);
  const options = parsed.options;
  const requestLines = gathered(io.stderr);
  const sandbox = await startSandbox({
    ...options,
    port: options.port ?? SANDBOX_DEFAULTS.port,
    log: requestLines.add,
  });
  io.stdout.write(`${sandbox.baseUrl}\n`);
  const state = sandbox.state();
  const quota =
    state.quota.limit === null ? 'no quota' : `quota ${fmtTokensWithUnit(state.quota.limit)} a month`;
  const quirks = state.quirks.enabled.length > 0 ? `, quirks ${state.quirks.enabled.join(',')}` : '';
  io.stderr.write(
    `sandbox: balance ${fmtTokensWithUnit(state.balance)}, ${quota}${quirks}, API key "${options.apiKey ?? SANDBOX_DEFAULTS.apiKey}"; ` +
      `state at ${sandbox.baseUrl}/_sandbox/state; Ctrl-C to stop\n`,
  );
  io.onReady?.(sandbox);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      io.signals.off('SIGINT', stop);
      io.signals.off('SIGTERM', stop);
      resolve();
    };
    io.signals.on('SIGINT', stop);
    io.signals.on('SIGTERM', stop);
  });
  await sandbox.close();
  requestLines.flush();
  io.stderr.write('sandbox: stopped\n');
}

/**
 * Request lines gathered over a turn of the event loop and written at once, in order: a write of its own
 * for each line was about 7 % of the sandbox's CPU spent on submissions and polls when a run keeps it busy.
 */
export function gathered(out: { write(text: string): unknown }): { add(line: string): void; flush(): void } {
  let pending = '';
  const flush = (): void => {
    if (pending === '') return;
    const text = pending;
    pending = '';
    out.write(text);
  };
  return {
    add: (line) => {
      if (pending === '') setImmediate(flush);
      pending += `${line}\n`;
    },
    flush,
  };
}
