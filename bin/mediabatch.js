#!/usr/bin/env node
// The published entry point runs the compiled CLI; in the repo `npm start` runs the sources with tsx.
import '../dist/cli/main.js';
