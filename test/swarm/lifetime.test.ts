/**
 * A swarm world ends with its client: teardown removes the service and proves its container
 * gone on its node; a client SIGKILLed mid-command leaves a task that ends by itself (its
 * lifeline exec ended with the client's connection), and the next client's reap removes the
 * service, proves the container gone and removes the scratch volume. Checked on every node's own
 * engine.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { SwarmSubprocessRuntime } from '../../src/providers/swarm/swarm-runtime.ts'
import { EngineConnection } from '../../src/providers/swarm/endpoints.ts'
import { reapSwarmWorlds } from '../../src/providers/swarm/reap.ts'
import { serviceSpec } from '../../src/providers/swarm/service-spec.ts'
import { mapNodes } from '../../src/providers/swarm/swarm-world.ts'
import { serviceTask, waitForTask } from '../../src/providers/swarm/task.ts'
import { newClientId } from '../../src/providers/remote/ownership.ts'
import { SESSION_SCRIPT, killHard, startCli } from '../helpers/client-death-cases.ts'
import { hangGuard, waitFor } from '../docker/helpers.ts'
import { SWARM_CLI_FLAGS, SWARM_IMAGE, SWARM_MANAGER, SWARM_NODES, madeSince, nodeEngine, onNode, swarmConfig, swarmInventory, useSwarmCluster } from '../helpers/swarm.ts'

const before = useSwarmCluster()
let folder: string

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), 'dsh-swarm-lifetime-'))
  // Root's, readable by all: read-only runs as the sandbox user 1000 (docker-policy.ts).
  chmodSync(folder, 0o755)
})

afterAll(() => {
  rmSync(folder, { recursive: true, force: true })
})

describe('teardown', () => {
  it('removes the service, and the container and scratch volume are gone from its node when dispose returns', async () => {
    const world = await openWorld({ runtime: SwarmSubprocessRuntime as never, runtimeConfig: swarmConfig({ placement: onNode('dsh-swarm-3') }), workspaceRoot: '/workspace', mode: 'read-only' })
    const swarm = (world.runtime as SwarmSubprocessRuntime).swarm!
    const shell = await world.open({ cwd: '/tmp' })
    expect((await shell.send('sleep 1000 &')).waitReason).toBe('stdin_read')
    const made = madeSince(before(), await swarmInventory())
    expect(made).toEqual({ services: [swarm.service.name], containers: [`dsh-swarm-3: ${swarm.task.containerId.slice(0, 12)}`], volumes: [`dsh-swarm-3: ${swarm.service.name}-tmp`] })
    await world.dispose()
    expect(madeSince(before(), await swarmInventory())).toEqual({ services: [], containers: [], volumes: [] })
    await expect(nodeEngine(3).getContainer(swarm.task.containerId).inspect()).rejects.toMatchObject({ statusCode: 404 })
  }, 60_000)
})

describe('a client SIGKILLed mid-command', () => {
  it('leaves a task that ends by itself, and after the next client\'s reap no service, container or volume on any node', async () => {
    const tag = `97${process.pid}`
    const cli = await startCli([...SWARM_CLI_FLAGS, '--constraint', 'node.labels.dsh-remote-worlds.node==dsh-swarm-2', '--mode', 'read-only', '--workspace', folder], SESSION_SCRIPT(tag))
    const made = madeSince(before(), await swarmInventory())
    expect(made.services).toHaveLength(1)
    const service = made.services[0]!
    expect(made.volumes).toEqual([`dsh-swarm-2: ${service}-tmp`])
    await killHard(cli)
    // The engine ended the lifeline exec with the dead client's connection; pid 1 read EOF.
    const manager = nodeEngine(1)
    const ended = await waitFor(async () => (await serviceTask(manager, service))?.Status?.State, state => state === 'complete', 30_000, 100)
    expect(ended).toBe('complete')

    const next = await openWorld({ runtime: SwarmSubprocessRuntime as never, runtimeConfig: swarmConfig({ placement: onNode('dsh-swarm-1') }), workspaceRoot: '/tmp' })
    try {
      const reaped = await hangGuard((next.runtime as SwarmSubprocessRuntime).swarmReaped(), 60_000, 'the next client\'s reap')
      expect(reaped?.status).toBe('fulfilled')
      const report = (reaped as PromiseFulfilledResult<import('../../src/providers/swarm/reap.ts').SwarmReapReport>).value
      expect(report.leftovers.filter(leftover => leftover.service === service).map(({ service: name, why }) => ({ name, why }))).toEqual([{ name: service, why: 'its task ended (complete)' }])
      expect(report.volumes.filter(volume => volume.includes(service))).toEqual([`dsh-swarm-2: ${service}-tmp`])
      expect(report.failures).toEqual([])
      const left = madeSince(before(), await swarmInventory())
      // Only the next client's own world remains.
      const own = (next.runtime as SwarmSubprocessRuntime).swarm!
      expect(left).toEqual({ services: [own.service.name], containers: [`dsh-swarm-1: ${own.task.containerId.slice(0, 12)}`], volumes: [] })
    } finally {
      await next.dispose()
    }
    for (const node of SWARM_NODES) {
      const sleeps = (await nodeEngine(node.n).listContainers({ all: true })).filter(info => info.Names.some(name => name.includes(service)))
      expect(sleeps, node.name).toEqual([])
    }
  }, 120_000)
})

describe('the reaper judges a running task by its lifeline exec, which only the engine can show', () => {
  it('removes a labelled service whose task runs with no lifeline (its client died before holding one), and leaves a held world alone', async () => {
    const held = await openWorld({ runtime: SwarmSubprocessRuntime as never, runtimeConfig: swarmConfig({ placement: onNode('dsh-swarm-2') }), workspaceRoot: '/tmp' })
    try {
      const heldService = (held.runtime as SwarmSubprocessRuntime).swarm!.service.name
      // A client that created its world's service and died before it held the lifeline.
      const manager = new EngineConnection({ host: SWARM_MANAGER })
      const image = (await nodeEngine(1).getImage(SWARM_IMAGE).inspect()).Id
      const name = `dsh-world-${newClientId().slice(0, 12)}`
      const { spec } = serviceSpec({ name, image, owner: newClientId(), create: {}, placement: onNode('dsh-swarm-3') })
      const id = ((await manager.docker.createService(spec)) as unknown as { id: string }).id
      const task = await waitForTask(manager.docker, id, 30_000, name)
      // Judged at once (deadline 0): only the engine's exec list tells the two apart.
      const nodes = await mapNodes(SWARM_NODES.map(node => new EngineConnection({ host: node.endpoint })))
      const report = await reapSwarmWorlds(manager, nodes, { lifelineDeadlineMs: 0 })
      expect(report.leftovers.map(({ service, why }) => ({ service, why })).filter(entry => entry.service === name || entry.service === heldService)).toEqual([{ service: name, why: 'no client holds its lifeline (the exec ended with its client)' }])
      expect(report.failures).toEqual([])
      await expect(nodeEngine(3).getContainer(task.containerId).inspect()).rejects.toMatchObject({ statusCode: 404 })
      // The held world goes on.
      const shell = await held.open({ cwd: '/tmp' })
      expect((await shell.send('echo still-here')).viewport).toBe('echo still-here\nstill-here\ndsh> ')
      await shell.close()
    } finally {
      await held.dispose()
    }
  }, 90_000)
})
