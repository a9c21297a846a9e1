/**
 * `npm run soak [-- --terminals 500 --spawns 2000 --flood-runs 10 --only docker,ssh --max-minutes 30 --no-faults]`
 *
 * Reliability figures, as a benchmark and never as timed tests (loopback only, bounded in count
 * and in time): per world (a container of the project image attached as `agent`; a real OpenSSH
 * sshd in such a container, logged in as `agent`):
 * - terminals opened and closed with hostile children, and the processes each close leaked,
 *   counted by an independent checker (bench/soak/checker.ts), never by the control channel;
 * - spawns and the exit statuses lost or wrong;
 * - this client's RSS and open file descriptors before and after (after a GC);
 * - control-channel failures seen;
 * - a flood (`base64 /dev/urandom`) cancelled through terminal-bash: cancel to prompt;
 * - a fault matrix (bench/soak/faults.ts): typed error, time to detect, next open.
 * Writes `bench/results/soak.json` and prints tables. The engine restart fault runs last: it
 * stops every container of the engine (the soak's own are made for it).
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Context } from '@deepseek-ai/cordis'
import Docker from 'dockerode'
import { openWorld } from '../src/backend/world.ts'
import { DockerSubprocessRuntime, type DockerRuntimeConfig } from '../src/providers/docker/docker-runtime.ts'
import { MANAGED_LABEL } from '../src/providers/docker/docker-world.ts'
import { RemoteWorldError } from '../src/providers/remote/errors.ts'
import { SshSubprocessRuntime, type SshRuntimeConfig } from '../src/providers/ssh/ssh-runtime.ts'
import { type SshdWorld, startSshdWorld } from '../test/helpers/sshd-world.ts'
import { ProcessChecker } from './soak/checker.ts'
import { type SpawnChurn, type TerminalChurn, spawnChurn, terminalChurn } from './soak/churn.ts'
import { type FaultRow, type Mount, ResettingRelay, faultScenario, restartEngine, sweepManaged } from './soak/faults.ts'
import { type FloodCancel, floodCancel } from './soak/flood.ts'

const { values: args } = parseArgs({
  options: {
    terminals: { type: 'string', default: '500' },
    spawns: { type: 'string', default: '2000' },
    'flood-runs': { type: 'string', default: '10' },
    only: { type: 'string' },
    'max-minutes': { type: 'string', default: '30' },
    'no-faults': { type: 'boolean', default: false },
    out: { type: 'string' },
  },
})
const HERE = dirname(fileURLToPath(import.meta.url))
const OUT = args.out ?? join(HERE, 'results', 'soak.json')
const IMAGE = process.env.DSH_REMOTE_IMAGE ?? 'dsh-remote-worlds/target:bookworm'
const ENSURE = join(HERE, '..', 'docker', 'ensure-world.sh')
const SOAK_LABEL = 'dsh-remote-worlds.soak'
const docker = new Docker()
const deadline = Date.now() + Number(args['max-minutes']) * 60_000

/** This process's resident set and JS heap in use (bytes) and open descriptors, after a GC when exposed. */
async function footprint(): Promise<{ rssBytes: number; heapBytes: number; fds: number }> {
  ;(globalThis as { gc?: () => void }).gc?.()
  const memory = process.memoryUsage()
  return { rssBytes: memory.rss, heapBytes: memory.heapUsed, fds: (await readdir('/proc/self/fd')).length }
}

/** The figures of one world. */
interface WorldSoak {
  world: 'docker' | 'ssh'
  terminals: TerminalChurn
  spawns: SpawnChurn
  start: { rssBytes: number; heapBytes: number; fds: number }
  end: { rssBytes: number; heapBytes: number; fds: number }
  controlChannelFailures: number
  flood: FloodCancel
  seconds: number
}

/** A world to soak: where it runs, how a client mounts it, and its cleanup. */
interface SoakWorld {
  world: 'docker' | 'ssh'
  containerId: string
  mount: Mount
  /** openWorld options (terminal-bash on top) for the flood row. */
  runtime: typeof DockerSubprocessRuntime | typeof SshSubprocessRuntime
  config: DockerRuntimeConfig | SshRuntimeConfig
}

async function soakWorld(target: SoakWorld): Promise<WorldSoak> {
  const started = performance.now()
  const ctx = new Context()
  await target.mount(ctx)
  const runtime = ctx.subprocess
  const checker = await ProcessChecker.start(docker, target.containerId)
  let controlChannelFailures = 0
  const onFailure = (error: unknown): void => {
    if (error instanceof RemoteWorldError && error.code === 'CONTROL_FAILED') controlChannelFailures += 1
  }
  try {
    // Warm-up, a tenth of each count: the connection, the control channel, and the process's
    // working size (V8's compiled code and the allocator's arenas grow over the first hundreds
    // of operations, then stay: measured, heap objects do not grow); then the first footprint.
    await terminalChurn(runtime, checker, Math.ceil(Number(args.terminals) / 10), Infinity, onFailure)
    await spawnChurn(runtime, Math.ceil(Number(args.spawns) / 10), 8, Infinity, onFailure)
    const start = await footprint()
    console.error(`[soak] ${target.world}: terminals ...`)
    const terminals = await terminalChurn(runtime, checker, Number(args.terminals), deadline, onFailure)
    console.error(`[soak] ${target.world}: spawns ...`)
    const spawns = await spawnChurn(runtime, Number(args.spawns), 8, deadline, onFailure)
    const end = await footprint()
    console.error(`[soak] ${target.world}: flood ...`)
    const world = await openWorld({ runtime: target.runtime as never, runtimeConfig: target.config, workspaceRoot: '/tmp' })
    let flood: FloodCancel
    try {
      flood = await floodCancel(world, Number(args['flood-runs']))
    } finally {
      await world.dispose()
    }
    return { world: target.world, terminals, spawns, start, end, controlChannelFailures, flood, seconds: Math.round((performance.now() - started) / 1000) }
  } finally {
    checker.close()
    await ctx.fiber.dispose()
  }
}

async function soakContainer(options: Docker.ContainerCreateOptions = {}): Promise<Docker.Container> {
  const container = await docker.createContainer({ Image: IMAGE, Cmd: ['sleep', 'infinity'], Labels: { [SOAK_LABEL]: String(process.pid) }, HostConfig: { Init: true, NetworkMode: 'none' }, ...options })
  await container.start()
  return container
}

function sshConfig(sshd: SshdWorld, port = sshd.ports[0]!, pinned = false): SshRuntimeConfig {
  return {
    target: `agent@127.0.0.1:${port}`,
    identity: sshd.clientKeyFile,
    ...(pinned ? { hostKeyFingerprint: sshd.hostKey.fingerprint } : { knownHosts: sshd.knownHostsFile }),
    sshConfig: false,
    agent: false,
  }
}

async function faultMatrix(sshd: SshdWorld | undefined, worlds: readonly string[]): Promise<FaultRow[]> {
  const rows: FaultRow[] = []
  const record = (row: FaultRow): void => {
    rows.push(row)
    console.error(`[soak] fault ${row.world} ${row.fault}: ${row.error} after ${row.detectMs ?? '-'} ms; next open ${row.nextOpen}`)
  }
  if (sshd !== undefined && worlds.includes('ssh')) {
    const mount: Mount = async ctx => { await ctx.plugin(SshSubprocessRuntime, sshConfig(sshd)) }
    record(await faultScenario({ world: 'ssh', fault: 'sshd killed (the connection\'s processes)', boundMs: 1_000, mount, inject: async () => { await sshd.exec(['pkill', '-KILL', '-f', '^sshd: agent']) } }))
    const relay = await ResettingRelay.start(sshd.ports[0]!)
    try {
      const relayed: Mount = async ctx => { await ctx.plugin(SshSubprocessRuntime, sshConfig(sshd, relay.port, true)) }
      record(await faultScenario({ world: 'ssh', fault: 'TCP reset', boundMs: 1_000, mount: relayed, inject: async () => relay.reset() }))
    } finally {
      relay.close()
    }
    // Keepalive 1 s x 3: a silent peer is detected within 4 s.
    record(await faultScenario({ world: 'ssh', fault: 'host paused (docker pause)', boundMs: 4_000, mount, inject: () => sshd.pause(), undo: () => sshd.unpause() }))
  }
  if (worlds.includes('docker')) {
    const attached = async (fault: string, boundMs: number, inject: (container: Docker.Container) => Promise<unknown>, undo?: (container: Docker.Container) => Promise<unknown>): Promise<void> => {
      const container = await soakContainer()
      try {
        const mount: Mount = async ctx => { await ctx.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent' }) }
        record(await faultScenario({ world: 'docker', fault, boundMs, mount, inject: async () => { await inject(container) }, ...(undo !== undefined ? { undo: async () => { await undo(container) } } : {}) }))
      } finally {
        await container.remove({ force: true }).catch(() => undefined)
      }
    }
    await attached('container killed (docker kill)', 2_000, container => container.kill())
    await attached('container stopped (docker stop -t 1)', 2_000, container => container.stop({ t: 1 }))
    // Frozen, not ended: the probes' control requests time out (default 10 s), plus one probe interval.
    await attached('container paused (docker pause)', 10_500, container => container.pause(), container => container.unpause())
    const managed: Mount = async ctx => { await ctx.plugin(DockerSubprocessRuntime, { image: IMAGE, user: 'agent' }) }
    record(await faultScenario({ world: 'docker', fault: 'dockerd restarted (SIGTERM, then started again)', boundMs: 2_000, mount: managed, inject: () => restartEngine(ENSURE) }))
    const swept = await sweepManaged(docker, MANAGED_LABEL)
    if (swept > 0) console.error(`[soak] the engine restart left ${swept} managed container(s) it had not removed; swept`)
  }
  return rows
}

function pct(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!
}

function growth(start: number, end: number): string {
  return `${(((end - start) / start) * 100).toFixed(1)}%`
}

function printTables(results: readonly WorldSoak[], faults: readonly FaultRow[]): void {
  const rows = results.map(result => ({
    world: result.world,
    terminals: String(result.terminals.terminals),
    'leaked procs': String(result.terminals.leakedProcesses),
    'close p50/p90 ms': `${pct(result.terminals.closeMs, 0.5).toFixed(0)}/${pct(result.terminals.closeMs, 0.9).toFixed(0)}`,
    'terminal failures': String(Object.values(result.terminals.failures).reduce((sum, count) => sum + count, 0)),
    spawns: String(result.spawns.spawns),
    'lost/wrong status': `${result.spawns.lost}/${result.spawns.wrong}`,
    'RSS MB start/end': `${(result.start.rssBytes / 2 ** 20).toFixed(0)}/${(result.end.rssBytes / 2 ** 20).toFixed(0)} (${growth(result.start.rssBytes, result.end.rssBytes)})`,
    'heap MB start/end': `${(result.start.heapBytes / 2 ** 20).toFixed(1)}/${(result.end.heapBytes / 2 ** 20).toFixed(1)} (${growth(result.start.heapBytes, result.end.heapBytes)})`,
    'fds start/end': `${result.start.fds}/${result.end.fds}`,
    'control failures': String(result.controlChannelFailures),
    'flood cancel p50/p90 ms': `${pct(result.flood.cancelToPromptMs, 0.5).toFixed(0)}/${pct(result.flood.cancelToPromptMs, 0.9).toFixed(0)}`,
    seconds: String(result.seconds),
  }))
  printRows(rows)
  console.log('')
  printRows(faults.map(row => ({ world: row.world, fault: row.fault, 'typed error': row.error, 'detect ms': row.detectMs === null ? '-' : String(row.detectMs), 'bound ms': String(row.boundMs), 'next open': row.nextOpen })))
}

function printRows(rows: readonly Record<string, string>[]): void {
  if (rows.length === 0) return
  const columns = Object.keys(rows[0]!)
  const widths = columns.map(column => Math.max(column.length, ...rows.map(row => row[column]!.length)))
  console.log(`| ${columns.map((column, index) => column.padEnd(widths[index]!)).join(' | ')} |`)
  console.log(`|${widths.map(width => '-'.repeat(width + 2)).join('|')}|`)
  for (const row of rows) console.log(`| ${columns.map((column, index) => row[column]!.padEnd(widths[index]!)).join(' | ')} |`)
}

async function sweep(): Promise<void> {
  const left = await docker.listContainers({ all: true, filters: { label: [`${SOAK_LABEL}=${process.pid}`] } }).catch(() => [])
  await Promise.all(left.map(info => docker.getContainer(info.Id).remove({ force: true }).catch(() => undefined)))
}

async function main(): Promise<void> {
  const worlds = args.only === undefined ? ['docker', 'ssh'] : args.only.split(',').map(name => name.trim())
  const results: WorldSoak[] = []
  let sshd: SshdWorld | undefined
  try {
    if (worlds.includes('docker')) {
      const container = await soakContainer()
      const config: DockerRuntimeConfig = { container: container.id, user: 'agent' }
      results.push(await soakWorld({ world: 'docker', containerId: container.id, mount: async ctx => { await ctx.plugin(DockerSubprocessRuntime, config) }, runtime: DockerSubprocessRuntime, config }))
      await container.remove({ force: true })
    }
    if (worlds.includes('ssh')) {
      sshd = await startSshdWorld()
      const config = sshConfig(sshd)
      results.push(await soakWorld({ world: 'ssh', containerId: sshd.containerId, mount: async ctx => { await ctx.plugin(SshSubprocessRuntime, config) }, runtime: SshSubprocessRuntime, config }))
    }
    const faults = args['no-faults'] ? [] : await faultMatrix(sshd, worlds)
    console.log(`\nsoak: ${new Date().toISOString()}, node ${process.version}\n`)
    printTables(results, faults)
    await mkdir(dirname(OUT), { recursive: true })
    await writeFile(OUT, `${JSON.stringify({ worlds: results, faults }, null, 2)}\n`)
    console.log(`\nwrote ${OUT}`)
  } finally {
    await sshd?.stop().catch(() => undefined)
    await sweep()
  }
}

await main()
process.exit(0)
