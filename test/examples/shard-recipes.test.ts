// The ready-made recipes (examples/kubernetes, examples/aws-batch, examples/github-actions). Each
// recipe's command is rendered for every index the engine would start, with the variables the engine sets,
// and handed to `mediabatch plan --json` in place of `run` (same flags, no network): the n shards must
// cover examples/campaign.yaml exactly once, chains whole, and agree on the count.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { EXIT } from '../../src/exit-codes.js';
import { expectRetriesOnlyWhatPasses } from '../helpers/aws-batch.js';
import { REPO } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';

const EXAMPLES = join(REPO, 'examples');
const MANIFEST = join(EXAMPLES, 'campaign.yaml');

interface Rendered {
  args: string[];
  env: Record<string, string>;
}

/** A shell command line as words: `$VAR`, `${VAR}` and `"…"` as sh would expand and join them. */
function shellWords(line: string, env: Record<string, string>): string[] {
  const expanded = line.replace(/\$\{?([A-Z_][A-Z0-9_]*)\}?/g, (_, name: string) => env[name] ?? '');
  return [...expanded.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '');
}

function kubernetes(): { count: number; shards: Rendered[] } {
  const docs = parseAllDocuments(readFileSync(join(EXAMPLES, 'kubernetes', 'indexed-job.yaml'), 'utf8')).map(
    (d) => d.toJS(),
  );
  const job = docs.find((d) => d.kind === 'Job');
  const spec = job.spec;
  expect(spec.completionMode).toBe('Indexed');
  expect(spec.parallelism).toBe(spec.completions);
  const container = spec.template.spec.containers[0];
  const env: Record<string, string> = Object.fromEntries(
    container.env
      .filter((e: { value?: string }) => e.value !== undefined)
      .map((e: { name: string; value: string }) => [e.name, e.value]),
  );
  expect(Number(env['MEDIABATCH_SHARD_COUNT'])).toBe(spec.completions);
  // The key comes from a Secret, never from the manifest or the command.
  expect(
    container.env.find((e: { name: string }) => e.name === 'MEDIABATCH_API_KEY').valueFrom.secretKeyRef.name,
  ).toBeTruthy();
  const state = container.volumeMounts.find((m: { mountPath: string }) => m.mountPath === '/state');
  expect(state.subPathExpr).toContain('$(JOB_COMPLETION_INDEX)');
  const shards = Array.from({ length: spec.completions }, (_, i) => ({
    args: container.args as string[],
    env: { ...env, JOB_COMPLETION_INDEX: String(i) },
  }));
  return { count: spec.completions, shards };
}

function awsBatch(): { count: number; shards: Rendered[] } {
  const def = JSON.parse(readFileSync(join(EXAMPLES, 'aws-batch', 'job-definition.json'), 'utf8'));
  const submit = readFileSync(join(EXAMPLES, 'aws-batch', 'submit.sh'), 'utf8');
  const count = Number(/SHARDS=\$\{SHARDS:-(\d+)\}/.exec(submit)?.[1]);
  expect(submit).toContain('--array-properties "size=$SHARDS"');
  expect(submit).toContain('name=MEDIABATCH_SHARD_COUNT,value=$SHARDS');
  const env: Record<string, string> = Object.fromEntries(
    def.containerProperties.environment.map((e: { name: string; value: string }) => [e.name, e.value]),
  );
  expect(Number(env['MEDIABATCH_SHARD_COUNT'])).toBe(count);
  const [sh, dashC, script] = def.containerProperties.command as string[];
  expect([sh, dashC]).toEqual(['sh', '-c']);
  const shards = Array.from({ length: count }, (_, i) => {
    const indexed = { ...env, AWS_BATCH_JOB_ARRAY_INDEX: String(i) };
    const command = (script as string).split('exec ')[1] as string;
    const words = shellWords(command, indexed);
    expect(words[0]).toBe('mediabatch');
    return { args: words.slice(1), env: indexed };
  });
  return { count, shards };
}

function githubActions(): { count: number; shards: Rendered[] } {
  const workflow = parse(readFileSync(join(EXAMPLES, 'github-actions', 'shards.yml'), 'utf8'));
  const job = workflow.jobs.shard;
  const matrix = job.strategy.matrix.shard as number[];
  const step = job.steps.find((s: { name?: string }) => s.name === 'Run the shard');
  const runId = workflow.on.workflow_dispatch.inputs.run_id.default as string;
  const render = (v: string, shard: number) =>
    // GitHub's expressions, not JavaScript's: `$` + `{{ … }}`.
    String(v)
      .replace(/\$\{\{ matrix\.shard \}\}/g, String(shard))
      .replace(/\$\{\{ inputs\.run_id \}\}/g, runId);
  const shards = matrix.map((shard) => {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...workflow.env, ...job.env })) {
      if (!String(v).includes('secrets.')) env[k] = render(String(v), shard);
    }
    const words = shellWords(step.run, env);
    expect(words[0]).toBe('mediabatch');
    return { args: words.slice(1), env };
  });
  expect(Number(workflow.env.MEDIABATCH_SHARD_COUNT)).toBe(matrix.length);
  return { count: matrix.length, shards };
}

/** The recipe's `run` as `plan --json`: the manifest (mapped to examples/), its shard flags, its env. */
async function taskIdsOf(r: Rendered): Promise<string[]> {
  const at = r.args.indexOf('run');
  expect(at).toBeGreaterThanOrEqual(0);
  const manifest = r.args[at + 1] as string;
  expect(manifest.endsWith('campaign.yaml')).toBe(true);
  const flags: string[] = [];
  const rest = r.args.slice(at + 2);
  for (let i = 0; i < rest.length; i++) {
    const flag = rest[i] as string;
    if (flag === '--shard-from-env') flags.push(flag);
    else if (flag === '--shard' || flag === '--shard-count') flags.push(flag, rest[++i] as string);
    else if (flag === '--run-id') expect(rest[++i]).toMatch(/^[A-Za-z0-9_-]+$/);
  }
  expect(flags.length).toBeGreaterThan(0);
  const out = await cli(
    ['--state', join(REPO, 'state', 'never-created.db'), 'plan', MANIFEST, '--json', '--no-probe', ...flags],
    {
      env: r.env,
    },
  );
  expect(out.code, out.stderr).toBe(0);
  return (JSON.parse(out.stdout) as { tasks: { id: string }[] }).tasks.map((t) => t.id);
}

describe.each([
  ['kubernetes/indexed-job.yaml', kubernetes],
  ['aws-batch/job-definition.json', awsBatch],
  ['github-actions/shards.yml', githubActions],
])('%s', (_name, render) => {
  it('renders a command per index whose shards cover the manifest exactly once', async () => {
    const { count, shards } = render();
    expect(count).toBe(3);
    expect(shards.length).toBe(count);
    const whole = await cli(['plan', MANIFEST, '--json', '--no-probe']);
    const all = (JSON.parse(whole.stdout) as { tasks: { id: string }[] }).tasks.map((t) => t.id);
    const per: string[][] = [];
    for (const shard of shards) per.push(await taskIdsOf(shard));
    for (const ids of per) expect(ids.length).toBeGreaterThan(0);
    expect(per.flat().sort()).toEqual([...all].sort());
    // Chains whole: each clip with its hero shot.
    for (const product of ['mug', 'shirt', 'cap', 'tote']) {
      expect(per.findIndex((ids) => ids.includes(`clip-${product}`))).toBe(
        per.findIndex((ids) => ids.includes(`hero-${product}`)),
      );
    }
  }, 60_000);
});

describe('kubernetes/indexed-job.yaml', () => {
  it('retries an index that was interrupted or killed, and fails it on any other exit', () => {
    const docs = parseAllDocuments(readFileSync(join(EXAMPLES, 'kubernetes', 'indexed-job.yaml'), 'utf8'));
    const job = docs.map((d) => d.toJS()).find((d) => d.kind === 'Job');
    type Rule = { action: string; onExitCodes?: { operator: 'In' | 'NotIn'; values: number[] } };
    const rules = job.spec.podFailurePolicy.rules as Rule[];
    // Kubernetes' podFailurePolicy: the first rule that matches acts; none counts toward the index's retries.
    const action = (code: number) =>
      rules.find(
        (r) =>
          r.onExitCodes !== undefined &&
          (r.onExitCodes.operator === 'In') === r.onExitCodes.values.includes(code),
      )?.action ?? 'Count';
    for (const [name, code] of Object.entries(EXIT)) {
      if (code === EXIT.ok) continue;
      expect(action(code), `exit ${code} (${name})`).toBe(code === EXIT.interrupted ? 'Count' : 'FailIndex');
    }
    expect(action(137), 'killed').toBe('Count');
  });
});

describe('aws-batch/job-definition.json', () => {
  it('retries a shard that was interrupted, killed or lost its host, and no other exit', () => {
    expectRetriesOnlyWhatPasses(
      JSON.parse(readFileSync(join(EXAMPLES, 'aws-batch', 'job-definition.json'), 'utf8')),
    );
  });
});
