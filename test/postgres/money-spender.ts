// One spender of money-arbitration.test.ts, in its own process: `node --import tsx money-spender.ts
// <state url> <who> <rounds> <seed>`. It asks the store for intents on its own tasks of the runs `r1`,
// `r2` and `r3` as fast as it can, gives some back (an answer that charged nothing), and after every intent it got
// reads both budgets. Prints one JSON line: how many intents it got and was refused, and every reading
// that found a budget passed.
import { OverBudgetError, openStore } from '../../src/store/index.js';
import { seeded } from '../helpers/child.js';

const [url = '', who = '', roundsArg = '0', seedArg = '1'] = process.argv.slice(2);
const store = openStore(url);
const random = seeded(Number(seedArg));
const runs = ['r1', 'r2', 'r3'] as const;
const tasksOf = (runId: string) =>
  Array.from({ length: 12 }, (_, i) => `${who}-${i}`).map((taskId) => ({ runId, taskId }));
const mine = runs.flatMap(tasksOf);
const held: { runId: string; taskId: string; attemptNo: number }[] = [];
let granted = 0;
let refused = 0;
const passed: string[] = [];

for (let round = 0; round < Number(roundsArg); round++) {
  const free = mine.filter((t) => !held.some((h) => h.runId === t.runId && h.taskId === t.taskId));
  const next = free[Math.floor(random() * free.length)];
  if (next !== undefined) {
    try {
      const attemptNo = store.submissions.recordSubmitIntent(next.runId, next.taskId);
      held.push({ ...next, attemptNo });
      granted += 1;
      for (const runId of runs) {
        const f = store.reservations.figures(runId);
        const committed = f.charged - f.refunded + f.held + f.doubt;
        if (f.budget !== undefined && committed > f.budget)
          passed.push(`${runId}: ${committed} > ${f.budget}`);
        const p = f.period;
        if (p !== undefined && p.spent + p.reserved > p.budget) {
          passed.push(`${runId} period: ${p.spent + p.reserved} > ${p.budget}`);
        }
      }
    } catch (error) {
      if (!(error instanceof OverBudgetError)) throw error;
      refused += 1;
    }
  }
  // Half the time one of its sent tasks is answered "not charged": its worst case is given back.
  if (held.length > 0 && random() < 0.5) {
    const [back] = held.splice(Math.floor(random() * held.length), 1);
    if (back !== undefined) {
      store.submissions.recordNotCharged(back.runId, back.taskId, back.attemptNo, {
        outcome: 'not_charged',
        message: 'busy, not charged',
      });
    }
  }
}
store.close();
process.stdout.write(`${JSON.stringify({ granted, refused, passed })}\n`);
