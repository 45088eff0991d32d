// Only the CLI decides exit codes and wording; everything below it returns results or throws these.

export const EXIT = {
  ok: 0,
  invalid: 1,
  someFailed: 2,
  refused: 3,
  interrupted: 4,
  unauthorized: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An expected way to stop: the message is one line that says why and what to do. */
export class ExitError extends Error {
  readonly exitCode: ExitCode;
  /** Extra lines printed before the one-line reason (e.g. every manifest problem). */
  readonly details: readonly string[];

  constructor(exitCode: ExitCode, message: string, details: readonly string[] = []) {
    super(message);
    this.name = 'ExitError';
    this.exitCode = exitCode;
    this.details = details;
  }
}
