/**
 * `npm test`: the suite in two lanes that run side by side, each one file at a time (the
 * projects of vitest.config.ts). Why two and why these: the suite waits far more than it
 * computes (about a quarter of two cores in one lane), and what one lane does must not be seen
 * by the other's assertions.
 * - `engine`: everything that makes containers on the main Docker engine and asserts about
 *   them (managed containers listed by label before and after, `doctor --reap` of a container's
 *   sessions, the packed tarball, the dsh CLI). Only one such file runs at a time.
 * - `remote`: the SSH world (its sshd container is not a managed one), the swarm (its own three
 *   engines; ensure-swarm.sh renames the main engine's docker0 aside for a moment, which no
 *   container of the engine lane uses: they all run with NetworkMode none or host) and the unit
 *   tests.
 * With arguments that name files (`npm test -- test/docker/fs.test.ts`), or with
 * DSH_TEST_LANES=1, one `vitest run` runs what is asked, one file at a time as before. Options
 * (`--reporter=...`) go to both lanes. DSH_TEST_REPORT_DIR=DIR adds a JSON report per lane
 * (DIR/LANE.json), for the per-file durations the closing notes give.
 * Exits with the first non-zero status of the lanes; a lane killed by a signal exits 1.
 * @module dsh-remote-worlds/test/lanes
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

const LANES = ['engine', 'remote'] as const
const VITEST = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs')

/** Run vitest with `args`, each output line prefixed with `label` (none: passed through as is). Resolves with its exit status. */
function vitest(args: readonly string[], label?: string): Promise<number> {
  const child = spawn(process.execPath, [VITEST, 'run', ...args], { cwd: ROOT, stdio: ['ignore', label === undefined ? 'inherit' : 'pipe', label === undefined ? 'inherit' : 'pipe'] })
  if (label !== undefined) {
    for (const [stream, sink] of [[child.stdout!, process.stdout], [child.stderr!, process.stderr]] as const) {
      let partial = ''
      stream.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n')
        partial = lines.pop()!
        if (lines.length > 0) sink.write(lines.map(line => `[${label}] ${line}\n`).join(''))
      })
      stream.on('end', () => { if (partial !== '') sink.write(`[${label}] ${partial}\n`) })
    }
  }
  return new Promise(resolve => child.on('close', (code, signal) => resolve(code ?? (signal === null ? 0 : 1))))
}

const args = process.argv.slice(2)
const namesFiles = args.some(arg => !arg.startsWith('-'))
if (namesFiles || process.env.DSH_TEST_LANES === '1') {
  process.exitCode = await vitest(args)
} else {
  const started = performance.now()
  const report = process.env.DSH_TEST_REPORT_DIR
  const statuses = await Promise.all(LANES.map(async lane => {
    const reporting = report === undefined ? [] : ['--reporter=default', '--reporter=json', `--outputFile.json=${join(report, `${lane}.json`)}`]
    const status = await vitest(['--project', lane, ...reporting, ...args], lane)
    process.stdout.write(`[lanes] ${lane}: ${status === 0 ? 'passed' : `failed (exit ${status})`} after ${((performance.now() - started) / 1000).toFixed(0)} s\n`)
    return status
  }))
  process.exitCode = statuses.find(status => status !== 0) ?? 0
}
