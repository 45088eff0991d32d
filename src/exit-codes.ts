// The exit codes of the product (docs/troubleshooting.md): the CLI exits with them, and a run's record keeps
// the one its last session ended with, so `status` can say it later.

export const EXIT = {
  ok: 0,
  invalid: 1,
  someFailed: 2,
  refused: 3,
  interrupted: 4,
  unauthorized: 5,
  /** A bug in mediabatch: the CLI prints the stack (in the sources' terms) above its last line. */
  internal: 70,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
