import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Tests build S3 clients in-process (not through src/cli/main.ts, which sets this for users): the AWS
    // SDK's Node 20 support warning would fill the log. test/storage/sdk-warning.test.ts spawns the CLI
    // without it, so the CLI's own silencing is still tested.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
