// `npm run torture`: the full fault-injection suite. A 500-task run against a faulty sandbox, killed
// with SIGKILL at 20 seeded moments and restarted until it ends; hostile inputs; the sentinel key; a
// fleet of three workers on PostgreSQL, 300 tasks, killed, its database stopped, its packets dropped; a
// fleet whose worker storing a new run's plan is killed again and again.
// Prints each figure and exits 1 when a guarantee broke. `--small` runs the size used in `npm test`.
import { parseArgs } from 'node:util';
import { runAccountSums } from './account-sums.js';
import { crashTorture } from './crash-loop.js';
import { fleetChaos } from './fleet-chaos.js';
import { formatGuarantees, type Guarantee, guarantee } from './guarantees.js';
import { hostileTorture } from './hostile.js';
import { hungConnection } from './hung-connection.js';
import { runMoneyModel } from './money-model.js';
import { scenarioTorture } from './scenarios.js';
import { FULL, SMALL } from './sizes.js';
import { storingChaos } from './storing-chaos.js';
import { twoSpendersRound } from './two-spenders.js';

const { values } = parseArgs({ options: { small: { type: 'boolean', default: false } } });
const size = values.small ? SMALL : FULL;
const log = (line: string) => process.stderr.write(`torture: ${line}\n`);
const started = performance.now();

log(`crash loop: ${size.crash.images + size.crash.lines} tasks, ${size.crash.kills} kills`);
const crash = await crashTorture({ ...size.crash, log });
const f = crash.figures;
console.log('Crash loop (SIGKILL at seeded moments, restarted until the run ended)');
console.log(`  tasks ${f.tasks}, kills ${f.kills}, rounds ${f.rounds}, exit codes ${f.exitCodes.join(' ')}`);
console.log(
  `  end states: ${Object.entries(f.states)
    .map(([s, n]) => `${n} ${s}`)
    .join(', ')}`,
);
console.log(`  max charges per task: ${f.maxChargesPerTask} (must be 1 at most)`);
console.log(
  `  tasks in doubt: ${f.tasksInDoubt} = ${f.chargeThenErrorFaults} charge-then-error faults injected + ${f.inDoubtFromKills} killed between intent and answer`,
);
console.log(`  files checked (size and sha256): ${f.filesChecked}; .part files left: ${f.partFiles}`);
console.log(`  integrity_check: ${f.integrity}`);
console.log(
  `  ledger net ${f.ledgerNet} + never-answered charges ${f.unseenNet} = balance change ${f.balanceChange} tokens`,
);
console.log(`  sentinel API key: ${f.sentinelHits} hits in ${f.placesSearched} outputs and files`);
console.log(formatGuarantees(crash.guarantees));

log('hostile inputs');
const hostile = await hostileTorture({ log });
console.log('Hostile inputs');
for (const c of hostile.cases) console.log(`  ${c.name}: ${c.outcome} in ${c.ms} ms`);
console.log(formatGuarantees(hostile.guarantees));

log("faults on the user's own machine");
const scenarios = await scenarioTorture({ ...size.scenarios, log });
console.log("Faults on the user's own machine (in-process, injected clock)");
for (const c of scenarios.cases) console.log(`  ${c.name}: ${c.outcome} in ${c.ms} ms`);
console.log(formatGuarantees(scenarios.guarantees));

const modelRuns = values.small ? 20 : 2000;
const modelSeed = Number(process.env['MONEY_MODEL_SEED'] ?? Date.now() % 2_147_483_647);
log(`money model: ${modelRuns} random sequences of actors against the store, seed ${modelSeed}`);
const model = runMoneyModel(modelRuns, modelSeed);
console.log('Money in the store against a model of budget and ledger (fast-check)');
console.log(`  ${model.runs} runs, seed ${model.seed} (MONEY_MODEL_SEED=${model.seed} replays it)`);
if (model.failure) console.log(model.failure);
const moneyGuarantees = [
  guarantee(
    'worst cases plus net spend within the budget, one charge per ask, store = model',
    model.failure === undefined,
    model.failure ?? '',
  ),
];
console.log(formatGuarantees(moneyGuarantees));

const sumsRuns = values.small ? 6 : 500;
const sumsSeed = Number(process.env['ACCOUNT_SUMS_SEED'] ?? Date.now() % 2_147_483_647);
log(`account sums: ${sumsRuns} random sequences of the store's operations, seed ${sumsSeed}`);
const sums = runAccountSums(sumsRuns, sumsSeed);
console.log("The account's sums kept by triggers against the same sums read from every row (fast-check)");
console.log(`  ${sums.runs} runs, seed ${sums.seed} (ACCOUNT_SUMS_SEED=${sums.seed} replays it)`);
if (sums.failure) console.log(sums.failure);
const sumsGuarantees = [
  guarantee(
    'estimates and money by kind kept by triggers = read from every row',
    sums.failure === undefined,
    sums.failure ?? '',
  ),
];
console.log(formatGuarantees(sumsGuarantees));

const spenderRounds = values.small ? 2 : 50;
const spenderSeed = Number(process.env['TWO_SPENDERS_SEED'] ?? Date.now() % 100_000);
log(`two spenders: ${spenderRounds} rounds of run + review --reroll in processes, seeds from ${spenderSeed}`);
const spenderProblems: string[] = [];
let rerolls = 0;
let maxSpent = 0;
for (let i = 0; i < spenderRounds; i++) {
  const round = await twoSpendersRound(spenderSeed + i);
  rerolls += round.rerollsRecorded;
  maxSpent = Math.max(maxSpent, round.spent);
  spenderProblems.push(...round.problems.map((p) => `seed ${round.seed}: ${p}`));
}
console.log('Two processes spending from one budget (run and review --reroll, random moments)');
console.log(
  `  ${spenderRounds} rounds from seed ${spenderSeed}, ${rerolls} re-rolls recorded, at most ${maxSpent} of 1.6 spent`,
);
const spenderGuarantees = [
  guarantee(
    'the sandbox never charges past the budget nor a task more than asked',
    spenderProblems.length === 0,
    spenderProblems,
  ),
];
console.log(formatGuarantees(spenderGuarantees));

const fl = size.fleet;
log(
  `fleet chaos: ${fl.stills * 2 + fl.images} tasks, ${fl.workers} workers, seed ${fl.seed} (FLEET_CHAOS_SEED=${fl.seed} replays its moments)`,
);
const fleet = await fleetChaos({ ...fl, log });
const ff = fleet.figures;
console.log(
  'A fleet on PostgreSQL under chaos (kill -9, the server stopped, packets dropped then the connection cut)',
);
console.log(
  `  ${ff.tasks} tasks, ${fl.workers} workers, seed ${ff.seed}: ${ff.kills} kills, ${ff.starts} worker starts, exit codes ${JSON.stringify(ff.exitCodes)}`,
);
console.log(
  `  PostgreSQL stopped ${ff.pgPausedMs} ms, packets dropped ${ff.blackholedMs} ms; stills approved ${ff.approved}, rejected ${ff.rejected}`,
);
console.log(
  `  end states: ${Object.entries(ff.states)
    .map(([s, n]) => `${n} ${s}`)
    .join(', ')}; most POSTs for one task: ${ff.maxPostsPerTask}; results in the bucket: ${ff.results}`,
);
console.log(
  `  ledger ${ff.ledgerNetMicro} + in doubt ${ff.inDoubtNetMicro} = sandbox ${ff.sandboxNetMicro} micro-tokens; peak ${ff.peakLedgerMicro} of budget ${ff.budgetMicro} (${ff.budgetStops} stops on it); ${ff.senders} worker processes sent, ${ff.lostWorkers} marked lost; ${ff.seconds} s`,
);
console.log(formatGuarantees(fleet.guarantees));

const st = size.storing;
log(
  `storing chaos: ${st.tasks} tasks, ${st.workers} workers, ${st.kills} kills of the storer, seed ${st.seed} (STORING_CHAOS_SEED=${st.seed} replays its moments)`,
);
const storing = await storingChaos({ ...st, log });
const sf = storing.figures;
console.log(
  "A fleet's new run whose worker storing the plan is killed (kill -9), the last time every worker",
);
console.log(
  `  ${sf.tasks} tasks, seed ${sf.seed}: ${sf.kills} kills at ${sf.storedAtKills.join(', ')} stored, ${sf.starts} worker starts, exit codes ${JSON.stringify(sf.exitCodes)}`,
);
console.log(
  `  stored ${sf.stored}; end states ${JSON.stringify(sf.states)}; most POSTs for one task ${sf.maxPostsPerTask}; ledger ${sf.ledgerNetMicro} + in doubt ${sf.inDoubtNetMicro} = sandbox ${sf.sandboxNetMicro} micro-tokens; ${sf.seconds} s`,
);
console.log(formatGuarantees(storing.guarantees));

log('a runner on a hung PostgreSQL connection');
const hung = await hungConnection();
console.log('A runner whose PostgreSQL connection hangs (a proxy forwards nothing, closes nothing)');
console.log(`  exit ${hung.code} after ${hung.waitedMs} ms`);
console.log(formatGuarantees(hung.guarantees));

const all: Guarantee[] = [
  ...fleet.guarantees,
  ...storing.guarantees,
  ...hung.guarantees,
  ...spenderGuarantees,
  ...crash.guarantees,
  ...hostile.guarantees,
  ...scenarios.guarantees,
  ...moneyGuarantees,
  ...sumsGuarantees,
];
const broken = all.filter((g) => !g.ok);
console.log(
  `${all.length - broken.length} of ${all.length} guarantees held (${Math.round((performance.now() - started) / 1000)} s)`,
);
process.exitCode = broken.length > 0 ? 1 : 0;
