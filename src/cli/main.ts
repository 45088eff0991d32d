#!/usr/bin/env node
import { processIO } from './io.js';
import { runCli } from './program.js';

// `mediabatch status | head -1`: the reader went away; that is not an error worth a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw error;
  });
}

const code = await runCli(process.argv.slice(2), processIO());
process.exitCode = code;
