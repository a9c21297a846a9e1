import { defineConfig } from 'vitest/config'
import base from './vitest.config.ts'

// `npm run test:long`: the cases that wait minutes by design (a 10-minute detached flood), with
// the same assertions and settings as the rest of the suite, kept out of `npm test`'s budget.
// .ci/run runs both. (Not mergeConfig: it would add these globs to the base's, not replace them.)
// One queue, no lanes: the base's projects are the lanes of npm test (test/lanes.ts).
const { projects: _lanes, ...test } = base.test!
export default defineConfig({ ...base, test: { ...test, include: ['test/long/**/*.test.ts'], exclude: ['**/node_modules/**'] } })
