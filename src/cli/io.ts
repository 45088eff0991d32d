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
  /**
   * Asks a yes/no question of the person at the terminal; absent when standard input is not a terminal
   * (then nobody can answer, and a paid run needs --yes). 'interrupted' is Ctrl-C at the question.
   */
  ask?: (question: string) => Promise<boolean | 'interrupted'>;
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
    ...(process.stdin.isTTY ? { ask: askOnTerminal } : {}),
  };
}

/** The question goes to stderr, so that `run … | tee log` still asks, and stdout stays the program's. */
async function askOnTerminal(question: string): Promise<boolean | 'interrupted'> {
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const interrupted = new Promise<'interrupted'>((resolve) =>
      rl.once('SIGINT', () => resolve('interrupted')),
    );
    const answer = await Promise.race([rl.question(question), interrupted]);
    if (answer === 'interrupted') {
      process.stderr.write('\n');
      return 'interrupted';
    }
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}
