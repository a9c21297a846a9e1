/**
 * The pwsh dialect in the Docker world (test/helpers/pwsh-cases.ts): upstream terminal-bash with
 * `shellDialect: 'pwsh'` running PowerShell in a managed container of the pwsh image, as agent.
 * Skipped, with the reason in the title, only where the pwsh image could not be built; never under CI=true.
 */
import { describe, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { checkPwshAgentSessionCase, runAgentSessionCase } from '../helpers/agent-session-case.ts'
import { pwshCases } from '../helpers/pwsh-cases.ts'
import { PWSH_IMAGE, PWSH_TERMINAL, pwshImageAvailability } from '../helpers/pwsh-world.ts'

const image = await pwshImageAvailability()

describe.skipIf(!image.available)(`pwsh in a Docker container, as agent${image.available ? '' : ` (skipped: ${image.reason})`}`, () => {
  pwshCases(() => openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: PWSH_IMAGE, user: 'agent' }, workspaceRoot: '/tmp', terminal: PWSH_TERMINAL }))
})

describe.skipIf(!image.available)(`the agent session in pwsh through dsh-remote-worlds run --shell pwsh --json, as agent${image.available ? '' : ` (skipped: ${image.reason})`}`, () => {
  it('settles every step as the pwsh case expects and leaves nothing running', async () => {
    const { records, stderr } = await runAgentSessionCase(['--user', 'agent', '--cwd', '/tmp'], 'pwsh')
    checkPwshAgentSessionCase(records, stderr)
  }, 120_000)
})
