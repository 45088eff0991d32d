// The CLI's start-up as a user meets it, `node bin/mediabatch.js` (the built package, so run
// `npm run prepare` first): --version, --help, and validate of a 3-task manifest (two images and a video),
// each the median of 5 wall times, taken in turn with the bare `node -e 0` anchor so that a busy machine
// slows all of them alike. `npx tsx bench/startup.ts` prints the figures; bench/main.ts includes them.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(REPO, 'bin/mediabatch.js');
const MANIFEST = join(REPO, 'bench/fixtures/three-tasks.yaml');

export interface StartupFigures {
  repetitions: number;
  /** Medians in milliseconds. */
  bareNodeMs: number;
  versionMs: number;
  helpMs: number;
  validateMs: number;
}

/** The targets, in milliseconds. */
export const STARTUP_TARGETS = { versionMs: 250, helpMs: 250, validateMs: 300 } as const;

const COMMANDS: Record<keyof Omit<StartupFigures, 'repetitions'>, string[]> = {
  bareNodeMs: ['-e', '0'],
  versionMs: [BIN, '--version'],
  helpMs: [BIN, '--help'],
  validateMs: [BIN, 'validate', MANIFEST],
};

function wallMs(args: string[]): number {
  const start = performance.now();
  const done = spawnSync(process.execPath, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  const ms = performance.now() - start;
  if (done.status !== 0) {
    throw new Error(`node ${args.join(' ')} exited ${done.status}: ${String(done.stderr).trim()}`);
  }
  return ms;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.floor(sorted.length / 2)] ?? Number.NaN);
}

/** Medians of `repetitions` rounds; each round runs every command once, in turn (one warm-up round first). */
export function measureStartup(repetitions = 5): StartupFigures {
  if (!existsSync(join(REPO, 'dist/bin/main.js')))
    throw new Error('run `npm run prepare` first: dist/ is missing');
  const names = Object.keys(COMMANDS) as (keyof typeof COMMANDS)[];
  const times = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<
    keyof typeof COMMANDS,
    number[]
  >;
  for (const name of names) wallMs(COMMANDS[name]);
  for (let round = 0; round < repetitions; round++) {
    for (const name of names) times[name].push(wallMs(COMMANDS[name]));
  }
  return {
    repetitions,
    bareNodeMs: median(times.bareNodeMs),
    versionMs: median(times.versionMs),
    helpMs: median(times.helpMs),
    validateMs: median(times.validateMs),
  };
}

/** The figures as bench rows: name, value with the anchor, target. */
export function startupRows(f: StartupFigures): [string, string, string][] {
  const mark = (ok: boolean) => (ok ? 'met' : 'NOT met');
  const row = (name: string, ms: number, target: number): [string, string, string] => [
    `9 ${name} (median of ${f.repetitions})`,
    `${ms} ms (bare node -e 0: ${f.bareNodeMs} ms; +${ms - f.bareNodeMs} ms)`,
    `<= ${target} ms ${mark(ms <= target)}`,
  ];
  return [
    row('start-up: mediabatch --version', f.versionMs, STARTUP_TARGETS.versionMs),
    row('start-up: mediabatch --help', f.helpMs, STARTUP_TARGETS.helpMs),
    row('start-up: mediabatch validate, 3 tasks', f.validateMs, STARTUP_TARGETS.validateMs),
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const figures = measureStartup(Number(process.argv[2] ?? 5));
  for (const [name, value, target] of startupRows(figures)) console.log(`${name}  ${value}  ${target}`);
}
