/**
 * The pwsh dialect (issue 13), beside the bash rows of the same world in the same run: terminal-bash
 * with `shellDialect: 'pwsh'` on a composition of its own (Docker: a managed container from the
 * PowerShell image; SSH: the same sshd, whose image is the PowerShell image when it exists).
 * Each run opens a terminal (timed: `open-to-prompt (pwsh)`, against bash's `open-to-prompt`),
 * sends `echo bench` (`echo settle (pwsh)`, against `echo settle`) and `Read-Host 'name'`
 * (`Read-Host settle (stdin_read, pwsh)`, against bash's `cat settle (stdin_read)`: the .NET
 * console's read on a thread of its own, proven by the stdin-wait probe), answers it and closes
 * (untimed). Remote worlds only: the upstream local provider answers no terminal query, and
 * PSReadLine waits for its cursor position report forever (README, "PowerShell").
 *
 * Before each open, in the same world and run, `pwsh direct start (plain exec)` (issue 32, part
 * E): the same pwsh with terminal-bash's arguments running terminal-bash's setup line (its UTF-8
 * preamble and prompt function) and the prompt once, as a command, by one plain exec with none of
 * this package's code (a dockerode exec in the container as the world's user; an ssh2 exec channel
 * on a connection of its own), timed from the exec's creation to its end: what the .NET runtime
 * and PowerShell's engine cost before any terminal exists. The open's median over it is printed
 * under the table.
 * @module bench/rows/pwsh
 */
// terminal-bash's own dependency (pinned with it): the preamble its pwsh dialect types first.
import { ENCODING_PREAMBLE } from '@deepseek-ai/dsh-pwsh-local'
import { PWSH_PROMPT_SETUP } from '@deepseek-ai/dsh-terminal-bash'
import Docker from 'dockerode'
import type { Client } from 'ssh2'
import { type SampleTable, pushSample, withTimeout } from '../timing.ts'
import { expectSettled } from '../terminal-steps.ts'
import { type BenchTarget, DEFAULT_TUNING, PWSH_IMAGE, type StartedWorld } from '../worlds.ts'
import { imageExists } from '../../src/providers/docker/images.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { shQuoteArgv } from '../../src/providers/remote/quote.ts'
import { connectSsh } from '../../src/providers/ssh/connect.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { type PlainExecResult, plainDockerExec, plainSshExec } from './raw-transport.ts'

export const PWSH_OPEN_METRIC = 'open-to-prompt (pwsh)'
export const PWSH_DIRECT_METRIC = 'pwsh direct start (plain exec)'
export const PWSH_ECHO_METRIC = 'echo settle (pwsh)'
export const PWSH_READ_HOST_METRIC = 'Read-Host settle (stdin_read, pwsh)'

/** The rows, in report order. */
export const PWSH_METRICS = [PWSH_OPEN_METRIC, PWSH_DIRECT_METRIC, PWSH_ECHO_METRIC, PWSH_READ_HOST_METRIC] as const

/**
 * The direct run's argv: terminal-bash's pwsh arguments (`-NoLogo -NoProfile`), then its setup
 * line and one call of the prompt it defines, as a command (pwsh ends after it).
 */
export const PWSH_DIRECT_ARGV: readonly string[] = ['pwsh', '-NoLogo', '-NoProfile', '-NonInteractive', '-Command', `${ENCODING_PREAMBLE}${PWSH_PROMPT_SETUP}; prompt`]

/** What the direct run prints last: the prompt the setup line defines. */
const DIRECT_PROMPT = 'dsh> '

/** Bound of one direct run (a cold .NET start on a loaded machine takes seconds). */
const DIRECT_TIMEOUT_MS = 60_000

/** Whether the PowerShell image exists (docker/ensure-world.sh builds it where dotnet is on PATH). */
export async function pwshImageExists(): Promise<boolean> {
  return imageExists(new Docker(), PWSH_IMAGE)
}

/** A plain exec in the composed world, and what to release after it. */
interface DirectExec {
  run(argv: readonly string[], onStdout: (chunk: Buffer) => void): Promise<PlainExecResult>
  release(): Promise<void>
}

/**
 * The composed world's plain exec (none of this package's code on its path): a dockerode exec in
 * its container as its user, or an ssh2 exec channel on a connection of its own, in /tmp.
 * @throws Error for a runtime that is neither Docker's nor SSH's.
 */
async function directExec(target: BenchTarget): Promise<DirectExec> {
  const runtime = target.world.runtime
  if (runtime instanceof DockerSubprocessRuntime) {
    const docker = await runtime.world()
    const container = docker.docker.getContainer(docker.containerId)
    const user = runtime.config.user
    return {
      run: (argv, onStdout) => plainDockerExec(docker.docker, container, { argv, workingDir: '/tmp', user, what: 'docker exec pwsh', timeoutMs: DIRECT_TIMEOUT_MS }, onStdout),
      release: async () => {},
    }
  }
  if (runtime instanceof SshSubprocessRuntime) {
    const ssh = await runtime.world()
    const { client } = await withTimeout(connectSsh(ssh.options.hop, ssh.options.jumps, ssh.options.timings), 'ssh connect')
    return {
      run: (argv, onStdout) => plainSshExec(client, `cd /tmp && exec ${shQuoteArgv(argv)} < /dev/null`, 'ssh exec pwsh', DIRECT_TIMEOUT_MS, onStdout),
      release: () => endSsh(client),
    }
  }
  throw new Error('bench: the pwsh world\'s runtime is neither Docker\'s nor SSH\'s')
}

/** Close a plain ssh2 connection and wait for it (bounded). */
async function endSsh(client: Client): Promise<void> {
  const gone = new Promise<void>(resolve => client.once('close', () => resolve()))
  client.end()
  await withTimeout(gone, 'ssh disconnect').catch(() => undefined)
}

/**
 * One direct run, timed (ms).
 * @throws Error unless pwsh exits 0 having printed the prompt.
 */
async function directStart(exec: DirectExec): Promise<number> {
  let stdout = ''
  const result = await exec.run(PWSH_DIRECT_ARGV, chunk => { stdout += chunk.toString('utf8') })
  if (result.exitCode !== 0 || !stdout.includes(DIRECT_PROMPT)) throw new Error(`bench: ${PWSH_DIRECT_METRIC} exited ${result.exitCode} printing ${JSON.stringify(stdout.slice(0, 200))}`)
  return result.ms
}

/**
 * Measure the pwsh rows of `started`'s world into `samples`: one discarded warm-up run (the
 * container, the .NET runtime's first start), then `runs` runs, each a direct start, then an open.
 */
export async function pwshRuns(started: StartedWorld, runs: number, samples: SampleTable): Promise<void> {
  if (started.world === 'local') return
  if (!await pwshImageExists()) {
    console.error(`[bench] ${started.world}: ${PWSH_IMAGE} is not built (docker/ensure-world.sh builds it where dotnet is on PATH): pwsh rows skipped`)
    return
  }
  const target = await started.compose({ tuning: { ...DEFAULT_TUNING, shellDialect: 'pwsh', shellPath: 'pwsh' }, emulator: true, shell: 'pwsh' })
  let direct: DirectExec | undefined
  try {
    direct = await directExec(target)
    for (let run = 0; run <= runs; run += 1) {
      const directMs = await directStart(direct)
      const opening = performance.now()
      const term = await withTimeout(target.world.open(), 'open (pwsh)')
      const openMs = performance.now() - opening
      try {
        const echo = await withTimeout(term.send('echo bench'), 'echo (pwsh)')
        expectSettled(started.world, PWSH_ECHO_METRIC, echo, echo.ms)
        const ask = await withTimeout(term.send("Read-Host 'name'"), 'Read-Host (pwsh)')
        expectSettled(started.world, PWSH_READ_HOST_METRIC, ask, ask.ms)
        await withTimeout(term.send('bench'), 'Read-Host answer (pwsh)')
        if (run === 0) continue
        pushSample(samples, PWSH_OPEN_METRIC, { ms: openMs })
        pushSample(samples, PWSH_DIRECT_METRIC, { ms: directMs })
        pushSample(samples, PWSH_ECHO_METRIC, { ms: echo.ms, reason: echo.waitReason })
        pushSample(samples, PWSH_READ_HOST_METRIC, { ms: ask.ms, reason: ask.waitReason })
      } finally {
        await withTimeout(term.close(), 'close (pwsh)')
      }
    }
  } finally {
    await direct?.release()
    await target.dispose()
  }
}
