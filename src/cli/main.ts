#!/usr/bin/env node
import { setFlagsFromString } from 'node:v8';
import { quietSdkNodeWarning } from '../storage/sdk-warning.js';
import { answerSignals } from './closing.js';
import { processIO } from './io.js';
import { runCli } from './program.js';

// Expanding and storing a million tasks makes short-lived objects by the gigabyte; by default V8 lets
// the heap grow to about four times what is live before a full collection, which at 1,000,000 tasks is
// 450-550 MB of garbage-laden heap. Growing it by at most half keeps the peak near what is live (
// plan 444 -> 239 MB, run 440 -> 284 MB at 1M tasks) for a few cheap extra collections (live is ~70 MB).
setFlagsFromString('--heap-growing-percent=50');

// `mediabatch status | head -1`: the reader went away; that is not an error worth a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw error;
  });
}

// Before any S3 client exists: the AWS SDK's warning about Node 20 is read from the environment then.
quietSdkNodeWarning();

// A Ctrl-C or SIGTERM that no command answers (before it takes them, after it let go of them, in a
// command that never does) ends the process with the command's code, or the interrupted code and a
// line; never by the signal.
let ended: number | undefined;
answerSignals(process, {
  stderr: process.stderr,
  exit: (code) => process.exit(code),
  ended: () => ended,
});

const code = await runCli(process.argv.slice(2), processIO());
ended = code;
process.exitCode = code;
// Once the event loop is empty (every log line and socket done), the process ends here rather than by
// node's teardown, which first drops the signal handlers and then frees the heap (tens of ms at a large
// run's): a signal in that window ended a finished worker by the signal. The last 'exit' listener.
process.once('exit', () => process.exit());
