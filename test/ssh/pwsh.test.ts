/**
 * The pwsh dialect over SSH (test/helpers/pwsh-cases.ts): the login shell stays bash (POSIX, for
 * the control channel and the start wrapper); the terminal runs PowerShell, as agent, on an sshd
 * in the pwsh image. Skipped, with the reason in the title, only where the pwsh image could not
 * be built; never under CI=true.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { checkPwshAgentSessionCase, runAgentSessionCase } from '../helpers/agent-session-case.ts'
import { pwshCases } from '../helpers/pwsh-cases.ts'
import { PWSH_IMAGE, PWSH_TERMINAL, pwshImageAvailability } from '../helpers/pwsh-world.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

const image = await pwshImageAvailability()
let sshd: SshdWorld | undefined

describe.skipIf(!image.available)(`pwsh over SSH, as agent with a bash login${image.available ? '' : ` (skipped: ${image.reason})`}`, () => {
  beforeAll(async () => {
    sshd = await startSshdWorld([{}], { image: PWSH_IMAGE })
  })

  afterAll(async () => {
    await sshd?.stop()
  })

  pwshCases(() => openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${sshd!.ports[0]}`, identity: sshd!.clientKeyFile, knownHosts: sshd!.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: '/tmp',
    terminal: PWSH_TERMINAL,
  }))

  it('the agent session in pwsh through dsh-remote-worlds run --shell pwsh --ssh settles every step as the pwsh case expects and leaves nothing running', async () => {
    const { records, stderr } = await runAgentSessionCase(['--ssh', `agent@127.0.0.1:${sshd!.ports[0]}`, '--identity', sshd!.clientKeyFile, '--known-hosts', sshd!.knownHostsFile, '--cwd', '/tmp'], 'pwsh')
    checkPwshAgentSessionCase(records, stderr)
    expect(await sshd!.leftovers()).toEqual([])
  }, 120_000)
})
