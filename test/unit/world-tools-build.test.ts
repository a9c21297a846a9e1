/**
 * Which world-tool builds the package's scripts make (world/build.sh,
 * issue 33 item 1): `npm start` and `npm run dsh-remote-worlds` only the machine's architecture,
 * so a newcomer's first command installs no cross compiler; `npm run build` and npm test's
 * pretest both (the suite tests both builds). The script runs with its output in a directory of
 * the test's own and with stand-ins, first on PATH, for every compiler, apt-get and npm: each
 * writes its name to a log and fails, so the log is what the script reached for, and nothing is
 * built or installed.
 */
import { execFile } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { arch, tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/built-package.ts'

const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts
const BUILD = 'bash world/build.sh'
const dirs: string[] = []
/** Whether this machine is of an architecture build.sh makes (Node's names: x64, arm64); else it builds nothing and the cases are skipped. */
const BUILT_HERE = arch() === 'x64' || arch() === 'arm64'

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** The world-tools step a package script runs first (the command before its first `&&`). */
function buildStep(script: string): string {
  return scripts[script]!.split(' && ')[0]!
}

/** Run `step` (a build.sh command line) with stand-ins; returns its exit code and what it reached for. */
async function runWithStandIns(step: string): Promise<{ code: number; reached: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-world-tools-build-'))
  dirs.push(dir)
  const log = join(dir, 'reached')
  writeFileSync(log, '')
  for (const name of ['musl-gcc', 'gcc', 'x86_64-linux-gnu-gcc', 'aarch64-linux-gnu-gcc', 'apt-get', 'npm']) {
    writeFileSync(join(dir, name), `#!/bin/sh\necho ${name} >> '${log}'\nexit 1\n`)
    chmodSync(join(dir, name), 0o755)
  }
  const [shell, ...args] = step.split(' ')
  expect(shell).toBe('bash')
  const code = await promisify(execFile)('bash', args, { cwd: ROOT, env: { ...process.env, PATH: `${dir}:${process.env.PATH ?? ''}`, DSH_WORLD_TOOLS_OUT: join(dir, 'out') } })
    .then(() => 0, (error: { code?: number }) => error.code ?? -1)
  return { code, reached: readFileSync(log, 'utf8').split('\n').filter(line => line.length > 0) }
}

describe('the world-tool builds of the package scripts', () => {
  it('npm start and npm run dsh-remote-worlds build only the machine\'s architecture; npm run build and the pretest build both', () => {
    expect(buildStep('start')).toBe(`${BUILD} --host-only`)
    expect(buildStep('dsh-remote-worlds')).toBe(`${BUILD} --host-only`)
    expect(buildStep('build')).toBe(`${BUILD} --all`)
    expect(scripts.pretest!.split(' && ')).toContain(BUILD)
    expect(scripts['build:world-tools']).toBe(BUILD)
  })

  it.skipIf(!BUILT_HERE)('npm start\'s step reaches for the machine\'s compiler only: no cross compiler, no apt-get, and it never fails', async () => {
    const { code, reached } = await runWithStandIns(buildStep('start'))
    expect(code).toBe(0)
    // The machine's own compiler (musl-gcc, which it prefers), tried once (its stand-in fails,
    // so nothing more follows).
    expect(reached).toEqual(['musl-gcc'])
  })

  it.skipIf(!BUILT_HERE)('--if-possible, what npm start ran before, reaches for the other architecture\'s cross compiler too', async () => {
    const { code, reached } = await runWithStandIns(`${BUILD} --if-possible`)
    expect(code).toBe(0)
    expect(reached).toEqual(['musl-gcc', arch() === 'x64' ? 'aarch64-linux-gnu-gcc' : 'x86_64-linux-gnu-gcc'])
  })
})
