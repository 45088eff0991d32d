#!/usr/bin/env node
import { processIO } from './io.js';
import { runCli } from './program.js';

const code = await runCli(process.argv.slice(2), processIO());
process.exitCode = code;
