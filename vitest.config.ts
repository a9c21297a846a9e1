import { defineConfig } from 'vitest/config'

/**
 * The files of the `remote` lane (test/lanes.ts): the SSH world, the swarm and the unit tests.
 * Every other file is the `engine` lane's: it makes containers on the main Docker engine.
 */
export const REMOTE_LANE = ['test/ssh/**/*.test.ts', 'test/swarm/**/*.test.ts', 'test/unit/**/*.test.ts', 'test/sandbox/ssh-*.test.ts', 'test/network/ssh-*.test.ts', 'test/jobs/ssh-*.test.ts']

// Tests run against a real Docker engine and real upstream packages; `npm test` first runs
// docker/ensure-world.sh so the engine and the project image exist. Within a lane files run one
// at a time, so timing-sensitive readiness checks stay honest on 2 cores; `npm test` runs the
// two lanes side by side (test/lanes.ts says why that split), `vitest run` both in one queue.
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    // The upstream plugin loader resolves plugin packages through Node's internal ESM loader;
    // --expose-internals lets it reach that without its optional native addon
    // (node-addon-require-builtin), whose non-linux platform packages are not on the registry,
    // which leaves any lockfile listing it out of sync for `npm ci`.
    poolOptions: { forks: { execArgv: ['--expose-internals'] } },
    reporters: ['default'],
    // Minutes-long cases by design are not here: `npm run test:long` (vitest.long.config.ts).
    projects: [
      { extends: true, test: { name: 'engine', include: ['test/**/*.test.ts'], exclude: ['test/long/**', '**/node_modules/**', ...REMOTE_LANE] } },
      { extends: true, test: { name: 'remote', include: REMOTE_LANE, exclude: ['**/node_modules/**'] } },
    ],
  },
})
