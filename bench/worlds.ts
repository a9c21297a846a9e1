/**
 * The worlds the bench measures (local, docker, ssh), how each is composed under the unchanged
 * terminal-bash, and the cleanup of everything they start.
 *
 * A {@link WorldEntry} starts what its world needs once (an sshd container; nothing for local
 * and docker) and returns a {@link StartedWorld}, on which the rows compose as many worlds as
 * they need: the default one ({@link DEFAULT_COMPOSITION}, what users get) for the common rows,
 * and others (emulator off, a longer send timeout) for the emulator rows. Everything is released
 * by `dispose`/`stop`, also on error and on SIGINT/SIGTERM ({@link cleanupAll}); bench-labelled
 * Docker containers are swept at exit.
 * @module bench/worlds
 */
import type { Context } from '@deepseek-ai/cordis'
import type { SubprocessRuntime, SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import LocalSubprocessRuntime from '@deepseek-ai/dsh-subprocess-local'
import Docker from 'dockerode'
import { openWorld, type RemoteWorld, type RuntimePlugin, type TerminalTuning } from '../src/backend/world.ts'
import { DockerSubprocessRuntime, type DockerRuntimeConfig } from '../src/providers/docker/docker-runtime.ts'
import { MANAGED_LABEL } from '../src/providers/docker/docker-world.ts'
import { SshSubprocessRuntime, type SshRuntimeConfig } from '../src/providers/ssh/ssh-runtime.ts'
import { startSshdWorld } from '../test/helpers/sshd-world.ts'
import { measureContainerStart } from './rows/container-start.ts'
import { measureRawDockerExec, measureRawSshExec } from './rows/raw-transport.ts'
import { measureSshConnect } from './rows/ssh-connect.ts'
import type { SampleTable } from './timing.ts'
import { imageExists } from '../src/providers/docker/images.ts'

/** The worlds, in the order the report lists them (local first: it is the baseline). */
export const WORLD_NAMES = ['local', 'docker', 'ssh'] as const
export type WorldName = typeof WORLD_NAMES[number]

/**
 * The upstream terminal-bash DEFAULTS, spelled out so the numbers mean what users get
 * (and so a change of upstream defaults shows up here as a visible diff, not a silent shift).
 */
export const DEFAULT_TUNING: TerminalTuning = { pollIntervalMs: 50, exactProbeAfterMs: 150, idleSilenceMs: 3000 }

/**
 * The defaults, but a send may last 120 s instead of 30 (`timeoutMs`), for the sends that move
 * 100 MB or flood for 30 s: with the default, a slow run would settle as `timeout` instead of
 * at its prompt, and a flood's later cancel would find no send to interrupt.
 */
export const LONG_SEND_TUNING: TerminalTuning = { ...DEFAULT_TUNING, timeoutMs: 120_000 }

export const IMAGE = process.env.DSH_REMOTE_IMAGE ?? 'dsh-remote-worlds/target:bookworm'
/** The project image with PowerShell (docker/ensure-world.sh, where dotnet is on PATH). */
export const PWSH_IMAGE = process.env.DSH_REMOTE_PWSH_IMAGE ?? 'dsh-remote-worlds/target-pwsh:bookworm'
/** Label on the bench's managed containers, so a crash can be swept without touching others'. */
const BENCH_LABEL = 'dsh-remote-worlds.bench'
/** The bench label with this process's value: on every container the bench creates. */
const benchLabels = (): Record<string, string> => ({ [BENCH_LABEL]: String(process.pid) })

/** How one world is composed. */
export interface Composition {
  /** terminal-bash tuning (ms and bytes). */
  tuning: TerminalTuning
  /**
   * Whether remote terminals keep an emulator (false: runtime setting `terminal: { emulator:
   * false }`). The local provider has no emulator either way.
   */
  emulator: boolean
  /**
   * The shell: `bash` (default) or `pwsh`. A pwsh composition's managed container comes from
   * {@link PWSH_IMAGE}; its tuning carries terminal-bash's `shellDialect`.
   */
  shell?: 'bash' | 'pwsh'
}

/** What users get: terminal-bash defaults, the emulator on. */
export const DEFAULT_COMPOSITION: Composition = { tuning: DEFAULT_TUNING, emulator: true }

/** An opened world ready to be measured. */
export interface BenchTarget {
  /** The composed world (terminal-bash on top of the runtime). */
  world: RemoteWorld
  /** Every terminal handle the runtime returned to terminal-bash, in spawn order. */
  handles: SubprocessTerminalHandle[]
  /** Wall time of each of those spawnTerminal calls (call to resolved handle: pid published), ms. */
  spawnMs: number[]
  /** The last spawn spec terminal-bash passed to the runtime (argv/env/cwd/rows/cols/graceMs). */
  lastSpec(): SubprocessTerminalSpawnSpec | undefined
  /** The runtime class and config it was composed with (the persistence rows compose more worlds of it). */
  runtime: RuntimePlugin<never>
  runtimeConfig: Record<string, unknown>
  /** Release the world (its terminals, runtime and managed container). Idempotent. */
  dispose(): Promise<void>
}

/** A world whose infrastructure runs (the sshd, for ssh): compose worlds on it, then stop it. */
export interface StartedWorld {
  world: WorldName
  /** Compose a world on it; {@link stop} disposes it if its user did not. */
  compose(composition: Composition): Promise<BenchTarget>
  /** World-specific rows (SSH connect time; Docker container start), measured after the common rows. */
  extraMetrics?: (runs: number) => Promise<SampleTable>
  /**
   * The raw transport's throughput rows (rows/raw-transport.ts), measured after
   * {@link extraMetrics}; also on their own under `--fs-only`, beside `fs readBytes (100 MB)`.
   */
  rawTransport?: (runs: number) => Promise<SampleTable>
  /** Dispose what {@link compose} made and stop the infrastructure. Idempotent. */
  stop(): Promise<void>
}

/** One world to measure. */
export interface WorldEntry {
  world: WorldName
  start(): Promise<StartedWorld>
}

/** Who the remote worlds log in as. */
export interface WorldUsers {
  /** Docker exec user (default: the image's). */
  docker?: string
  /** SSH login user. */
  ssh: string
}

/** Everything to release if the process is interrupted. */
const cleanups = new Set<() => Promise<void>>()

/** Release everything still open (worlds, sshd), then sweep bench-labelled containers. */
export async function cleanupAll(): Promise<void> {
  await Promise.allSettled([...cleanups].map(cleanup => cleanup()))
  await sweepBenchContainers()
}

/** Run `release` at most once, and from {@link cleanupAll} until it ran. */
function registerCleanup(release: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined
  const once = (): Promise<void> => {
    done ??= (async () => {
      try {
        await release()
      } finally {
        cleanups.delete(once)
      }
    })()
    return done
  }
  cleanups.add(once)
  return once
}

/**
 * Compose `runtime` under the unchanged terminal-bash and record the handles and specs the
 * runtime hands out (the wrapper only observes; the handle terminal-bash gets is the runtime's).
 */
async function composed<C>(runtime: RuntimePlugin<C>, runtimeConfig: C, tuning: TerminalTuning): Promise<BenchTarget> {
  const world = await openWorld({ runtime, runtimeConfig, workspaceRoot: '/tmp', terminal: tuning })
  const handles: SubprocessTerminalHandle[] = []
  const spawnMs: number[] = []
  let spec: SubprocessTerminalSpawnSpec | undefined
  const target = world.runtime as SubprocessRuntime & { spawnTerminal: SubprocessRuntime['spawnTerminal'] }
  const spawn = target.spawnTerminal.bind(target)
  target.spawnTerminal = async (request: SubprocessTerminalSpawnSpec) => {
    const started = performance.now()
    const handle = await spawn(request)
    spawnMs.push(performance.now() - started)
    spec = request
    handles.push(handle)
    return handle
  }
  return { world, handles, spawnMs, lastSpec: () => spec, runtime: runtime as RuntimePlugin<never>, runtimeConfig: runtimeConfig as Record<string, unknown>, dispose: registerCleanup(() => world.dispose()) }
}

/**
 * A {@link StartedWorld} over `compose`: it tracks the worlds composed, so `stop` can dispose
 * the ones still open before `stopInfrastructure`.
 */
function startedWorld(world: WorldName, compose: (composition: Composition) => Promise<BenchTarget>, stopInfrastructure: () => Promise<void>, rows: Pick<StartedWorld, 'extraMetrics' | 'rawTransport'> = {}): StartedWorld {
  const targets: BenchTarget[] = []
  const stop = registerCleanup(async () => {
    try {
      await Promise.all(targets.map(target => target.dispose()))
    } finally {
      await stopInfrastructure()
    }
  })
  return {
    world,
    compose: async composition => {
      const target = await compose(composition)
      targets.push(target)
      return target
    },
    ...(rows.extraMetrics !== undefined ? { extraMetrics: rows.extraMetrics } : {}),
    ...(rows.rawTransport !== undefined ? { rawTransport: rows.rawTransport } : {}),
    stop,
  }
}

/** The runtime setting that turns the emulator off; nothing (the default: on) otherwise. */
function emulatorSetting(composition: Composition): { terminal?: { emulator: false } } {
  return composition.emulator ? {} : { terminal: { emulator: false } }
}

/** The Docker runtime with the bench's own label on its managed container (for the crash sweep). */
class BenchDockerRuntime extends DockerSubprocessRuntime {
  constructor(ctx: Context, config: DockerRuntimeConfig) {
    super(ctx, config, { create: { Labels: { [MANAGED_LABEL]: 'true', ...benchLabels() } } })
  }
}

/** Remove containers this bench process created (by label), whatever state the run ended in. */
async function sweepBenchContainers(): Promise<void> {
  const docker = new Docker()
  const leftovers = await docker.listContainers({ all: true, filters: { label: [`${BENCH_LABEL}=${process.pid}`] } }).catch(() => [])
  await Promise.all(leftovers.map(info => docker.getContainer(info.Id).remove({ force: true }).catch(() => undefined)))
  if (leftovers.length > 0) console.error(`[bench] swept ${leftovers.length} leftover container(s)`)
}

/** The bench's worlds; `users` says who the remote worlds log in as. */
export function benchWorlds(users: WorldUsers): WorldEntry[] {
  return [
    {
      world: 'local',
      // The upstream provider exactly as a DSH composition mounts it; the same workspace root.
      start: async () => startedWorld('local', composition => composed(LocalSubprocessRuntime as unknown as RuntimePlugin<Record<string, never>>, {}, composition.tuning), async () => undefined),
    },
    {
      world: 'docker',
      // Each composition is a managed throwaway container from the project image; its first
      // (warm-up) open creates it, so every measured open runs on an already-running container
      // with a live control channel.
      start: async () => startedWorld(
        'docker',
        composition => composed(BenchDockerRuntime, { image: composition.shell === 'pwsh' ? PWSH_IMAGE : IMAGE, ...(users.docker !== undefined ? { user: users.docker } : {}), ...emulatorSetting(composition) }, composition.tuning),
        sweepBenchContainers,
        {
          // Container start to first prompt through testcontainers against the managed open (issue 11).
          extraMetrics: runs => measureContainerStart(IMAGE, runs),
          // The raw dockerode exec's throughput, beside the product's (issue 14).
          rawTransport: runs => measureRawDockerExec(IMAGE, benchLabels(), runs),
        },
      ),
    },
    {
      world: 'ssh',
      // A real OpenSSH sshd in a container from the project image, or from the PowerShell image
      // when it exists (the same image plus .NET and pwsh, for the pwsh rows) (host networking, 127.0.0.1, a
      // free high port, keys generated for this run, host key pinned through known_hosts), shared
      // by every composition. The warm-up opens the pooled connection and its control channel,
      // so every measured open is a new PTY channel on an already-connected target (the pool
      // keeps it for idleMs, 15 s).
      start: async () => {
        const image = await imageExists(new Docker(), PWSH_IMAGE) ? PWSH_IMAGE : IMAGE
        // One retry: the helper's free port can be taken by a parallel test before sshd binds it.
        const sshd = await startSshdWorld([{}], { image }).catch((error: unknown) => {
          console.error(`[bench] ssh: test sshd did not start (${(error as Error).message.split(';')[0]}); retrying once`)
          return startSshdWorld([{}], { image })
        })
        const config: SshRuntimeConfig = {
          target: `${users.ssh}@127.0.0.1:${sshd.ports[0]}`,
          identity: sshd.clientKeyFile,
          knownHosts: sshd.knownHostsFile,
          sshConfig: false,
          agent: false,
        }
        return startedWorld(
          'ssh',
          composition => composed(SshSubprocessRuntime, { ...config, ...emulatorSetting(composition) }, composition.tuning),
          () => sshd.stop(),
          {
            // The connect time.
            extraMetrics: runs => measureSshConnect(config, runs),
            // The raw ssh2 exec's throughput, beside the product's (issue 14).
            rawTransport: runs => measureRawSshExec(config, runs),
          },
        )
      },
    },
  ]
}
