/**
 * `ctx.fs` in the Docker world (the shared contract suite, test/helpers/fs-cases.ts), attached
 * to a container this file starts, as root and as the image's `agent`.
 */
import type Docker from 'dockerode'
import { afterAll, beforeAll } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { FS_WORLD_HOST_CONFIG, fsCases } from '../helpers/fs-cases.ts'
import { startTestContainer } from './helpers.ts'

let container: Docker.Container

beforeAll(async () => {
  container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'fs' }, HostConfig: FS_WORLD_HOST_CONFIG })
})

afterAll(async () => {
  await container?.remove({ force: true })
})

fsCases({
  name: 'docker',
  containerId: () => container.id,
  open: user => openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id, user }, workspaceRoot: '/srv' }),
})
