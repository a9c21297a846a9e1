/**
 * No exit status is lost in the Docker world (the shared suite, test/helpers/exit-status-cases.ts):
 * a container of the project image, the runtime attached as `agent`. 200 spawns per stdio mode
 * here; the soak's 1000 are test/long/exit-status-soak.test.ts.
 */
import type Docker from 'dockerode'
import { afterAll, beforeAll } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { exitStatusCases } from '../helpers/exit-status-cases.ts'
import { docker, startTestContainer } from './helpers.ts'

let container: Docker.Container

beforeAll(async () => {
  container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'exit-status' } })
})

afterAll(async () => {
  await container?.remove({ force: true })
})

exitStatusCases({
  name: 'docker',
  plugin: async ctx => { await ctx.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent' }) },
}, { spawns: 200, parallel: 8 })
