// A run's progress as data. How it is shown (the live bar, the plain lines) is the CLI's business:
// src/cli/progress.ts.

/**
 * @deprecated Import `ProgressView` from src/cli/progress.ts. This re-export only keeps
 * src/cli/commands/run.ts compiling until it switches; then this line goes, and with it the last
 * import of src/cli from the library.
 */
export { ProgressView } from '../cli/progress.js';
export type { RunProgress } from './runner.js';
