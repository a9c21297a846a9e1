/**
 * The two worlds the held-shell cases (held-shell-cases.ts) run against, each set up once per
 * test file: an OpenSSH sshd reached through a TCP proxy on 127.0.0.1, and an attached Docker
 * container whose engine socket is reached through a Unix-socket proxy. Either proxy can cut
 * (socket-cut.ts: a cut drops every connection and refuses new ones). Used by
 * test/ssh/held-shells.test.ts, test/docker/held-shells.test.ts and the soak-length cases in
 * test/long/held-shells-soak.test.ts. Call at a file's or describe's top level: each registers
 * its own beforeAll and afterAll.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type Docker from 'dockerode'
import { afterAll, beforeAll, expect } from 'vitest'
import { execIn, startTestContainer } from '../docker/helpers.ts'
import type { HeldShellWorld } from './held-shell-cases.ts'
import { type SocketCut, startSocketCut } from './socket-cut.ts'
import { type SshdWorld, startSshdWorld } from './sshd-world.ts'

/** An sshd world behind a TCP proxy; the cases log in as `options.user` (default agent). */
export function sshHeldWorld(): HeldShellWorld {
  let sshd: SshdWorld
  let proxy: SocketCut
  let stateDir: string
  let knownHosts: string
  const port = (): number => (proxy.listening as { port: number }).port
  beforeAll(async () => {
    sshd = await startSshdWorld()
    stateDir = await mkdtemp(join(tmpdir(), 'dsh-held-records-'))
    proxy = await startSocketCut({ port: sshd.ports[0]! }, { port: 0 })
    // The host key, for the proxy's port.
    knownHosts = join(stateDir, 'known_hosts')
    await writeFile(knownHosts, `[127.0.0.1]:${port()} ${sshd.hostKey.publicKey}\n`)
  })
  afterAll(async () => {
    await proxy?.close()
    await sshd?.stop()
    if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true })
  })
  return {
    containerId: () => sshd.containerId,
    workspace: '/tmp',
    get stateDir() { return stateDir },
    plan: (persistence, options = {}) => ({
      runtime: 'ssh',
      config: {
        target: `${options.user ?? 'agent'}@127.0.0.1:${port()}`,
        identity: sshd.clientKeyFile, knownHosts, sshConfig: false, agent: false, persistence,
        ...(options.replies !== undefined ? { terminal: { replies: options.replies } } : {}),
      },
    }),
    proxy: () => proxy,
    recordsTarget: (_world, user) => `ssh:${user}@127.0.0.1:${port()}`,
  }
}

/** An attached Docker container behind a proxy of the engine socket, and how to restart it. */
export function dockerHeldWorld(): { world: HeldShellWorld; container: () => Docker.Container; restart: () => Promise<void> } {
  let container: Docker.Container
  let proxy: SocketCut
  let stateDir: string
  beforeAll(async () => {
    container = await startTestContainer()
    stateDir = await mkdtemp(join(tmpdir(), 'dsh-held-records-'))
    proxy = await startSocketCut({ path: '/var/run/docker.sock' }, { path: join(stateDir, 'docker.sock') })
    expect((await execIn(container.id, ['true'])).exitCode).toBe(0)
  })
  afterAll(async () => {
    await proxy?.close()
    await container?.remove({ force: true }).catch(() => undefined)
    if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true })
  })
  return {
    world: {
      containerId: () => container.id,
      workspace: '/tmp',
      get stateDir() { return stateDir },
      plan: (persistence, options = {}) => ({
        runtime: 'docker',
        config: { container: container.id, user: options.user ?? 'agent', persistence, socketPath: (proxy.listening as { path: string }).path, ...(options.replies !== undefined ? { terminal: { replies: options.replies } } : {}) },
      }),
      proxy: () => proxy,
      recordsTarget: (_world, user) => `docker:${container.id}:${user}`,
    },
    container: () => container,
    restart: async () => {
      await container.restart({ t: 1 })
    },
  }
}
