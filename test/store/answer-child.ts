// One worker of the shared-job races in answers.test.ts, in its own process: `node --import tsx
// answer-child.ts <state> <run> <task> <answer|adopt> <attempt> <img_uuid>`. It opens the store, prints
// "open", waits for a line on stdin, then records the API's answer for the task (the job, 3 tokens), or
// adopts that job for the task in doubt as a callback would, and prints what the store made of it as one
// JSON line. A store that throws ends the process with its error, as a worker would end.
import { createInterface } from 'node:readline';
import { openStore } from '../../src/store/index.js';

const [state = '', runId = '', taskId = '', how = '', attemptArg = '', imgUuid = ''] = process.argv.slice(2);
const store = openStore(state);
process.stdout.write('open\n');
const lines = createInterface({ input: process.stdin });
for await (const _ of lines) break;
lines.close();
const answer = { imgUuid, cost: 3, keyFingerprint: 'fp' };
const recorded =
  how === 'adopt'
    ? store.submissions.adoptInDoubt(runId, taskId, answer)
    : store.submissions.recordSubmitted(runId, taskId, Number(attemptArg), answer);
process.stdout.write(`${JSON.stringify(recorded)}\n`);
store.close();
