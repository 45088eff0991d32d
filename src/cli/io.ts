// What a command may touch of the outside world, passed in so that tests run commands in-process.

export interface Out {
  write(text: string): unknown;
}

export interface CliIO {
  stdout: Out;
  stderr: Out;
  env: NodeJS.ProcessEnv;
  cwd: string;
  now: () => Date;
  /** True when a person is at a terminal (prompts and live progress). */
  interactive: boolean;
  /** Signals that interrupt a run (SIGINT/SIGTERM in the real process; tests fire their own). */
  signals?: NodeJS.EventEmitter;
  /** Ends the process at once (a second Ctrl-C); absent in tests. */
  exit?: (code: number) => void;
}

export function processIO(): CliIO {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    cwd: process.cwd(),
    now: () => new Date(),
    interactive: Boolean(process.stdin.isTTY && process.stdout.isTTY),
    signals: process,
    exit: (code) => process.exit(code),
  };
}
