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
 * @module bench/rows/pwsh
 */
import Docker from 'dockerode'
import { type SampleTable, pushSample, withTimeout } from '../timing.ts'
import { expectSettled } from '../terminal-steps.ts'
import { DEFAULT_TUNING, PWSH_IMAGE, type StartedWorld } from '../worlds.ts'
import { imageExists } from '../../src/providers/docker/images.ts'

export const PWSH_OPEN_METRIC = 'open-to-prompt (pwsh)'
export const PWSH_ECHO_METRIC = 'echo settle (pwsh)'
export const PWSH_READ_HOST_METRIC = 'Read-Host settle (stdin_read, pwsh)'

/** The rows, in report order. */
export const PWSH_METRICS = [PWSH_OPEN_METRIC, PWSH_ECHO_METRIC, PWSH_READ_HOST_METRIC] as const

/** Whether the PowerShell image exists (docker/ensure-world.sh builds it where dotnet is on PATH). */
export async function pwshImageExists(): Promise<boolean> {
  return imageExists(new Docker(), PWSH_IMAGE)
}

/**
 * Measure the pwsh rows of `started`'s world into `samples`: one discarded warm-up run (the
 * container, the .NET runtime's first start), then `runs` runs.
 */
export async function pwshRuns(started: StartedWorld, runs: number, samples: SampleTable): Promise<void> {
  if (started.world === 'local') return
  if (!await pwshImageExists()) {
    console.error(`[bench] ${started.world}: ${PWSH_IMAGE} is not built (docker/ensure-world.sh builds it where dotnet is on PATH): pwsh rows skipped`)
    return
  }
  const target = await started.compose({ tuning: { ...DEFAULT_TUNING, shellDialect: 'pwsh', shellPath: 'pwsh' }, emulator: true, shell: 'pwsh' })
  try {
    for (let run = 0; run <= runs; run += 1) {
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
        pushSample(samples, PWSH_ECHO_METRIC, { ms: echo.ms, reason: echo.waitReason })
        pushSample(samples, PWSH_READ_HOST_METRIC, { ms: ask.ms, reason: ask.waitReason })
      } finally {
        await withTimeout(term.close(), 'close (pwsh)')
      }
    }
  } finally {
    await target.dispose()
  }
}
