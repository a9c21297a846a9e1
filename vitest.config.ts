import { defineConfig } from 'vitest/config'

// Tests run against a real Docker engine and real upstream packages; `npm test` first runs
// docker/ensure-world.sh so the engine and the project image exist. World tests share one
// engine, so files run one at a time to keep timing-sensitive readiness checks honest on 2 cores.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Minutes-long cases by design: `npm run test:long` (vitest.long.config.ts).
    exclude: ['test/long/**', '**/node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    // The upstream plugin loader resolves plugin packages through Node's internal ESM loader;
    // --expose-internals lets it reach that without its optional native addon
    // (node-addon-require-builtin), whose non-linux platform packages are not on the registry,
    // which leaves any lockfile listing it out of sync for `npm ci`.
    poolOptions: { forks: { execArgv: ['--expose-internals'] } },
    reporters: ['default'],
  },
})
