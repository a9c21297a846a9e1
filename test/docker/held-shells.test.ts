/**
 * Held shells in an attached Docker container (issue 22): the world-neutral cases of
 * test/helpers/held-shell-cases.ts, the clients reaching the engine through a Unix-socket proxy
 * this test can cut (a 5 s outage drops every exec stream and refuses new ones), plus a
 * restarted container. Persistence 'client' is refused for a managed container (it ends with
 * its client), with the reason.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type Docker from 'dockerode'
import { Context } from '@deepseek-ai/cordis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { PersistenceUnavailableError } from '../../src/providers/remote/errors.ts'
import { heldShellCases } from '../helpers/held-shell-cases.ts'
import { type SocketCut, startSocketCut } from '../helpers/socket-cut.ts'
import { IMAGE, execIn, startTestContainer } from './helpers.ts'

const WORKSPACE = '/tmp'
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

describe('held shells in an attached Docker container, as agent', () => {
  heldShellCases({
    containerId: () => container.id,
    workspace: WORKSPACE,
    get stateDir() { return stateDir },
    plan: (persistence, options = {}) => ({
      runtime: 'docker',
      config: { container: container.id, user: options.user ?? 'agent', persistence, socketPath: (proxy.listening as { path: string }).path, ...(options.replies !== undefined ? { terminal: { replies: options.replies } } : {}) },
    }),
    proxy: () => proxy,
    recordsTarget: (_world, user) => `docker:${container.id}:${user}`,
  }, 'agent', {
    restart: async () => {
      await container.restart({ t: 1 })
    },
  })
})

describe('persistence in a managed container', () => {
  it("'client' is refused with the reason (the container ends with its client); 'connection' is accepted", () => {
    expect(() => new DockerSubprocessRuntime(new Context(), { image: IMAGE, persistence: 'client' })).toThrow(PersistenceUnavailableError)
    expect(() => new DockerSubprocessRuntime(new Context(), { image: IMAGE, persistence: 'client' })).toThrow(`a managed container (image ${IMAGE}) ends with its client, so its shells cannot outlive it: persistence 'client' needs an attached container (\`container\`), a dev container or an SSH host; 'connection' works here`)
    expect(() => new DockerSubprocessRuntime(new Context(), { image: IMAGE, persistence: 'connection' })).not.toThrow()
  })
})
