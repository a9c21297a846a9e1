/**
 * The terminal protocol over SSH (test/helpers/terminal-protocol-cases.ts), as `agent` against
 * the project's sshd world.
 */
import { afterAll, beforeAll, describe } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { terminalProtocolCases } from '../helpers/terminal-protocol-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await sshd?.stop()
})

describe('terminal queries and screens over SSH, as agent', () => {
  terminalProtocolCases(settings => openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false, ...(settings !== undefined ? { terminal: settings } : {}) },
    workspaceRoot: '/tmp',
    terminal: { rows: 24 },
  }))
})
