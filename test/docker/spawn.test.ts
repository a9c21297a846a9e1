/**
 * `spawn` and `resolveExecutable` in the Docker world (the shared suite, test/helpers/spawn-cases.ts),
 * in a container this file creates with the suite's ambient environment.
 */
import type Docker from 'dockerode'
import { afterAll, beforeAll, expect } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { SPAWN_AMBIENT, spawnCases } from '../helpers/spawn-cases.ts'
import { docker, startTestContainer } from './helpers.ts'

const LABEL = { 'dsh-remote-worlds.test': 'spawn' }
let container: Docker.Container
let info: Docker.ContainerInspectInfo

beforeAll(async () => {
  container = await startTestContainer({
    Labels: LABEL,
    Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...Object.entries(SPAWN_AMBIENT).map(([name, value]) => `${name}=${value}`)],
  })
  info = await container.inspect()
})

afterAll(async () => {
  await container?.remove({ force: true })
})

spawnCases({
  name: 'docker',
  containerId: () => info.Id,
  hostname: async () => info.Config.Hostname,
  plugin: async (ctx, user) => { await ctx.plugin(DockerSubprocessRuntime, { container: info.Id, user }) },
  // Exactly: the container's Config.Env (the image's entries and ours), scrubbed, then the spec's layer.
  checkEnvironment: env => {
    const ambient = Object.fromEntries(info.Config.Env.map(entry => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]))
    const { SERVICE_TOKEN: _secret, DROP_ME: _dropped, ...kept } = ambient
    expect(env).toEqual({ ...kept, HOME: '/home/agent', EXPLICIT: 'yes', DEPLOY_KEY: 'deliberate', DSH_REMOTE_SESSION: expect.stringMatching(/^[0-9a-f]{32}\.[0-9a-f]{16}$/) })
  },
  vanishing: async () => {
    const victim = await startTestContainer({ Labels: LABEL })
    return {
      containerId: victim.id,
      plugin: async ctx => { await ctx.plugin(DockerSubprocessRuntime, { container: victim.id }) },
      vanish: async () => { await victim.kill() },
      // The container is gone: nothing of it runs (checked by the engine, not a /proc scan).
      leftovers: async () => (await victim.inspect()).State.Running ? ['the container still runs'] : [],
      cleanup: async () => { await victim.remove({ force: true }) },
    }
  },
})
