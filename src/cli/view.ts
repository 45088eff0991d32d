// Opening `mediabatch view` from the CLI, shared by `view` and `run --view`: its one line, the warning
// for every address, and serving until Ctrl-C. The server itself is the library's (src/view/).

import type { Config } from '../config.js';
import { bucketLinks } from '../view/bucket.js';
import { startView, type ViewServer } from '../view/server.js';
import { EXIT, ExitError } from './errors.js';
import type { CliIO } from './io.js';

export interface ViewFlags {
  host?: string;
  port?: number;
}

export interface ViewContext {
  io: CliIO;
  statePath: string;
  /** `--config` as given: the commands the page shows carry it. */
  configFile?: string;
  config: Config;
}

/** Starts the view; its one line goes to `out`. Shared with `run --view`. */
export async function openView(
  ctx: ViewContext,
  flags: ViewFlags,
  run: string | undefined,
  out: CliIO['stdout'],
): Promise<{ server: ViewServer; close(): Promise<void> }> {
  const { io } = ctx;
  const links = bucketLinks(ctx.config.storage, io.env);
  let server: ViewServer;
  try {
    server = await startView({
      stateFile: ctx.statePath,
      ...(ctx.configFile !== undefined ? { configFile: ctx.configFile } : {}),
      cwd: io.cwd,
      ...(flags.host !== undefined ? { host: flags.host } : {}),
      ...(flags.port !== undefined ? { port: flags.port } : {}),
      ...(run !== undefined ? { run } : {}),
      bucketLink: links.link,
      mediaOrigins: links.origins,
      onError: (message) => io.stderr.write(`mediabatch view: ${message}\n`),
      onAway: (line) =>
        io.stderr.write(
          `mediabatch view: ${line === undefined ? 'the state database is back' : `${line}; the view goes on and reads again when it is back`}\n`,
        ),
    });
  } catch (error) {
    links.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EADDRNOTAVAIL' || code === 'EACCES') {
      throw new ExitError(
        EXIT.invalid,
        `view: cannot listen on ${flags.host ?? '127.0.0.1'}:${flags.port ?? 0} (${code}): choose another --host or --port`,
      );
    }
    throw error;
  }
  if (flags.host === '0.0.0.0' || flags.host === '::') {
    io.stderr.write(
      'Warning: the view listens on every address; anyone on the network with the token can see the results and spend. Prefer an SSH tunnel (docs/view.md).\n',
    );
  }
  out.write(`View: ${server.url}\n`);
  return {
    server,
    async close() {
      await server.close();
      links.close();
    },
  };
}

/** Resolves when SIGINT or SIGTERM arrives (Ctrl-C). */
export function untilInterrupted(io: CliIO): Promise<void> {
  return new Promise((resolve) => {
    const signals = io.signals;
    if (signals === undefined) return;
    const done = () => {
      signals.off('SIGINT', done);
      signals.off('SIGTERM', done);
      resolve();
    };
    signals.on('SIGINT', done);
    signals.on('SIGTERM', done);
  });
}

/**
 * `run --view`: the view of the run while it goes. At its end the view stays until Ctrl-C when a person
 * is at the terminal (to look at the results), and closes with the run otherwise (scripts, tests).
 */
export async function viewDuringRun(
  ctx: ViewContext,
  runId: string,
  out: CliIO['stdout'],
): Promise<{ end(): Promise<void> }> {
  const view = await openView(ctx, {}, runId, out);
  return {
    async end() {
      try {
        if (ctx.io.interactive) {
          ctx.io.stderr.write('The run ended; the view stays open until Ctrl-C.\n');
          await untilInterrupted(ctx.io);
        }
      } finally {
        await view.close();
      }
    },
  };
}
