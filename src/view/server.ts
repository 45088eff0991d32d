// `mediabatch view`: a local web server over the state file, opened read-only. Every request passes the
// Host check and a capability before the router sees it (gate.ts, security.ts); routes take what their
// schemas allow (schemas.ts); the JSON API (data.ts, tasks.ts) is what the page uses; result files are
// served by their recorded row (files.ts); changes are pushed as server-sent events (events.ts).

import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { reviewSummary } from '../review/index.js';
import { openReadOnlyStore, openStore, type RunRecord, type Store, StoreError } from '../store/index.js';
import { isPostgresUrl, redactUrl, stateLocation } from '../store/location.js';
import { scrub } from '../util/secrets.js';
import { type Asset, indexHtml, loadAssets } from './assets.js';
import { ViewData } from './data.js';
import { decideOnce, priceOf, unknownTasks } from './decisions.js';
import { ChangeFeed, unreachable } from './events.js';
import { byteRange, openRecordedFile } from './files.js';
import { clientErrorAnswer, passGate } from './gate.js';
import { viewLists } from './lists.js';
import {
  assetParams,
  type DecisionBody,
  decisionBody,
  fileParams,
  noQuery,
  QueryError,
  rerollPriceQuery,
  runParams,
  type TaskListQuery,
  taskListQuery,
  taskParams,
  zodCompiler,
} from './schemas.js';
import { allowedHosts, newToken, securityHeaders } from './security.js';
import { taskDetail, taskList } from './tasks.js';
import { runWorkers } from './workers.js';

/**
 * Longer than any path Node reads (its header limit is 16 KiB): a task id of any length a manifest
 * allows is a route parameter like any other, never a 414 from the router.
 */
const MAX_PARAM = 64 * 1024;

export interface ViewOptions {
  stateFile: string;
  /** `--config` as given: the commands the view shows carry it. */
  configFile?: string;
  /** The working folder: relative output folders of runs are resolved against it. */
  cwd: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Default: a new random one. */
  token?: string;
  /** The run the printed address opens (default: the runs list). */
  run?: string;
  /** A fresh link to a result in a bucket (s3://bucket/key), or undefined when the bucket is unknown. */
  bucketLink?: (run: RunRecord, location: string) => Promise<string | undefined>;
  /** Origins the bucket links point at, allowed by the CSP for images and media. */
  mediaOrigins?: readonly string[];
  /** Where failures of the server itself are told (scrubbed); default: nowhere. */
  onError?: (message: string) => void;
  /**
   * Told when the state database goes away (its one line) and when it is back (undefined), as the open
   * pages are (their `store` event): the terminal says so too.
   */
  onAway?: (line: string | undefined) => void;
  now?: () => Date;
}

export interface ViewServer {
  /** `http://127.0.0.1:<port>/?token=<token>` (the bound host when it is not every address). */
  url: string;
  port: number;
  token: string;
  feed: ChangeFeed;
  close(): Promise<void>;
}

/** How long answers in flight may take once the view closes, before their sockets are destroyed. */
const CLOSE_GRACE_MS = 1000;

export class ViewError extends MediabatchError {
  override name = 'ViewError';
  override readonly exitCode = EXIT.invalid;
}

/**
 * The state read-only (a file, or a postgres:// URL); an older schema is brought up to date first, like
 * every command does.
 */
export function openViewStore(file: string): Store {
  if (!isPostgresUrl(file) && !existsSync(file)) {
    throw new ViewError(`state file ${file}: not found; give the state file of your runs with --state`);
  }
  try {
    return openReadOnlyStore(file);
  } catch (error) {
    if (!(error instanceof StoreError) || error.kind !== 'older') throw error;
    openStore(file).close();
    return openReadOnlyStore(file);
  }
}

export async function startView(o: ViewOptions): Promise<ViewServer> {
  const store = openViewStore(stateLocation(o.cwd, o.stateFile));
  if (o.run !== undefined && store.runs.getRun(o.run) === undefined) {
    const known = store.runs.listRuns().map((r) => r.id);
    store.close();
    throw new ViewError(
      `run ${o.run}: not found in ${isPostgresUrl(o.stateFile) ? redactUrl(o.stateFile) : o.stateFile}; ${known.length === 0 ? 'it has no runs yet' : `known runs, newest first: ${known.slice(0, 5).join(', ')}`}`,
    );
  }
  const token = o.token ?? newToken();
  const host = o.host ?? '127.0.0.1';
  const onError = (message: string) => o.onError?.(scrub(message));
  const data = new ViewData(store, {
    cwd: o.cwd,
    stateFile: o.stateFile,
    ...(o.configFile !== undefined ? { configFile: o.configFile } : {}),
    onError,
    ...(o.now ? { now: o.now } : {}),
  });
  const feed = new ChangeFeed(data, {
    onError: (error) => onError(error instanceof Error ? (error.stack ?? error.message) : String(error)),
    onAway: (line: string | undefined) => o.onAway?.(line === undefined ? undefined : scrub(line)),
  });
  const { app, hosts, headers } = gatedApp(o, token, () => ctx.port);
  const ctx: RouteContext = {
    app,
    data,
    feed,
    assets: loadAssets(),
    index: indexHtml(),
    headers,
    hosts,
    port: 0,
    opts: o,
  };
  answers(ctx);
  routes(ctx);
  decisionRoutes(ctx);
  // The costly figures of the run the address opens, or the newest, start to be read (in the background
  // at a large run): the address prints at once and the page shows them as they come in.
  const first = o.run === undefined ? store.runs.listRuns()[0] : store.runs.getRun(o.run);
  if (first !== undefined) data.runHead(first);
  try {
    await app.listen({ host, port: o.port ?? 0 });
  } catch (error) {
    await data.stop();
    store.close();
    throw error;
  }
  const address = app.server.address();
  ctx.port = typeof address === 'object' && address !== null ? address.port : (o.port ?? 0);
  for (const h of allowedHosts(host, ctx.port)) ctx.hosts.add(h);
  feed.start();
  const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return {
    url: `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${ctx.port}/?token=${token}`,
    port: ctx.port,
    token,
    feed,
    async close() {
      feed.stop();
      // Open pages hold keep-alive sockets and reconnect their event streams, which would keep the
      // server (and `run --view`) alive: after a short grace for answers in flight, all are destroyed.
      const force = setTimeout(() => app.server.closeAllConnections(), CLOSE_GRACE_MS);
      try {
        await app.close();
      } finally {
        clearTimeout(force);
      }
      await data.stop();
      store.close();
    },
  };
}

/** Fastify behind the gate: every request meets passGate (gate.ts) before the router sees it. */
function gatedApp(o: ViewOptions, token: string, port: () => number) {
  const hosts = new Set<string>();
  const headers = securityHeaders(o.mediaOrigins ?? []);
  const bootPage = indexHtml(token, o.run === undefined ? '' : `#/run/${encodeURIComponent(o.run)}`);
  const gate = { token, hosts, headers, port, bootPage };
  const app = Fastify({
    logger: false,
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM },
    clientErrorHandler: clientErrorAnswer(headers),
    serverFactory: (handler) =>
      createServer((req, res) => {
        if (passGate(gate, req, res)) handler(req, res);
      }),
  });
  return { app, hosts, headers };
}

interface RouteContext {
  app: FastifyInstance;
  data: ViewData;
  feed: ChangeFeed;
  assets: Map<string, Asset>;
  index: Buffer;
  headers: Record<string, string>;
  hosts: Set<string>;
  port: number;
  opts: ViewOptions;
}

/**
 * How every answer past the gate is made: parameters and bodies checked by their schemas (400, one
 * line), fastify's own refusals said as they are, our own failures logged (scrubbed) as a 500 without
 * details, and every text answer scrubbed of secrets whatever the route put in it.
 */
function answers(ctx: RouteContext): void {
  const { app } = ctx;
  app.setValidatorCompiler(zodCompiler);
  app.addHook('onSend', async (_request, _reply, payload) =>
    typeof payload === 'string' ? scrub(payload) : payload,
  );
  app.setErrorHandler((error, _request, reply) => {
    if (error instanceof QueryError) return reply.code(400).send({ v: 1, error: error.message });
    // The database away for now (a PostgreSQL server stopped or out of reach): said in one line, and
    // the next request tries it again.
    const away = unreachable(error);
    if (away !== undefined) {
      return reply.code(503).header('cache-control', 'no-store').send({ v: 1, error: away });
    }
    // Fastify's own answers to a bad request (a body that is not JSON, another content type): said as they are.
    const { statusCode: status, code } = error as { statusCode?: unknown; code?: unknown };
    if (typeof status === 'number' && status >= 400 && status < 500) {
      const what = typeof code === 'string' && code.startsWith('FST_ERR_CTP') ? 'body: ' : '';
      return reply.code(status).send({ v: 1, error: `${what}${(error as Error).message}` });
    }
    ctx.opts.onError?.(scrub(error instanceof Error ? (error.stack ?? error.message) : String(error)));
    return reply.code(500).send({ v: 1, error: 'internal error of the view; see the log' });
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ v: 1, error: 'not found' }));
}

function runOr404(ctx: RouteContext, runId: string, reply: FastifyReply): RunRecord | undefined {
  const run = ctx.data.store.runs.getRun(runId);
  if (run === undefined) reply.code(404).send({ v: 1, error: `run ${runId}: not found in the state file` });
  return run;
}

type Params<S extends keyof typeof PARAMS> = z.output<(typeof PARAMS)[S]>;
const PARAMS = { run: runParams, task: taskParams, file: fileParams, asset: assetParams };
/** Each route's schemas: its path parameters, and its query (none unless it says so). */
function takes(params: keyof typeof PARAMS | undefined, querystring: z.ZodType = noQuery) {
  return { schema: { ...(params === undefined ? {} : { params: PARAMS[params] }), querystring } };
}

function routes(ctx: RouteContext): void {
  const { app, data } = ctx;
  // The page's address takes whatever query a bookmark or a link adds to it: it reads none.
  app.get('/', (_r, reply) =>
    reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(ctx.index),
  );
  app.get<{ Params: Params<'asset'> }>('/assets/:name', takes('asset'), (request, reply) => {
    const asset = ctx.assets.get(request.params.name);
    if (asset === undefined) return reply.code(404).send({ v: 1, error: 'not found' });
    return reply.type(asset.type).header('cache-control', 'no-cache').send(asset.body);
  });
  app.get('/api/lists', takes(undefined), (_r, reply) =>
    reply.header('cache-control', 'no-store').send(viewLists()),
  );
  app.get('/api/runs', takes(undefined), (_r, reply) =>
    reply.header('cache-control', 'no-store').send({ v: 1, runs: data.runs() }),
  );
  app.get<{ Params: Params<'run'> }>('/api/runs/:run', takes('run'), (request, reply) => {
    const run = runOr404(ctx, request.params.run, reply);
    if (run === undefined) return reply;
    const review = reviewSummary(data.store, run.id) ?? null;
    return reply.header('cache-control', 'no-store').send({ ...data.runDetail(run), review });
  });
  app.get<{ Params: Params<'run'>; Querystring: TaskListQuery }>(
    '/api/runs/:run/tasks',
    takes('run', taskListQuery),
    (request, reply) => {
      const run = runOr404(ctx, request.params.run, reply);
      if (run === undefined) return reply;
      return reply.header('cache-control', 'no-store').send(taskList(data.store, run.id, request.query));
    },
  );
  app.get<{ Params: Params<'task'> }>('/api/runs/:run/tasks/:task', takes('task'), (request, reply) => {
    const run = runOr404(ctx, request.params.run, reply);
    if (run === undefined) return reply;
    const detail = taskDetail(data.store, run, request.params.task);
    if (detail === undefined) {
      return reply.code(404).send({ v: 1, error: `task ${request.params.task}: not in run ${run.id}` });
    }
    return reply.header('cache-control', 'no-store').send(detail);
  });
  app.get<{ Params: Params<'run'> }>('/api/runs/:run/workers', takes('run'), (request, reply) => {
    const run = runOr404(ctx, request.params.run, reply);
    if (run === undefined) return reply;
    const now = ctx.opts.now?.() ?? new Date();
    return reply
      .header('cache-control', 'no-store')
      .send({ v: 1, run: run.id, ...runWorkers(data.store, run.id, now) });
  });
  app.get('/api/events', takes(undefined), (request, reply) => {
    reply.hijack();
    reply.raw.writeHead(200, {
      ...ctx.headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
    });
    ctx.feed.subscribe(reply.raw);
    request.raw.on('close', () => reply.raw.end());
  });
  // HEAD is its own route: fastify's automatic one would answer the length of an empty body.
  const file = { ...takes('file'), exposeHeadRoute: false };
  const serve = (request: FastifyRequest<{ Params: Params<'file'> }>, reply: FastifyReply) =>
    serveFile(ctx, request, reply);
  app.get<{ Params: Params<'file'> }>('/files/:run/:task/:idx', file, serve);
  app.head<{ Params: Params<'file'> }>('/files/:run/:task/:idx', file, serve);
}

/**
 * The writes: the gate has already asked for the token header and a same-origin request. The price is
 * read on the view's connection; a decision opens its own writable one (decisions.ts).
 */
function decisionRoutes(ctx: RouteContext): void {
  const { app, data } = ctx;
  const stateFile = stateLocation(ctx.opts.cwd, ctx.opts.stateFile);
  app.get<{ Params: Params<'run'>; Querystring: z.output<typeof rerollPriceQuery> }>(
    '/api/runs/:run/reroll-price',
    takes('run', rerollPriceQuery),
    (request, reply) => {
      const run = runOr404(ctx, request.params.run, reply);
      if (run === undefined) return reply;
      const ids = request.query.taskIds;
      const unknown = unknownTasks(data.store, run.id, ids);
      if (unknown.length > 0) return reply.code(404).send({ v: 1, error: notInRun(unknown, run.id) });
      return reply.header('cache-control', 'no-store').send({ v: 1, ...priceOf(data.store, run.id, ids) });
    },
  );
  app.post<{ Params: Params<'run'>; Body: DecisionBody }>(
    '/api/runs/:run/decisions',
    { schema: { ...takes('run').schema, body: decisionBody } },
    async (request, reply) => {
      const run = runOr404(ctx, request.params.run, reply);
      if (run === undefined) return reply;
      const body = request.body;
      const unknown = unknownTasks(data.store, run.id, body.taskIds);
      if (unknown.length > 0) return reply.code(404).send({ v: 1, error: notInRun(unknown, run.id) });
      const outcomes = await decideOnce(stateFile, run.id, body);
      const refused = outcomes.filter((o) => !o.ok).length;
      return reply
        .code(refused > 0 && refused === outcomes.length ? 409 : 200)
        .header('cache-control', 'no-store')
        .send({
          v: 1,
          run: run.id,
          verdict: body.verdict,
          outcomes: outcomes.map((o) =>
            o.ok
              ? { task: o.taskId, ok: true, version: o.version, attempt: o.attempt, changed: o.changed }
              : { task: o.taskId, ok: false, reason: o.reason, version: o.version ?? null },
          ),
        });
    },
  );
}

function notInRun(ids: readonly string[], runId: string): string {
  return `task ${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ` and ${ids.length - 5} more` : ''}: not in run ${runId}`;
}

async function serveFile(
  ctx: RouteContext,
  request: FastifyRequest<{ Params: Params<'file'> }>,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const notFound = () => reply.code(404).send({ v: 1, error: 'not found' });
  const { run: runId, task, idx } = request.params;
  const run = ctx.data.store.runs.getRun(runId);
  if (run === undefined || !/^\d+$/.test(idx)) return notFound();
  const file = ctx.data.store.files.filesOfTask(run.id, task).find((f) => f.index === Number(idx));
  if (file === undefined) return notFound();
  if (/^s3:\/\//i.test(file.path)) {
    const link = await ctx.opts.bucketLink?.(run, file.path);
    if (link === undefined) return notFound();
    return reply.code(302).header('cache-control', 'no-store').header('location', link).send();
  }
  const opened = await openRecordedFile(file.path, ctx.data.runFolder(run));
  if (opened === undefined) return notFound();
  const range = byteRange(request.headers.range, opened.size);
  reply
    .header('accept-ranges', 'bytes')
    .header('cache-control', 'private, max-age=3600')
    .type(opened.contentType);
  if (range === 'unsatisfiable') {
    await opened.handle.close();
    return reply.code(416).header('content-range', `bytes */${opened.size}`).send();
  }
  const { start, end } = range ?? { start: 0, end: Math.max(0, opened.size - 1) };
  if (range !== undefined) reply.code(206).header('content-range', `bytes ${start}-${end}/${opened.size}`);
  reply.header('content-length', opened.size === 0 ? 0 : end - start + 1);
  if (opened.size === 0 || request.method === 'HEAD') {
    await opened.handle.close();
    // No body at all: fastify keeps the length set above for a HEAD (an empty string would be measured).
    return reply.send();
  }
  return reply.send(opened.handle.createReadStream({ start, end, autoClose: true }));
}
