// A run's progress as data. How it is shown (the live bar, the plain lines) is the CLI's business:
// src/cli/progress.ts.

export type { RunProgress } from './runner.js';
