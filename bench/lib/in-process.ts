// The CLI in the bench's own process, with its output captured (the runner figure is end to end).
import { EventEmitter } from 'node:events';
import type { CliIO } from '../../src/cli/io.js';
import { runCli } from '../../src/cli/program.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function cliInProcess(argv: string[], cwd: string, env: Record<string, string>) {
  let stdout = '';
  let stderr = '';
  const io: CliIO = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env,
    cwd,
    now: () => new Date(),
    interactive: false,
    signals: new EventEmitter(),
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr } satisfies CliResult;
}
