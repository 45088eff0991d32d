import { EventEmitter } from 'node:events';
import type { CliIO } from '../../src/cli/io.js';
import { runCli } from '../../src/cli/program.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in-process with captured output, a fixed clock and no terminal. */
export async function cli(argv: string[], opts: Partial<CliIO> = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const io: CliIO = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env: {},
    cwd: process.cwd(),
    now: () => new Date('2026-11-21T09:00:00Z'),
    interactive: false,
    signals: new EventEmitter(),
    ...opts,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}
