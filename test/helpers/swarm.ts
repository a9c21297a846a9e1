/**
 * The swarm suite's cluster: three real dockerd on this machine (docker/ensure-swarm.sh: a
 * manager dsh-swarm-1 and workers dsh-swarm-2 and dsh-swarm-3, on 127.0.0.2-4, each labelled
 * dsh-remote-worlds.node=NAME), and what the tests read of it through each node's own engine,
 * never through the world under test.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import Docker from 'dockerode'
import { afterAll, beforeAll, expect } from 'vitest'
import { waitFor } from '../docker/helpers.ts'
import { ROOT } from './built-package.ts'
import type { SwarmRuntimeConfig } from '../../src/providers/swarm/swarm-config.ts'
import { SWARM_OWNER_LABEL, SWARM_SERVICE_LABEL } from '../../src/providers/swarm/service-spec.ts'

/** The nodes: number, hostname, engine endpoint. */
export const SWARM_NODES = [1, 2, 3].map(n => ({ n, name: `dsh-swarm-${n}`, endpoint: `unix:///run/dsh-swarm/${n}.sock` }))

/** The manager's engine endpoint. */
export const SWARM_MANAGER = SWARM_NODES[0]!.endpoint

/** The project image (loaded into every node by the script). */
export const SWARM_IMAGE = process.env.DSH_REMOTE_IMAGE ?? 'dsh-remote-worlds/target:bookworm'

/** The CLI flags of a world on this cluster. */
export const SWARM_CLI_FLAGS: readonly string[] = ['--swarm', SWARM_MANAGER, ...SWARM_NODES.slice(1).flatMap(node => ['--swarm-node', node.endpoint])]

/** A runtime config for this cluster, plus `extra`. */
export function swarmConfig(extra: Partial<SwarmRuntimeConfig> = {}): SwarmRuntimeConfig {
  return { manager: SWARM_MANAGER, nodes: SWARM_NODES.slice(1).map(node => node.endpoint), image: SWARM_IMAGE, ...extra }
}

/** The placement of a world on one node, by the node label the script sets. */
export function onNode(name: string): SwarmRuntimeConfig['placement'] {
  return { constraints: [`node.labels.dsh-remote-worlds.node==${name}`] }
}

/** A node's engine, straight (a client of the tests, not of the world). */
export function nodeEngine(n: number): Docker {
  return new Docker({ socketPath: `/run/dsh-swarm/${n}.sock` })
}

/**
 * Run docker/ensure-swarm.sh with `args` (none: bring the cluster up; `kill N`: node N dies).
 * @throws Error with the script's output when it fails.
 */
export async function swarmScript(...args: string[]): Promise<void> {
  const child = spawn('bash', ['docker/ensure-swarm.sh', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const [code] = await once(child, 'exit') as [number | null]
  if (code !== 0) throw new Error(`docker/ensure-swarm.sh ${args.join(' ')} exited with ${code}:\n${output}`)
}

/** What of swarm worlds exists on the cluster: services (manager), containers and scratch volumes (every node). */
export interface SwarmInventory {
  services: string[]
  containers: string[]
  volumes: string[]
}

/** Every swarm world's service, container (any state) and scratch volume now, as `NAME` / `NODE: ID`. */
export async function swarmInventory(): Promise<SwarmInventory> {
  const services = (await nodeEngine(1).listServices({ filters: { label: [SWARM_OWNER_LABEL] } })).map(service => service.Spec!.Name!)
  const perNode = await Promise.all(SWARM_NODES.map(async node => {
    const engine = nodeEngine(node.n)
    const containers = (await engine.listContainers({ all: true, filters: { label: [SWARM_OWNER_LABEL] } })).map(info => `${node.name}: ${info.Id.slice(0, 12)}`)
    const volumes = ((await engine.listVolumes({ filters: { label: [SWARM_SERVICE_LABEL] } })).Volumes ?? []).map(volume => `${node.name}: ${volume.Name}`)
    return { containers, volumes }
  }))
  return { services: services.sort(), containers: perNode.flatMap(node => node.containers).sort(), volumes: perNode.flatMap(node => node.volumes).sort() }
}

/** The inventory without what `before` had (what a test made). */
export function madeSince(before: SwarmInventory, now: SwarmInventory): SwarmInventory {
  const minus = (list: string[], old: string[]): string[] => list.filter(entry => !old.includes(entry))
  return { services: minus(now.services, before.services), containers: minus(now.containers, before.containers), volumes: minus(now.volumes, before.volumes) }
}

/**
 * The cluster for one test file: brought up (or found up) before its tests; after them, nothing
 * the file made may be left on any node. The script runs again first (a node a test killed is
 * restarted), and what a returning node still has may take `settleMs` to go (default 0: none).
 * @returns what existed before the file's tests (read it in a test or a later hook).
 */
export function useSwarmCluster(options: { settleMs?: number } = {}): () => SwarmInventory {
  let before: SwarmInventory | undefined
  beforeAll(async () => {
    await swarmScript()
    before = await swarmInventory()
  }, 180_000)
  afterAll(async () => {
    await swarmScript()
    const made = async (): Promise<SwarmInventory> => madeSince(before!, await swarmInventory())
    const left = await waitFor(made, inventory => inventory.services.length + inventory.containers.length + inventory.volumes.length === 0, options.settleMs ?? 0, 250)
    expect(left).toEqual({ services: [], containers: [], volumes: [] })
  }, 180_000)
  return () => before!
}
