// `npm run mutate [-- module ...]`: StrykerJS over the money modules, one module at a time (each against its
// own test files, see stryker.config.mjs), then one table of scores. Exit 1 when a module is under 90 %.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { MODULES } from '../stryker.config.mjs';

const BREAK = 90;

interface MutantReport {
  status: string;
  mutatorName: string;
  location: { start: { line: number; column: number } };
  replacement?: string;
}

interface Score {
  module: string;
  file: string;
  total: number;
  killed: number;
  survived: MutantReport[];
  score: number;
}

const KILLED = new Set(['Killed', 'Timeout']);
const COUNTED = new Set(['Killed', 'Timeout', 'Survived', 'NoCoverage']);

function score(module: string, file: string): Score {
  const report = JSON.parse(readFileSync(`reports/mutation/${module}.json`, 'utf8')) as {
    files: Record<string, { mutants: MutantReport[] }>;
  };
  const mutants = report.files[file]?.mutants ?? [];
  const counted = mutants.filter((m) => COUNTED.has(m.status));
  const killed = counted.filter((m) => KILLED.has(m.status)).length;
  return {
    module,
    file,
    total: counted.length,
    killed,
    survived: counted.filter((m) => !KILLED.has(m.status)),
    score: counted.length === 0 ? 100 : (100 * killed) / counted.length,
  };
}

const known = Object.keys(MODULES) as (keyof typeof MODULES)[];
const asked = process.argv.slice(2);
const unknown = asked.filter((m) => !known.includes(m as keyof typeof MODULES));
if (unknown.length > 0) {
  console.error(`mutate: unknown module ${unknown.join(', ')}; known modules: ${known.join(', ')}`);
  process.exit(2);
}
const chosen = asked.length > 0 ? (asked as (keyof typeof MODULES)[]) : known;

const scores: Score[] = [];
for (const module of chosen) {
  const { file } = MODULES[module];
  console.log(`\n== ${module}: ${file}`);
  // Stryker's own exit code says "under the break threshold" too; the table below says it per module.
  const run = spawnSync('npx', ['stryker', 'run', 'stryker.config.mjs'], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, MUTATE_MODULE: module },
  });
  if (run.error !== undefined) throw run.error;
  scores.push(score(module, file));
}

console.log('\nmodule        score   killed/total  survivors (line:column mutator)');
for (const s of scores) {
  const where = s.survived.map((m) => `${m.location.start.line}:${m.location.start.column} ${m.mutatorName}`);
  console.log(
    `${s.module.padEnd(12)} ${s.score.toFixed(1).padStart(5)} %  ${`${s.killed}/${s.total}`.padStart(12)}  ${where.join(', ')}`,
  );
}
const low = scores.filter((s) => s.score < BREAK);
if (low.length > 0) {
  console.error(`mutate: under ${BREAK} %: ${low.map((s) => s.module).join(', ')}`);
  process.exit(1);
}
