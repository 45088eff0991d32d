#!/usr/bin/env node
// The published entry point runs the CLI's bundle (dist/bin, built by `npm run prepare`: see
// scripts/bundle-cli.ts); in the repo `npm start` runs the sources with tsx.
import '../dist/bin/main.js';
