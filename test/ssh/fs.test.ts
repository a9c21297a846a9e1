/**
 * `ctx.fs` in the SSH world (the shared contract suite, test/helpers/fs-cases.ts) against a real
 * OpenSSH sshd (project image, 127.0.0.1, keys generated per run), logged in as root and as
 * `agent`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { waitFor } from '../docker/helpers.ts'
import { FS_WORLD_HOST_CONFIG, fsCases } from '../helpers/fs-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld([{}], { hostConfig: FS_WORLD_HOST_CONFIG })
})

afterAll(async () => {
  await sshd?.stop()
})

fsCases({
  name: 'ssh',
  containerId: () => sshd.containerId,
  open: user => openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `${user}@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: '/srv',
  }),
})

describe('ctx.fs across a dropped SSH connection', () => {
  it('a call after the connection was lost reconnects with a new file server, and the file is whole', async () => {
    const world = await openWorld({
      runtime: SshSubprocessRuntime,
      runtimeConfig: { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
      workspaceRoot: '/tmp',
    })
    try {
      const fs = world.fs!
      const target = await fs.resolve('/tmp/across-drop.txt')
      await fs.writeText(target, 'before the drop\n')
      // Every per-connection sshd of agent: the connection is lost, the host lives on.
      await sshd.exec(['pkill', '-KILL', '-f', '^sshd: agent'])
      await waitFor(() => sshd.exec(['sh', '-c', 'pgrep -x dsh-fsd || true']).then(result => result.stdout), pids => pids.trim() === '')
      expect(await fs.readText(await fs.resolve('/tmp/across-drop.txt'))).toBe('before the drop\n')
      await fs.writeText(target, 'after the drop\n')
      expect((await sshd.exec(['cat', '/tmp/across-drop.txt'])).stdout).toBe('after the drop\n')
    } finally {
      await world.dispose()
    }
  })
})
