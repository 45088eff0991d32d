// The fleet's recipes (examples/fleet: docker compose, a Kubernetes Deployment, an AWS Batch job), checked as
// far as a machine without Docker, Kubernetes or AWS allows: each worker's command is a real `mediabatch`
// command whose flags exist, every variable it is given is one mediabatch (or the AWS SDK it uses) reads,
// no secret is written in the recipe, the state URL comes from a Secret or the environment, workers have
// no volume but a read-only manifest; and the compose worker's command, run as real processes against a
// local PostgreSQL, an S3 server and the sandbox, books every result once in the bucket.

import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { openStore } from '../../src/store/index.js';
import { expectRetriesOnlyWhatPasses } from '../helpers/aws-batch.js';
import { REPO, spawnCli } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, SANDBOX_KEY } from '../helpers/run-env.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

const FLEET = join(REPO, 'examples', 'fleet');
const CAMPAIGN = join(REPO, 'examples', 'campaign.yaml');

/** One variable given to a worker: a plain value, or taken from a secret store / the host's environment. */
type Var = { value: string } | { from: 'secret' | 'environment' };

interface Worker {
  args: string[];
  env: Record<string, Var>;
  /** What the worker mounts: `manifest` (read-only, a ConfigMap or a bind `:ro`) or anything else by kind. */
  volumes: string[];
}

/** A compose value: `${NAME…}` only means the value comes from the host's environment (.env). */
function composeVar(value: string): Var {
  return /\$\{[A-Z_]+/.test(value) ? { from: 'environment' } : { value };
}

function compose(): Worker {
  const doc = parse(readFileSync(join(FLEET, 'docker-compose.yml'), 'utf8'), { merge: true });
  const worker = doc.services.worker;
  expect(worker.deploy.replicas).toBe(3);
  expect(Object.keys(doc.services).sort()).toEqual(['bucket', 'postgres', 's3', 'view', 'worker']);
  const env = Object.fromEntries(
    Object.entries(worker.environment as Record<string, string>).map(([k, v]) => [k, composeVar(v)]),
  );
  const volumes = (worker.volumes as string[]).map((v) =>
    v.endsWith(':ro') && v.includes('campaign.yaml') ? 'manifest' : v,
  );
  return { args: worker.command, env, volumes };
}

function kubernetes(): Worker {
  const docs = parseAllDocuments(readFileSync(join(FLEET, 'kubernetes.yaml'), 'utf8')).map((d) => d.toJS());
  expect(docs.map((d) => d.kind)).toEqual(['Deployment']);
  const pod = docs[0].spec.template.spec;
  const container = pod.containers[0];
  const env: Record<string, Var> = Object.fromEntries(
    container.env.map((e: { name: string; value?: string; valueFrom?: { secretKeyRef?: unknown } }) => [
      e.name,
      e.valueFrom?.secretKeyRef ? { from: 'secret' } : { value: String(e.value) },
    ]),
  );
  const volumes = (pod.volumes ?? []).map((v: { configMap?: unknown; name: string }) =>
    v.configMap ? 'manifest' : v.name,
  );
  for (const mount of container.volumeMounts ?? []) expect(mount.readOnly).toBe(true);
  return { args: container.args, env, volumes };
}

function awsBatch(): Worker {
  const def = JSON.parse(readFileSync(join(FLEET, 'aws-batch-job-definition.json'), 'utf8'));
  const props = def.containerProperties;
  const [binary, ...args] = props.command as string[];
  expect(binary).toBe('mediabatch');
  const env: Record<string, Var> = {};
  for (const e of props.environment) env[e.name] = { value: e.value };
  for (const s of props.secrets) env[s.name] = { from: 'secret' };
  const volumes = [...(props.volumes ?? []), ...(props.mountPoints ?? [])].map(() => 'volume');
  const submit = readFileSync(join(FLEET, 'submit.sh'), 'utf8');
  expect(submit).toContain('--array-properties "size=$WORKERS"');
  expect(submit).toContain(`--job-definition ${def.jobDefinitionName}`);
  return { args, env, volumes };
}

/** The long flags a help text lists. */
function helpFlags(help: string): Set<string> {
  return new Set([...help.matchAll(/^\s+(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1] ?? ''));
}

/** Every source file's text: a variable is "read by mediabatch" when its name is spelt in src/. */
function sources(dir = join(REPO, 'src')): string {
  return readdirSync(dir, { withFileTypes: true })
    .map((e) =>
      e.isDirectory()
        ? sources(join(dir, e.name))
        : e.name.endsWith('.ts')
          ? readFileSync(join(dir, e.name))
          : '',
    )
    .join('\n');
}
const SRC = sources();

const SECRET_NAME = /KEY|SECRET|PASSWORD|TOKEN|STATE_URL/;

describe.each([
  ['docker-compose.yml', compose],
  ['kubernetes.yaml', kubernetes],
  ['aws-batch-job-definition.json', awsBatch],
])('examples/fleet/%s', (file, render) => {
  it('runs a real mediabatch run whose flags exist, with a fixed run id every worker joins', async () => {
    const { args } = render();
    expect(args[0]).toBe('run');
    const known = helpFlags((await cli(['run', '--help'])).stdout);
    for (const flag of args.filter((a) => a.startsWith('--'))) expect(known, flag).toContain(flag);
    expect(args[args.indexOf('--run-id') + 1]).toMatch(/^[a-z0-9-]+$/);
    // The state is named by MEDIABATCH_STATE_URL, never by a flag that would put it in the pod spec.
    expect(args).not.toContain('--state');
  });

  it('gives only variables mediabatch reads, the state URL and every secret from a secret store', () => {
    const { env } = render();
    for (const name of Object.keys(env)) expect(SRC.includes(name), `${name} is read by src/`).toBe(true);
    expect(env['MEDIABATCH_STATE_URL']).toBeDefined();
    for (const [name, v] of Object.entries(env)) {
      if (SECRET_NAME.test(name)) expect('from' in v, `${name} is not written in ${file}`).toBe(true);
    }
    // Nothing that looks like a credential anywhere in the file: URLs carry no literal password.
    const text = readFileSync(join(FLEET, file), 'utf8');
    for (const m of text.matchAll(/[a-z]+:\/\/[^\s/:@]+:([^\s@]+)@/g)) expect(m[1]).toMatch(/^(\$\{|…)/);
  });

  it('keeps no state on the worker: its only volume is the read-only manifest', () => {
    const { volumes } = render();
    for (const v of volumes) expect(v).toBe('manifest');
  });
});

describe('examples/fleet/aws-batch-job-definition.json', () => {
  it('starts a worker again when it was interrupted, killed or lost its host, and after no other exit', () => {
    expectRetriesOnlyWhatPasses(
      JSON.parse(readFileSync(join(FLEET, 'aws-batch-job-definition.json'), 'utf8')),
    );
  });
});

describe('the compose worker as local processes (PostgreSQL, an S3 server, the sandbox)', () => {
  let pg: Postgres;
  let s3: TestS3;
  let sandbox: Sandbox;
  let dir: string;
  beforeAll(async () => {
    pg = await startPostgres();
    s3 = await startS3('my-results-bucket');
    sandbox = await startSandbox({ port: 0, speed: 0, seed: 7, apiKey: SANDBOX_KEY, balance: 10_000 });
    dir = await mkdtemp(join(tmpdir(), 'mb-fleet-'));
  });
  afterAll(async () => {
    await sandbox?.close();
    await s3?.close();
    pg?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('runs examples/campaign.yaml into the bucket; a worker started again sends nothing', async () => {
    const worker = compose();
    const state = pg.freshDatabase();
    // The recipe's variables with this machine's services in place of the compose ones.
    const local: Record<string, string> = {
      MEDIABATCH_STATE_URL: state,
      MEDIABATCH_BASE_URL: sandbox.baseUrl,
      MEDIABATCH_API_KEY: SANDBOX_KEY,
      MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
      AWS_ACCESS_KEY_ID: S3_KEY_ID,
      AWS_SECRET_ACCESS_KEY: S3_SECRET,
    };
    expect(Object.keys(worker.env).sort()).toEqual(Object.keys(local).sort());
    const args = worker.args.map((a) => (a === '/manifest/campaign.yaml' ? CAMPAIGN : a));
    const runId = args[args.indexOf('--run-id') + 1] as string;
    const env = { ...local, MEDIABATCH_POLL_SCALE: FAST_POLLS };

    const first = spawnCli([...args, '--no-probe'], { cwd: dir, env });
    expect(await first.exited, first.stderr()).toBe(0);
    const store = openStore(state);
    let tasks: number;
    try {
      const counts = store.tasks.countTasksByState(runId);
      tasks = store.tasks.tasksOfRun(runId).length;
      expect(counts.done).toBe(tasks);
    } finally {
      store.close();
    }
    expect(sandbox.state().jobs).toHaveLength(tasks);
    // s3rver keeps each object as `<key>._S3rver_object`: one result per task, under the run's prefix.
    const results = readdirSync(join(s3.dir, 'my-results-bucket'), { recursive: true })
      .map(String)
      .filter((f) => /\.(png|mp4)\._S3rver_object$/.test(f));
    expect(results).toHaveLength(tasks);
    for (const f of results) expect(f.startsWith(join('mediabatch', runId))).toBe(true);

    // What a Deployment does when the container exits: starts it again. The run is finished: no request.
    const again = spawnCli([...args, '--no-probe'], { cwd: dir, env });
    expect(await again.exited, again.stderr()).toBe(0);
    expect(sandbox.state().jobs).toHaveLength(tasks);
  }, 180_000);
});
