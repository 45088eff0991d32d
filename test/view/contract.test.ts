// The page and the server share a checked contract. The page's scripts are type-checked against the
// answers they read (assets/view/api-types.d.ts, `tsc -p assets/view` in npm test); here, real answers
// of a real run are read through those types by the type checker (a field the page reads that the
// server no longer sends fails), and a wrong field name planted in a copy of the page fails the check.
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/cli/status-lines.js';
import { openStore, TASK_STATES } from '../../src/store/index.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { REPO } from '../helpers/child.js';
import { VARIANTS } from '../helpers/review-chain.js';
import type { RunEnv } from '../helpers/run-env.js';
import { faultyRun } from './helpers.js';

const PAGE = join(REPO, 'assets', 'view');

let env: RunEnv;
let view: ViewServer;
let scratch: string;

async function get(path: string): Promise<unknown> {
  const res = await fetch(`http://127.0.0.1:${view.port}${path}`, {
    headers: { authorization: `Bearer ${view.token}` },
  });
  expect(res.status, path).toBe(200);
  return res.json();
}

/** The type checker's complaints about these files, with the page's compiler options. */
function check(dir: string, files: string[]): string[] {
  const config = ts.readConfigFile(join(PAGE, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, dir);
  const program = ts.createProgram(files, parsed.options);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file ? `${d.file.fileName.slice(dir.length + 1)}:` : '';
    return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

describe('the page and the API share a checked contract', () => {
  beforeAll(async () => {
    env = await faultyRun();
    const chain = await env.manifest({ name: 'chain', tasks: VARIANTS }, 'chain.yaml');
    await env.run(['run', chain, '--yes']);
    await env.run(['review', 'chain', '--approve', 'still-mug-1']);
    // A worker of the run (its panel's answer is read through its type like every other answer).
    const store = openStore(env.db);
    store.workers.join('batch', `1@host#n`, 'host', 1, 60_000);
    store.close();
    view = await startView({ stateFile: env.db, cwd: env.dir });
    // Inside the repository (removed after), so that the copies find uPlot's types as the page does.
    scratch = await mkdtemp(join(REPO, '.contract-'));
  }, 120_000);

  afterAll(async () => {
    await view?.close();
    await env?.close();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('serves the task states the page counts and filters by, awaiting_review included', async () => {
    const lists = (await get('/api/lists')) as { task_states: string[] };
    expect(lists.task_states).toEqual([...TASK_STATES]);
    expect(lists.task_states).toContain('awaiting_review');
    // No copy of the list in the page's scripts.
    for (const name of ['results.js', 'run-sections.js', 'format.js', 'app.js']) {
      expect(await readFile(join(PAGE, name), 'utf8'), name).not.toMatch(/'submitting',\s*'submitted'/);
    }
  });

  it("serves each state's label in status's words, which the page shows", async () => {
    const lists = (await get('/api/lists')) as { state_labels: Record<string, string> };
    expect(lists.state_labels).toEqual(LABEL);
    expect(lists.state_labels['awaiting_review']).toBe('awaiting review (of an upstream)');
    // The page says no state in words of its own.
    const format = await readFile(join(PAGE, 'format.js'), 'utf8');
    expect(format).not.toContain('waiting for a review');
    expect(format).toContain('lists().state_labels[state]');
  });

  it('reads real answers through the types the page is checked against', { timeout: 120_000 }, async () => {
    const answers: Array<[string, string]> = [
      ['Lists', '/api/lists'],
      ['RunsAnswer', '/api/runs'],
      ['RunDetail', '/api/runs/batch'],
      ['RunDetail', '/api/runs/chain'],
      ['TaskPage', '/api/runs/batch/tasks?order=id&limit=200'],
      ['TaskPage', '/api/runs/chain/tasks?order=id'],
      ['TaskDetail', '/api/runs/batch/tasks/clip'],
      ['TaskDetail', '/api/runs/chain/tasks/still-mug-1'],
      ['TaskDetail', '/api/runs/chain/tasks/clip-mug-2'],
      ['RerollPrice', '/api/runs/chain/reroll-price?taskIds=still-mug-2'],
      ['WorkersAnswer', '/api/runs/batch/workers'],
    ];
    const lines = [`import type * as Api from '${join(PAGE, 'api-types')}';`];
    for (const [i, [type, path]] of answers.entries()) {
      // The answer's own type, assigned to the declared one: fields the page does not read are allowed
      // (the server may add some), the ones it reads must be there with their types.
      lines.push(`const a${i} = ${JSON.stringify(await get(path))};`);
      lines.push(`export const t${i}: Api.${type} = a${i};`);
    }
    expect(JSON.stringify(await get('/api/runs/chain/tasks?order=id'))).toContain('waits_for_review');
    const file = join(scratch, 'answers.ts');
    await writeFile(file, lines.join('\n'));
    expect(check(scratch, [file])).toEqual([]);
  });

  it('fails the check on a wrong field name in the page, and passes the page as it is', {
    timeout: 180_000,
  }, async () => {
    const copy = join(scratch, 'view');
    await cp(PAGE, copy, { recursive: true });
    const files = ['app.js'].map((f) => join(copy, f));
    expect(check(copy, files)).toEqual([]);
    const sections = join(copy, 'run-sections.js');
    const text = await readFile(sections, 'utf8');
    expect(text).toContain('count(run.finished)');
    await writeFile(sections, text.replace('count(run.finished)', 'count(run.finishd)'));
    expect(check(copy, files)).toEqual([
      "run-sections.js: Property 'finishd' does not exist on type 'RunHead'. Did you mean 'finished'?",
    ]);
  });
});
