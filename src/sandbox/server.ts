// The sandbox server: the Media Generation API on loopback, with fastify doing routing, body
// parsing and the body size limit. Started in-process by `run --sandbox`, by tests, and by
// `mediabatch sandbox`.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { fetch as undiciFetch } from 'undici';
import type { Balance } from '../api/schemas.js';
import { DEFAULT_PRICES } from '../catalog/index.js';
import { ENDPOINTS, type Endpoint } from '../catalog/types.js';
import { createProber } from '../media/probe.js';
import { Account, type QuotaState } from './account.js';
import { type CallbackFetch, CallbackSender } from './callbacks.js';
import { type Envelope, failure, success } from './envelope.js';
import { CONTENT_TYPES, FileStore } from './files.js';
import {
  type CallbackLog,
  type ConcurrencyState,
  type JobStatus,
  Jobs,
  type SandboxJob,
  type SubmitAnswer,
} from './jobs.js';
import { journalAccount, keepAccountMove, keepJob, restoreJobs } from './journal.js';
import { routeSampleMedia } from './media.js';
import {
  checkSettings,
  SANDBOX_DEFAULTS,
  type SandboxOptions,
  SandboxOptionsError,
  type SandboxSettings,
} from './options.js';
import { labelledPng } from './picture.js';
import {
  acceptsGzip,
  CODE_IN_200_SHARE,
  detail404WindowMs,
  parseQuirks,
  type Quirk,
  RETRY_AFTER_SHARE,
} from './quirks.js';
import { createRandom } from './random.js';
import { labelOfFile, renderFile } from './render.js';
import { type SubmitContext, type SubmitOutcome, submit } from './submit.js';
import { registerEmbedded, routeUploads, SandboxUploads } from './uploads.js';
import { presentEnvelope, presentRecord, type WireContext } from './wire.js';

export interface JobState {
  img_uuid: string;
  model: string;
  status: JobStatus;
  /** Tokens charged at acceptance, after the discount. */
  cost: number;
  list_price: number;
  /** Tokens given back; equals `cost` for a failed job. */
  refunded: number;
  created_at: string;
  /** When the job ends (success or failure), as planned at its creation. */
  ends_at: string;
  /** How the submission was answered; `error-502` (a gateway page) and `connection-dropped` are charges the client never saw. */
  answer: SubmitAnswer;
  callback_url?: string;
  /** The submission's body as it arrived, so tests can see what was sent. */
  request: unknown;
  callbacks: CallbackLog[];
}

export interface SandboxState {
  /** Exact balance in tokens (user/tokens reports it rounded down). */
  balance: number;
  quota: QuotaState;
  settings: SandboxSettings;
  jobs: JobState[];
  requests: { submit: number; poll: number; balance: number; download: number };
  concurrency: ConcurrencyState;
  quirks: {
    enabled: Quirk[];
    /** Requests answered 429 by `retry-after`. */
    throttled: number;
    /** Submissions answered `{code: 500, msg: "busy"}` by `code-in-200`. */
    busy: number;
  };
}

export interface Sandbox {
  readonly baseUrl: string;
  state(): SandboxState;
  /** Changes settings at run time, as POST /_sandbox/config does; throws on an invalid value. */
  configure(partial: Partial<SandboxSettings>): SandboxSettings;
  /** Moves jobs as far as the clock allows now (polls and a timer do it too). */
  advance(): void;
  /** Resolves when every callback queued so far is delivered or dropped. */
  callbacksSettled(): Promise<void>;
  /** Local inputs a run in this process gave the sandbox (`run --sandbox`), served on loopback. */
  readonly uploads: SandboxUploads;
  close(): Promise<void>;
}

const SUBMIT_PATHS: readonly Endpoint[] = [
  ENDPOINTS.videos,
  ENDPOINTS.images,
  ENDPOINTS.audio,
  ENDPOINTS.faceSwap,
];
const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

// Long on purpose: the sandbox's routes and shared state are one fastify instance; each route is a few lines.
export async function startSandbox(opts: SandboxOptions = {}): Promise<Sandbox> {
  const initial = checkSettings(pickSettings(opts));
  if (!initial.ok) throw new SandboxOptionsError(`sandbox: ${initial.issues.join('; ')}`);
  const settings: SandboxSettings = {
    speed: SANDBOX_DEFAULTS.speed,
    failRate: SANDBOX_DEFAULTS.failRate,
    errorRate: SANDBOX_DEFAULTS.errorRate,
    chargeThenErrorRate: SANDBOX_DEFAULTS.chargeThenErrorRate,
    latencyMs: SANDBOX_DEFAULTS.latencyMs,
    linkTtlSeconds: SANDBOX_DEFAULTS.linkTtlSeconds,
    videoPaddingBytes: SANDBOX_DEFAULTS.videoPaddingBytes,
    discount: SANDBOX_DEFAULTS.discount,
    balance: SANDBOX_DEFAULTS.balance,
    quota: SANDBOX_DEFAULTS.quota,
    accountConcurrency: SANDBOX_DEFAULTS.accountConcurrency,
    refuseDownloads: false,
    ...initial.settings,
  };
  const parsedQuirks = parseQuirks(opts.quirks ?? SANDBOX_DEFAULTS.quirks);
  if (!parsedQuirks.ok) throw new SandboxOptionsError(`sandbox: quirks: ${parsedQuirks.issue}`);
  const quirks: ReadonlySet<Quirk> = parsedQuirks.quirks;
  const seeded = opts.seed !== undefined;
  const seed = opts.seed ?? SANDBOX_DEFAULTS.seed;
  const apiKey = opts.apiKey ?? SANDBOX_DEFAULTS.apiKey;
  const now = opts.now ?? Date.now;
  const journal = opts.journal;
  // With a journal (the embedded sandbox), the account goes on from where the last process left it.
  const account =
    journal === undefined
      ? new Account(settings.balance, settings.quota)
      : journalAccount(journal, settings.balance, settings.quota);
  if (journal !== undefined) account.onMove = (move) => keepAccountMove(journal, move);
  const files = new FileStore(seed, quirks.has('link-403'));
  // Quirks draw from generators of their own, so switching one on moves no other random choice.
  const quirkRandom = createRandom((seed ^ 0x7f4a7c15) >>> 0);
  const requestIds = createRandom((seed ^ 0x2545f491) >>> 0);
  const wire: WireContext = {
    quirks,
    files,
    speed: () => settings.speed,
    requestId: seeded ? () => requestIds.uuid() : () => randomUUID(),
  };
  const quirkCounts = { throttled: 0, busy: 0 };
  let baseUrl = '';
  const sender = new CallbackSender({
    fetch: callbackFetch(opts),
    timeoutMs: opts.callbackTimeoutMs ?? SANDBOX_DEFAULTS.callbackTimeoutMs,
    retries: 3,
    retryDelayMs: () => opts.callbackRetryDelayMs ?? SANDBOX_DEFAULTS.callbackRetryDelayMs,
    now,
  });
  const link = (token: string, index: number) =>
    `${baseUrl}/files/${token}${quirks.has('wrong-extension') ? `/${index + 1}.png` : ''}`;
  const jobs = new Jobs({
    account,
    files,
    link,
    linkTtlSeconds: () => settings.linkTtlSeconds,
    concurrency: () => settings.accountConcurrency,
    onChange: (job) => {
      notify(job, sender, now(), wire);
      if (journal !== undefined) keepJob(journal, job);
    },
  });
  const ctx: SubmitContext = {
    random: createRandom(seed),
    account,
    jobs,
    settings,
    prices: opts.prices ?? DEFAULT_PRICES,
    prober: opts.prober ?? createProber(),
    now,
    uniqueIds: !seeded,
  };
  const requests = { submit: 0, poll: 0, balance: 0, download: 0 };

  const state = (): SandboxState => {
    jobs.advance(now());
    return {
      balance: account.balance,
      quota: account.quotaState(now()),
      settings: { ...settings, balance: account.balance },
      jobs: [...jobs.all()].map((job) => jobState(job, apiKey)),
      requests: { ...requests },
      concurrency: jobs.concurrency(),
      quirks: { enabled: [...quirks], ...quirkCounts },
    };
  };
  const configure = (partial: Partial<SandboxSettings>): SandboxSettings => {
    const checked = checkSettings(partial);
    if (!checked.ok) throw new Error(checked.issues.join('; '));
    Object.assign(settings, checked.settings);
    if (checked.settings.balance !== undefined) account.balance = checked.settings.balance;
    if (checked.settings.quota !== undefined) account.quota = checked.settings.quota;
    return { ...settings, balance: account.balance };
  };

  const app = Fastify({ logger: false, bodyLimit: opts.bodyLimit ?? SANDBOX_DEFAULTS.bodyLimit });
  // Hooks in the callback style, and a hook only where a quirk in force gives it something to do: each
  // async hook costs every request a promise and a turn of the microtask queue, and a request to the
  // sandbox is most of the CPU a run at speed 0 gives it. The quirks are fixed when the sandbox starts.
  const log = opts.log;
  if (log) {
    app.addHook('onResponse', (request, reply, done) => {
      log(
        `${request.method} ${request.url.split('?')[0]} ${reply.statusCode} ${Math.round(reply.elapsedTime)} ms`,
      );
      done();
    });
  }
  const admit = (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
    if (!request.url.startsWith('/api/')) {
      done();
      return;
    }
    const refused = !authenticated(request, reply, apiKey);
    // A refused request draws its retry-after lot too, and a lot that falls is counted though the answer
    // stays 401: the sandbox has always done so, and a seed keeps its sequence of 429s and its count.
    if (quirks.has('retry-after') && quirkRandom.next() < RETRY_AFTER_SHARE) {
      quirkCounts.throttled++;
      if (refused) return;
      reply.code(429).header('retry-after', '1').send(failure(429, 'too many requests'));
      return;
    }
    if (!refused) done();
  };
  app.addHook('onRequest', (request, reply, done) => {
    if (request.url.startsWith('/_sandbox/')) return done();
    if (settings.latencyMs > 0) setTimeout(() => admit(request, reply, done), settings.latencyMs);
    else admit(request, reply, done);
  });
  // Every JSON answer of the API passes here, errors included, so a quirk shapes them all alike.
  if (quirks.has('string-numbers') || quirks.has('request-id')) {
    app.addHook('preSerialization', (request, _reply, payload: unknown, done) => {
      if (!request.url.startsWith('/api/') || typeof payload !== 'object' || payload === null)
        return done(null, payload);
      done(null, presentEnvelope(payload, wire));
    });
  }
  if (quirks.has('bom') || quirks.has('gzip')) {
    app.addHook('onSend', (request, reply, payload: unknown, done) => {
      if (!request.url.startsWith('/api/') || typeof payload !== 'string') return done(null, payload);
      if (!String(reply.getHeader('content-type') ?? '').startsWith('application/json'))
        return done(null, payload);
      const text = quirks.has('bom') ? `\uFEFF${payload}` : payload;
      if (!quirks.has('gzip')) return done(null, text);
      reply.header('vary', 'accept-encoding');
      if (!acceptsGzip(request.headers['accept-encoding'])) return done(null, text);
      reply.header('content-encoding', 'gzip');
      done(null, gzipSync(text));
    });
  }
  app.setErrorHandler(async (error: { statusCode?: number; message: string }, _request, reply) => {
    const status =
      error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    return reply.code(status).send(failure(status, status === 500 ? '' : `body: ${error.message}`));
  });
  app.setNotFoundHandler(async (request, reply) =>
    reply.code(404).send(failure(404, `${request.method} ${request.url.split('?')[0]}: no such endpoint`)),
  );

  const answerSubmission = (outcome: SubmitOutcome, request: FastifyRequest, reply: FastifyReply) => {
    if (outcome.kind === 'drop') {
      // The charge is made; the client learns nothing, as when a connection breaks mid-answer.
      reply.hijack();
      request.raw.socket.destroy();
      return reply;
    }
    if (outcome.kind === 'gateway-error') {
      return reply.code(outcome.status).type('text/html').send(outcome.text);
    }
    if (ctx.settings.speed === 0) setImmediate(() => jobs.advance(now()));
    return reply.code(outcome.status).send(outcome.body);
  };
  for (const path of SUBMIT_PATHS) {
    app.post(path, (request, reply) => {
      requests.submit++;
      if (quirks.has('code-in-200') && quirkRandom.next() < CODE_IN_200_SHARE) {
        quirkCounts.busy++;
        return reply.code(200).send(failure(500, 'busy'));
      }
      const outcome = submit(ctx, path, request.body);
      if (outcome instanceof Promise) return outcome.then((o) => answerSubmission(o, request, reply));
      return answerSubmission(outcome, request, reply);
    });
  }

  // The routes a run calls for every task answer without a promise when they can: see the hooks above.
  app.get<{ Querystring: { img_uuid?: string } }>('/api/v1/jobs/detail', (request, reply) => {
    requests.poll++;
    const id = request.query.img_uuid;
    if (!id)
      return reply.code(400).send(failure(400, 'img_uuid: required query parameter, e.g. ?img_uuid=<uuid>'));
    jobs.advance(now());
    const job = jobs.get(id);
    // Inside the window a new job is as unknown as one that never existed: the same answer.
    const hidden =
      job !== undefined &&
      quirks.has('detail-404-window') &&
      now() - job.createdAt < detail404WindowMs(settings.speed);
    if (!job || hidden) return reply.code(404).send(failure(404, `img_uuid: no job ${JSON.stringify(id)}`));
    return reply.send(success(presentRecord(job, now(), wire)));
  });

  app.get('/api/v1/user/tokens', async (_request, reply) => {
    requests.balance++;
    return reply.send(success({ count: Math.floor(account.balance) } satisfies Balance));
  });

  // `/files/<token>/<n>.png` is the same file: the name is what `wrong-extension` makes links end in.
  const download = (
    request: FastifyRequest<{ Params: { token: string }; Querystring: { sig?: string } }>,
    reply: FastifyReply,
  ): FastifyReply | Promise<FastifyReply> => {
    requests.download++;
    if (settings.refuseDownloads) return reply.code(403).type('text/plain').send('Forbidden');
    const found = files.lookup(request.params.token, now(), request.query.sig);
    if (!found.ok) {
      const [status, text] = FILE_REFUSALS[found.reason];
      return reply.code(status).type('text/plain').send(text);
    }
    const { recipe } = found.file;
    const label = labelOfFile(jobs, found.file);
    // A job's picture is drawn, or found kept, at once; a sample file is read and audio made by promises.
    if (recipe.format === 'png' && label !== undefined)
      return reply.type(CONTENT_TYPES.png).send(labelledPng(label));
    return renderFile(recipe, label).then((rendered) => {
      const bytes =
        recipe.format === 'mp4' && settings.videoPaddingBytes > 0
          ? withFreeBox(rendered, settings.videoPaddingBytes)
          : rendered;
      return reply.type(CONTENT_TYPES[recipe.format]).send(bytes);
    });
  };
  app.get('/files/:token', download);
  app.get('/files/:token/:name', download);

  // Sample inputs are public, as media links are: a job of the real service fetches them without a key.
  routeSampleMedia(app, () => baseUrl);
  const uploads = new SandboxUploads();
  routeUploads(app, uploads, isLoopback);

  app.get('/_sandbox/state', async (request, reply) => {
    if (!isLoopback(request)) return refuseRemote(reply);
    return reply.send(state());
  });
  app.post('/_sandbox/config', async (request, reply) => {
    if (!isLoopback(request)) return refuseRemote(reply);
    const checked = checkSettings(request.body);
    if (!checked.ok) return reply.code(400).send(failure(400, checked.issues.join('; ')));
    return reply.send(success(configure(checked.settings)));
  });

  await app.listen({ port: opts.port ?? 0, host: opts.host ?? SANDBOX_DEFAULTS.host });
  baseUrl = urlOf(app);
  // Jobs of earlier sandboxes that kept the same journal: known again, their files served again.
  if (journal !== undefined)
    for (const job of restoreJobs(journal, files, now(), settings.linkTtlSeconds * 1000, link))
      jobs.restore(job);
  const unregister = registerEmbedded(baseUrl, uploads);
  const tick = setInterval(() => jobs.advance(now()), opts.tickMs ?? SANDBOX_DEFAULTS.tickMs);
  tick.unref();

  return {
    baseUrl,
    state,
    configure,
    advance: () => jobs.advance(now()),
    callbacksSettled: () => sender.settled(),
    uploads,
    close: async () => {
      unregister();
      clearInterval(tick);
      sender.close();
      await app.close();
    },
  };
}

function pickSettings(opts: SandboxOptions): Partial<SandboxSettings> {
  const keys = [
    'speed',
    'failRate',
    'errorRate',
    'chargeThenErrorRate',
    'latencyMs',
    'linkTtlSeconds',
    'videoPaddingBytes',
    'discount',
    'balance',
    'quota',
    'accountConcurrency',
  ] as const;
  const picked: Record<string, unknown> = {};
  for (const key of keys) if (opts[key] !== undefined) picked[key] = opts[key];
  return picked as Partial<SandboxSettings>;
}

function callbackFetch(opts: SandboxOptions): CallbackFetch {
  if (opts.fetch) return opts.fetch;
  const dispatcher = opts.dispatcher;
  return dispatcher
    ? (url, init) => undiciFetch(url, { ...init, dispatcher })
    : (url, init) => undiciFetch(url, init);
}

const FILE_REFUSALS = {
  unknown: [404, 'no such file\n'],
  expired: [410, 'link expired\n'],
  stale: [403, 'signature expired: fetch the job again for a fresh link\n'],
} as const;

/** The callback carries what jobs/detail would answer at the moment of the change, quirks included. */
/** An MP4 made larger by a `free` box at its end: still a valid file, as long as asked for. */
function withFreeBox(mp4: Buffer, bytes: number): Buffer {
  const size = Math.max(8, Math.floor(bytes));
  const box = Buffer.alloc(size);
  box.writeUInt32BE(size, 0);
  box.write('free', 4, 'ascii');
  return Buffer.concat([mp4, box]);
}

function withoutKey(value: unknown, apiKey: string): unknown {
  if (apiKey === '') return value;
  if (typeof value === 'string') return value.split(apiKey).join('[key]');
  if (Array.isArray(value)) return value.map((item) => withoutKey(item, apiKey));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutKey(v, apiKey)]));
  }
  return value;
}

function notify(job: SandboxJob, sender: CallbackSender, nowMs: number, wire: WireContext): void {
  if (!job.callbackUrl) return;
  const log: CallbackLog = { status: job.status, attempts: [], outcome: 'sending' };
  job.callbacks.push(log);
  const body = presentEnvelope(success(presentRecord(job, nowMs, wire)), wire);
  sender.send(job.id, job.callbackUrl, JSON.stringify(body), log);
}

function jobState(job: SandboxJob, apiKey: string): JobState {
  const state: JobState = {
    img_uuid: job.id,
    model: job.entry.model,
    status: job.status,
    cost: job.cost,
    list_price: job.listPrice,
    refunded: job.refunded,
    created_at: new Date(job.createdAt).toISOString(),
    ends_at: new Date(job.endAt).toISOString(),
    answer: job.answer,
    // A client that pasted the key into a request (a prompt) must not see it again here.
    request: withoutKey(structuredClone(job.request), apiKey),
    callbacks: job.callbacks.map((c) => ({ ...c, attempts: [...c.attempts] })),
  };
  if (job.callbackUrl) state.callback_url = job.callbackUrl;
  return state;
}

/** True when the request carries the key; otherwise answers 401 and returns false. */
function authenticated(request: FastifyRequest, reply: FastifyReply, apiKey: string): boolean {
  const header = request.headers.authorization;
  const presented = header?.match(/^Bearer\s+(\S.*)$/i)?.[1]?.trim();
  if (presented === apiKey) return true;
  const path = request.url.split('?')[0];
  // The spec shows one message per endpoint; elsewhere a missing key and a wrong key read differently.
  const msg =
    path === '/api/v1/user/tokens'
      ? 'Token is required'
      : path === ENDPOINTS.faceSwap || presented !== undefined
        ? 'Token Error'
        : 'Token is required';
  reply.code(401).send(failure(401, msg) satisfies Envelope);
  return false;
}

function isLoopback(request: FastifyRequest): boolean {
  return isLoopbackAddress(request.socket.remoteAddress);
}

/** True for the addresses a client on this machine connects from. */
export function isLoopbackAddress(address: string | undefined): boolean {
  return LOOPBACK.has(address ?? '') || /^(::ffff:)?127\./.test(address ?? '');
}

function refuseRemote(reply: FastifyReply): FastifyReply {
  return reply.code(403).send(failure(403, 'the sandbox state answers loopback clients only'));
}

function urlOf(app: FastifyInstance): string {
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}
