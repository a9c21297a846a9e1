/**
 * The PowerShell world of the tests: the image docker/ensure-world.sh builds when `dotnet` is on
 * PATH (the project image plus the .NET runtime and PowerShell), and terminal-bash's pwsh
 * dialect pointed at it.
 */
import Docker from 'dockerode'
import type { TerminalTuning } from '../../src/backend/world.ts'
import { imageExists } from '../../src/providers/docker/images.ts'

export const PWSH_IMAGE = process.env.DSH_REMOTE_PWSH_IMAGE ?? 'dsh-remote-worlds/target-pwsh:bookworm'

/** terminal-bash with the pwsh dialect, `pwsh` from the world's PATH, 24 rows. */
export const PWSH_TERMINAL: TerminalTuning = { shellDialect: 'pwsh', shellPath: 'pwsh', rows: 24 }

/**
 * Whether the pwsh image exists. Where it does not, the pwsh suites are skipped with the
 * returned reason in their title; under CI=true that is refused (issue 13: in CI the pwsh
 * tests run, never skip).
 * @throws Error under CI=true when the image is missing.
 */
export async function pwshImageAvailability(): Promise<{ available: true } | { available: false; reason: string }> {
  if (await imageExists(new Docker(), PWSH_IMAGE)) return { available: true }
  const reason = `${PWSH_IMAGE} is not built: docker/ensure-world.sh builds it where dotnet is on PATH (see its log line)`
  if (process.env.CI === 'true') throw new Error(`CI=true: the pwsh tests must run, but ${reason}`)
  return { available: false, reason }
}
