import { defineConfig } from 'vitest/config';
import { SlowFirstSequencer } from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // mediabatch's child processes run the CLI bundled once for the run, not the sources through tsx; the
    // tests' temp folders are in memory where there is room (test/helpers/memory-tmp.ts).
    globalSetup: ['test/helpers/cli-bundle.ts', 'test/helpers/memory-tmp.ts'],
    // On a fresh clone the known slow files start first (test/helpers/sequencer.ts).
    sequence: { sequencer: SlowFirstSequencer },
    // Most test files wait on loopback servers and timers, not the CPU: two at once on the 2-core CI
    // machine take the suite from about 6 to 3.5 minutes (vitest's default is one fewer than the cores).
    maxWorkers: 2,
    // Tests build S3 clients in-process (not through src/cli/main.ts, which sets this for users): the AWS
    // SDK's Node 20 support warning would fill the log. test/storage/sdk-warning.test.ts spawns the CLI
    // without it, so the CLI's own silencing is still tested.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
