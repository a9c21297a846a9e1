/**
 * Resource-limit events in the Docker world (the shared suite, test/helpers/resource-event-cases.ts):
 * a container of the project image with Memory = MemorySwap = 256 MiB and PidsLimit 64, the
 * runtime attached as `agent`. The kills happen inside execs, where `docker inspect` says
 * OOMKilled false: only the cgroup's counters tell.
 */
import type Docker from 'dockerode'
import { afterAll, beforeAll } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { MEMORY_LIMIT, PIDS_LIMIT, resourceEventCases } from '../helpers/resource-event-cases.ts'
import { UPSTREAM_TUNING, docker, execsStarted, startTestContainer, terminalStandbyRuns, waitFor } from './helpers.ts'

let container: Docker.Container

beforeAll(async () => {
  container = await startTestContainer({
    Labels: { 'dsh-remote-worlds.test': 'resource-events' },
    HostConfig: { Memory: MEMORY_LIMIT, MemorySwap: MEMORY_LIMIT, PidsLimit: PIDS_LIMIT },
  })
})

afterAll(async () => {
  await container?.remove({ force: true })
})

resourceEventCases({
  name: 'docker',
  open: () => openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id, user: 'agent' }, workspaceRoot: '/tmp', terminal: { ...UPSTREAM_TUNING, timeoutMs: 30_000, idleSilenceMs: 3_000 } }),
  // The pool's next standby runs, its start done (a fresh exec's processes count in the cgroup).
  quiet: async () => {
    await waitFor(() => terminalStandbyRuns(container.id), found => found)
    await execsStarted(container.id)
  },
})
