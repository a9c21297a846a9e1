/**
 * Targets from an ssh_config file against a real sshd: a Host alias (HostName, User, Port,
 * IdentityFile) and a ProxyJump hop (through the same sshd, which forwards to 127.0.0.1 only).
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld
let sshConfig: string

beforeAll(async () => {
  sshd = await startSshdWorld()
  const port = sshd.ports[0]!
  sshConfig = join(sshd.dir, 'ssh_config')
  writeFileSync(sshConfig, [
    'Host box',
    '  HostName 127.0.0.1',
    `  Port ${port}`,
    '  User agent',
    `  IdentityFile ${sshd.clientKeyFile}`,
    'Host behind-jump',
    '  HostName 127.0.0.1',
    `  Port ${port}`,
    '  User root',
    `  IdentityFile ${sshd.clientKeyFile}`,
    '  ProxyJump box',
    '',
  ].join('\n'))
})

afterAll(async () => {
  await sshd?.stop()
})

describe('ssh_config targets', () => {
  it.each([
    ['box', 'agent', 1000, ['sshd: agent [priv]']],
    // The jump hop is a connection as agent; the target connection is tunnelled through it.
    ['behind-jump', 'root', 0, ['sshd: agent [priv]', 'sshd: root@notty']],
  ])('%s logs in as %s and runs a terminal', async (alias, user, uid, connections) => {
    const world = await openWorld({
      runtime: SshSubprocessRuntime,
      runtimeConfig: { target: alias, sshConfig, knownHosts: sshd.knownHostsFile, agent: false },
      workspaceRoot: '/tmp',
    })
    try {
      const terminal = await world.open()
      const result = await terminal.send('printf "who=%s uid=%s\\n" "$(id -un)" "$(id -u)"')
      expect(result.waitReason).toBe('stdin_read')
      expect(result.viewport).toContain(`who=${user} uid=${uid}\n`)
      // One per connection: agent's privileged monitor; root's session process (no privsep child;
      // notty: the terminal's PTY is dsh-pty's, not sshd's).
      expect((await sshd.processes()).filter(row => /^sshd: (agent \[priv\]|root@)/.test(row.args)).map(row => row.args).sort()).toEqual(connections)
      await terminal.close()
    } finally {
      await world.dispose()
    }
  }, 30_000)
})
