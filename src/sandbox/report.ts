/**
 * The world-neutral sandbox report: which modes a world can enforce, how, and what is missing.
 * The CLI (`doctor`, `--mode`) and tests read it; every world's sandbox provider produces it.
 * @module dsh-remote-worlds/sandbox/report
 */
import type { SandboxEnforcement, SandboxMode } from '@deepseek-ai/dsh-sandbox'

/** Every mode, narrowest first (the order reports list them in). */
export const SANDBOX_MODES: readonly SandboxMode[] = ['read-only', 'workspace-write', 'danger-full-access']

/** One mode in one world. */
export interface SandboxModeReport {
  mode: SandboxMode
  /**
   * True when terminals can start under this mode: `confine()` succeeds for a confined mode;
   * always true for `danger-full-access`, which runs UNCONFINED (`enforcement: 'none'`).
   */
  available: boolean
  /**
   * `full` / `partial` as `confine()` reports them; `none` for danger-full-access (nothing is
   * confined); `unavailable` when `confine()` throws `SandboxUnavailableError`.
   */
  enforcement: SandboxEnforcement | 'none' | 'unavailable'
  /** What confines, e.g. `docker container (managed)` or `bubblewrap on the remote host`; `none` when unconfined. */
  mechanism: string
  /** The facts that enforce the mode (read-only rootfs, mounts, capabilities, ...). */
  facts: string[]
  /** Why enforcement is partial, or why the mode is unavailable; empty when full. */
  gaps: string[]
  /**
   * For an unavailable mode that another world of the same kind would enforce: what it takes
   * (e.g. `--mode read-only --workspace HOST_DIR` for a managed container created for another
   * mode). Absent when nothing the user can pass changes it.
   */
  needs?: string
}

/** What one world can enforce. */
export interface WorldSandboxReport {
  /** World description, e.g. `docker container 0123456789ab as 1000:1000 (managed)`. */
  world: string
  /** The workspace root the report was computed for (confinement depends on it). */
  workspaceRoot: string
  /** One entry per mode, in {@link SANDBOX_MODES} order. */
  modes: SandboxModeReport[]
  /** Resource limits in force, when the world has any (Docker HostConfig). */
  limits?: {
    pidsLimit: number | null
    memoryBytes: number | null
    nanoCpus: number | null
    networkMode: string | null
  }
}

/** A sandbox provider that can describe itself (every provider in src/sandbox is one). */
export interface ReportingSandbox {
  report(workspaceRoot?: string): WorldSandboxReport
}

/** Format a report as short human lines (for the CLI and log lines). */
export function formatSandboxReport(report: WorldSandboxReport): string[] {
  const lines = [`sandbox in ${report.world} (workspace ${report.workspaceRoot}):`]
  for (const mode of report.modes) {
    const head = mode.enforcement === 'none'
      ? `${mode.mode}: UNCONFINED (no sandbox; the shell can write anywhere the world lets its user write)`
      : mode.available
        ? `${mode.mode}: enforced (${mode.enforcement}) by ${mode.mechanism}`
        : mode.needs !== undefined
          ? `${mode.mode}: available with ${mode.needs}`
          : `${mode.mode}: NOT available (fails closed with SandboxUnavailableError)`
    lines.push(`  ${head}`)
    if (mode.needs === undefined) for (const gap of mode.gaps) lines.push(`    - ${gap}`)
  }
  if (report.limits !== undefined) {
    const { pidsLimit, memoryBytes, nanoCpus, networkMode } = report.limits
    lines.push(`  limits: pids ${pidsLimit ?? 'unlimited'}, memory ${memoryBytes === null ? 'unlimited' : `${memoryBytes} bytes`}, cpus ${nanoCpus === null ? 'unlimited' : nanoCpus / 1e9}, network ${networkMode ?? 'default'}`)
  }
  return lines
}
