/**
 * Held shells over SSH (issue 22): the world-neutral cases of test/helpers/held-shell-cases.ts
 * against a real OpenSSH sshd, the clients connecting through a TCP proxy on 127.0.0.1 this test
 * can cut (a 5 s outage drops every connection and refuses new ones).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe } from 'vitest'
import { heldShellCases } from '../helpers/held-shell-cases.ts'
import { type SocketCut, startSocketCut } from '../helpers/socket-cut.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld
let proxy: SocketCut
let stateDir: string
let knownHosts: string

beforeAll(async () => {
  sshd = await startSshdWorld()
  stateDir = await mkdtemp(join(tmpdir(), 'dsh-held-records-'))
  proxy = await startSocketCut({ port: sshd.ports[0]! }, { port: 0 })
  // The host key, for the proxy's port.
  knownHosts = join(stateDir, 'known_hosts')
  await writeFile(knownHosts, `[127.0.0.1]:${(proxy.listening as { port: number }).port} ${sshd.hostKey.publicKey}\n`)
})

afterAll(async () => {
  await proxy?.close()
  await sshd?.stop()
  if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true })
})

describe('held shells over SSH, as agent', () => {
  heldShellCases({
    containerId: () => sshd.containerId,
    workspace: '/tmp',
    get stateDir() { return stateDir },
    plan: (persistence, options = {}) => ({
      runtime: 'ssh',
      config: {
        target: `${options.user ?? 'agent'}@127.0.0.1:${(proxy.listening as { port: number }).port}`,
        identity: sshd.clientKeyFile, knownHosts, sshConfig: false, agent: false, persistence,
        ...(options.replies !== undefined ? { terminal: { replies: options.replies } } : {}),
      },
    }),
    proxy: () => proxy,
    recordsTarget: (_world, user) => `ssh:${user}@127.0.0.1:${(proxy.listening as { port: number }).port}`,
  }, 'agent')
})
