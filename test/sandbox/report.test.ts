/** The human form of a sandbox report (CLI `doctor`, log lines). */
import { describe, expect, it } from 'vitest'
import { formatSandboxReport } from '../../src/sandbox/report.ts'

describe('formatSandboxReport', () => {
  it('names enforcement, unavailability with reasons, unconfined danger-full-access, limits', () => {
    expect(formatSandboxReport({
      world: 'docker container 0123456789ab as 1000:1000 (managed)',
      workspaceRoot: '/workspace',
      modes: [
        { mode: 'read-only', available: true, enforcement: 'full', mechanism: 'docker container (managed, created from the policy)', facts: ['read-only root filesystem'], gaps: [] },
        { mode: 'workspace-write', available: false, enforcement: 'unavailable', mechanism: 'docker container (managed, created from the policy)', facts: [], gaps: ['the workspace /workspace is not writable'] },
        { mode: 'danger-full-access', available: true, enforcement: 'none', mechanism: 'none', facts: [], gaps: [] },
      ],
      limits: { pidsLimit: 512, memoryBytes: 2147483648, nanoCpus: 2000000000, networkMode: 'none' },
    })).toEqual([
      'sandbox in docker container 0123456789ab as 1000:1000 (managed) (workspace /workspace):',
      '  read-only: enforced (full) by docker container (managed, created from the policy)',
      '  workspace-write: NOT available (fails closed with SandboxUnavailableError)',
      '    - the workspace /workspace is not writable',
      '  danger-full-access: UNCONFINED (no sandbox; the shell can write anywhere the world lets its user write)',
      '  limits: pids 512, memory 2147483648 bytes, cpus 2, network none',
    ])
  })
})
