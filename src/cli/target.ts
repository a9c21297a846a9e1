/**
 * CLI target selection: which world a command runs in, built from flags.
 * @module dsh-remote-worlds/cli/target
 */
import { spawn } from 'node:child_process'
import Docker from 'dockerode'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type OpenWorldOptions, type RemoteWorld, openWorld } from '../backend/world.ts'
import { type ForwardSpec, parseForwardSpec } from '../network/port-forward.ts'
import type { WorldNetworkOptions } from '../network/world-network.ts'
import { DockerSubprocessRuntime } from '../providers/docker/docker-runtime.ts'
import type { ControlChannel } from '../providers/remote/control-channel.ts'
import type { UserEnvironment } from '../providers/remote/environment.ts'
import type { SessionOwnership } from '../providers/remote/ownership.ts'
import { InvalidArgumentError, InvalidSessionNameError } from '../providers/remote/errors.ts'
import { SshSubprocessRuntime } from '../providers/ssh/ssh-runtime.ts'
import { judgeWorkspaceFolder } from '../sandbox/docker-policy.ts'
import { MAX_SCROLLBACK_LINES, type TerminalEmulatorSettings } from '../emulator/settings.ts'
import { PERSISTENCE_MODES, type PersistenceMode } from '../providers/remote/pty-holder/persistence.ts'
import { parseSshTarget } from '../providers/ssh/target.ts'
import { planDevcontainer } from '../devcontainer/index.ts'
import { imageExists } from '../providers/docker/images.ts'
import { SwarmSubprocessRuntime } from '../providers/swarm/swarm-runtime.ts'
import type { SwarmRuntimeConfig } from '../providers/swarm/swarm-config.ts'

/** The project's default target image (built by docker/ensure-world.sh). */
export const DEFAULT_IMAGE = 'dsh-remote-worlds/target:bookworm'

/** The project image with PowerShell (built by docker/ensure-world.sh where `dotnet` is on PATH). */
export const PWSH_IMAGE = 'dsh-remote-worlds/target-pwsh:bookworm'

/** Where a managed container mounts a host workspace folder given with --workspace. */
export const MANAGED_WORKSPACE = '/workspace'

/** Target flags shared by every command. */
export interface TargetFlags {
  docker?: string
  image?: string
  /**
   * `--devcontainer [FOLDER]`: the dev container of this project folder (commander gives `true`
   * without a value: the current directory).
   */
  devcontainer?: string | true
  /**
   * `--config FILE`: with `--devcontainer`, the devcontainer.json (as the reference CLI's
   * `--config`); default: the one the folder's container was made from.
   */
  config?: string
  /** `--start`: start a stopped dev container. */
  start?: boolean
  /** `[user@]host[:port]` or a Host alias of ~/.ssh/config. */
  ssh?: string
  /** `--swarm ENDPOINT`: a world as a swarm service, made through this manager's engine (providers/swarm). */
  swarm?: string
  /** `--swarm-node ENDPOINT` (repeatable): the engines of the swarm's nodes. */
  swarmNode?: string[]
  /** `--constraint EXPR` (repeatable): swarm placement constraints. */
  constraint?: string[]
  /** `--placement-pref PREF` (repeatable): swarm placement preferences (`spread=node.labels.zone`). */
  placementPref?: string[]
  /** `--reserve-memory BYTES`: memory a node must have free to take the task. */
  reserveMemory?: string
  /** `--reserve-cpus CPUS`: CPUs a node must have free to take the task (decimal). */
  reserveCpus?: string
  /** `--tls-certs DIR`: ca.pem, cert.pem and key.pem of tcp:// engine endpoints (as DOCKER_CERT_PATH). */
  tlsCerts?: string
  /** SSH private key file (OpenSSH -i). */
  identity?: string
  /** SSH known_hosts file (OpenSSH UserKnownHostsFile). */
  knownHosts?: string
  user?: string
  cwd?: string
  /** Sandbox mode (default danger-full-access). */
  mode?: 'read-only' | 'workspace-write' | 'danger-full-access'
  /**
   * Workspace: for a managed container a HOST folder, bind-mounted at /workspace; for an
   * attached container or an SSH host, a path in that world.
   */
  workspace?: string
  /** `auto` (default), `off`, or a locale name (providers/remote/environment.ts `LocaleSetting`). */
  locale?: string
  /** The terminal's shell dialect: `bash` (default) or `pwsh` (terminal-bash's `shellDialect`, `shellPath` pwsh). */
  shell?: 'bash' | 'pwsh'
  /** `--replies answer|off`: whether the emulator answers the program's terminal queries (default answer). */
  replies?: string
  /** false with `--no-emulator` (commander's negated flag; true or absent otherwise). */
  emulator?: boolean
  /** `--scrollback LINES`: lines the emulator keeps above the screen (0 to 10000). */
  scrollback?: string
  /** `--persist off|connection|client`: whether shells outlive their connection or this client (runtime setting `persistence`; absent: the world's default). */
  persist?: string
  /** `--session NAME`: the DSH session id of the shells; with `--persist client`, a later run with the same name and target takes them back. */
  session?: string
  /** `--network none|allow|full` (network/world-network.ts; absent: allow with --allow rules, else the mode's default). */
  network?: 'none' | 'allow' | 'full'
  /** `--allow RULE` (repeatable): `HOST`, `*.SUFFIX` or `CIDR`, each with an optional `:PORT`. */
  allow?: string[]
  /** `--deny RULE` (repeatable), the same forms; deny wins. */
  deny?: string[]
  /** `--resolve NAME:PORT:ADDR` (repeatable), as curl's: this client's answer for that name. */
  resolve?: string[]
  /** `--egress-log FILE`: each egress decision appended as a JSON line. */
  egressLog?: string
  /** `--egress [WORLD_PORT:]HOST:PORT` (repeatable): a world port whose connections reach HOST:PORT (and allow it). */
  egress?: string[]
  /** `--forward [HOST_ADDR:]HOST_PORT:WORLD_PORT` (repeatable): a port of this machine carried to the world's 127.0.0.1. */
  forward?: string[]
}

/** A runtime that can hand out its control channel (both worlds implement this). */
export interface ControlledRuntime {
  control(): Promise<ControlChannel>
  describe(): string
  /** The client's session ownership (providers/remote/ownership.ts). */
  readonly ownership: SessionOwnership
  /** The environment the world gives the runtime's user: locale and HOME, and why. */
  userEnvironment(): Promise<UserEnvironment>
}

/** A resolved target. */
export interface Target {
  /** Human description, e.g. `managed container from dsh-remote-worlds/target:bookworm as agent`. */
  description: string
  /** openWorld options; `world.terminal` holds the shell (`--shell`), tuning is added by {@link openTarget}. */
  world: OpenWorldOptions<unknown>
  /** Working directory of new terminals in the remote world. */
  cwd: string
  /** Make sure what the target needs locally exists (engine, image); no-op when nothing to do. */
  prepare(): Promise<void>
  /** A managed container, created for the target's mode (`--mode`, default danger-full-access). */
  managed: boolean
  /**
   * The runtime setting `terminal` the flags asked for (emulator/settings.ts), also in
   * `world.runtimeConfig`; undefined without terminal flags (the defaults: an emulator that answers).
   */
  terminal: TerminalEmulatorSettings | undefined
  /**
   * `--persist` as given, undefined without it (the world's default: 'connection' where dsh-pty
   * can hold shells, else 'off'; pty-holder/persistence.ts). With `client`, the CLI leaves its
   * shells running at exit (detaches) for a later run of `session`.
   */
  persistence: PersistenceMode | undefined
}

/**
 * The runtime setting `terminal` of `--replies`, `--no-emulator` and `--scrollback`:
 * `{ emulator: false }`, or `{ replies?, scrollback? }`; undefined when none is given.
 * @throws InvalidArgumentError for a `--replies` other than answer or off, a `--scrollback`
 *   that is not a whole number from 0 to 10000, or either of them with `--no-emulator`.
 */
export function terminalSettings(flags: Pick<TargetFlags, 'replies' | 'emulator' | 'scrollback'>): TerminalEmulatorSettings | undefined {
  if (flags.replies !== undefined && flags.replies !== 'answer' && flags.replies !== 'off') throw new InvalidArgumentError(`--replies ${flags.replies}: use answer (the emulator answers the program's terminal queries) or off (nobody does)`)
  if (flags.scrollback !== undefined && !(/^\d+$/.test(flags.scrollback) && Number(flags.scrollback) <= MAX_SCROLLBACK_LINES)) throw new InvalidArgumentError(`--scrollback ${flags.scrollback}: a number of lines from 0 to ${MAX_SCROLLBACK_LINES}`)
  if (flags.emulator === false) {
    if (flags.replies !== undefined || flags.scrollback !== undefined) throw new InvalidArgumentError('--replies and --scrollback configure the terminal emulator, and --no-emulator runs none: drop one or the other')
    return { emulator: false }
  }
  if (flags.replies === undefined && flags.scrollback === undefined) return undefined
  return { ...(flags.replies !== undefined ? { replies: flags.replies } : {}), ...(flags.scrollback !== undefined ? { scrollback: Number(flags.scrollback) } : {}) }
}

/**
 * docker/ensure-world.sh of this package: two folders up from src/cli when run from source,
 * three from dist/src/cli when installed (the package ships docker/ beside dist/).
 */
const ensureScript = ['../../docker/ensure-world.sh', '../../../docker/ensure-world.sh']
  .map(relative => fileURLToPath(new URL(relative, import.meta.url)))
  .find(path => existsSync(path)) ?? fileURLToPath(new URL('../../docker/ensure-world.sh', import.meta.url))

/**
 * Run docker/ensure-world.sh (starts a Docker engine when none answers and the machine allows
 * it, builds the project image when missing, ~45 s once). Its progress lines go straight to
 * this process's stderr, so a first run is not silent.
 * @throws Error naming the exit status when the script fails (its reasons are on stderr).
 */
export async function ensureDockerWorld(image = DEFAULT_IMAGE): Promise<void> {
  const child = spawn('bash', [ensureScript], { env: { ...process.env, DSH_REMOTE_IMAGE: image }, stdio: ['ignore', 'ignore', 'inherit'] })
  const [code, signal] = await once(child, 'exit') as [number | null, NodeJS.Signals | null]
  if (code !== 0) throw new Error(`could not prepare the Docker world: docker/ensure-world.sh ${signal !== null ? `died of ${signal}` : `exited with ${code}`} (its output is above)`)
}

/**
 * docker/ensure-world.sh, which builds the PowerShell image where `dotnet` is on PATH; then
 * the image must exist.
 * @throws Error naming what builds the image when it is still missing.
 */
async function ensurePwshWorld(): Promise<void> {
  await ensureDockerWorld(DEFAULT_IMAGE)
  if (!await imageExists(new Docker(), PWSH_IMAGE)) throw new Error(`--shell pwsh runs in ${PWSH_IMAGE}, which is not built: docker/ensure-world.sh builds it where the .NET SDK (dotnet) is on PATH (see its output above), or pass --image IMAGE of an image with pwsh on PATH`)
}

/**
 * Resolve flags to a target. Without `--docker`, `--devcontainer` or `--ssh`, a managed
 * throwaway container is run from `--image` (default: the project image, built when missing).
 *
 * `--devcontainer [FOLDER]` chooses the folder's container and reads the devcontainer.json it
 * was made from here (src/devcontainer `planDevcontainer`; `--config FILE` names the file), so
 * its `workspaceFolder` is the sandbox's workspace root and the shell's cwd (`--workspace` sets
 * the workspace root, and the cwd too unless `--cwd` is given; `--cwd` sets only the cwd); the
 * runtime, given that file, finds the same container and applies the file's user (`--user`
 * wins) and `remoteEnv` when the world opens. Its `forwardPorts` (with the container's metadata
 * label's, and their `portsAttributes` labels) are forwarded from this machine's 127.0.0.1 on the
 * same port, else any free port when that one is taken ({@link devcontainerForwards}), after
 * the user's own `--forward`s.
 * @throws InvalidArgumentError for conflicting flags, or bad terminal flags ({@link terminalSettings}).
 * @throws for `--devcontainer`, the errors of `planDevcontainer`: DevcontainerConfigMissingError,
 *   DevcontainerConfigInvalidError, DevcontainerNotFoundError, DevcontainerAmbiguousError,
 *   EngineUnavailableError.
 */
export async function resolveTarget(flags: TargetFlags): Promise<Target> {
  const target = await resolveWorld(flags)
  const network = mergeNetwork(networkSetting(flags), target.world.network)
  return network === undefined ? target : { ...target, world: { ...target.world, network } }
}

/**
 * The flags' network setting with the world's own (a dev container's forwarded ports): the
 * flags' `--forward`s first, then the world's forwards of a world port no `--forward` names.
 */
function mergeNetwork(flags: WorldNetworkOptions | undefined, own: WorldNetworkOptions | undefined): WorldNetworkOptions | undefined {
  if (own === undefined) return flags
  const given = flags?.forward ?? []
  // A --forward that does not parse is reported when the network is mounted; here it names no port.
  const named = new Set(given.flatMap(text => {
    try {
      return [parseForwardSpec(text).worldPort]
    } catch {
      return []
    }
  }))
  const forward = [...given, ...(own.forward ?? []).filter(spec => !named.has(parseForwardSpec(spec).worldPort))]
  return { ...own, ...flags, ...(forward.length > 0 ? { forward } : {}) }
}

/**
 * A dev container's forwarded ports as forwards: this machine's 127.0.0.1 on the same port to
 * the world's 127.0.0.1 (any free port when it is taken, as VS Code does), the label carried.
 */
export function devcontainerForwards(ports: readonly { port: number; label?: string }[]): WorldNetworkOptions['forward'] {
  return ports.map(({ port, label }): ForwardSpec => ({ hostAddress: '127.0.0.1', hostPort: port, worldPort: port, anyPortIfTaken: true, ...(label !== undefined ? { label } : {}) }))
}

/** The world's network setting of `--network`, `--allow`, `--deny`, `--resolve`, `--egress-log`, `--egress` and `--forward`; undefined without them. */
export function networkSetting(flags: Pick<TargetFlags, 'network' | 'allow' | 'deny' | 'resolve' | 'egressLog' | 'egress' | 'forward'>): WorldNetworkOptions | undefined {
  const given = { network: flags.network, allow: flags.allow, deny: flags.deny, resolve: flags.resolve, egressLog: flags.egressLog, egress: flags.egress, forward: flags.forward }
  const present = Object.entries(given).filter(([, value]) => value !== undefined && (!Array.isArray(value) || value.length > 0))
  return present.length === 0 ? undefined : Object.fromEntries(present) as WorldNetworkOptions
}

async function resolveWorld(flags: TargetFlags): Promise<Target> {
  if ([flags.docker, flags.image, flags.ssh, flags.devcontainer].filter(flag => flag !== undefined).length > 1) throw new InvalidArgumentError('use one of --docker CONTAINER, --image IMAGE, --devcontainer [FOLDER] or --ssh [USER@]HOST[:PORT]')
  if (flags.swarm !== undefined && [flags.docker, flags.ssh, flags.devcontainer].some(flag => flag !== undefined)) throw new InvalidArgumentError('--swarm makes its own world: drop --docker, --devcontainer and --ssh (--image names its image)')
  const swarmOnly = [['--swarm-node', flags.swarmNode], ['--constraint', flags.constraint], ['--placement-pref', flags.placementPref], ['--reserve-memory', flags.reserveMemory], ['--reserve-cpus', flags.reserveCpus], ['--tls-certs', flags.tlsCerts]] as const
  const misplaced = swarmOnly.filter(([, value]) => value !== undefined && (!Array.isArray(value) || value.length > 0)).map(([name]) => name)
  if (flags.swarm === undefined && misplaced.length > 0) throw new InvalidArgumentError(`${misplaced.join(', ')} apply to --swarm targets only`)
  if (flags.ssh === undefined && flags.swarm === undefined && flags.identity !== undefined) throw new InvalidArgumentError('--identity applies to --ssh and --swarm (ssh:// engine endpoints) targets only')
  if (flags.ssh === undefined && flags.knownHosts !== undefined) throw new InvalidArgumentError('--known-hosts applies to --ssh targets only')
  if (flags.start === true && flags.devcontainer === undefined) throw new InvalidArgumentError('--start applies to --devcontainer targets only')
  if (flags.config !== undefined && flags.devcontainer === undefined) throw new InvalidArgumentError('--config applies to --devcontainer targets only')
  const persistence = persistenceFlag(flags)
  const user = flags.user
  const suffix = `${user === undefined ? '' : ` as ${user}`}${flags.mode === undefined ? '' : `, ${flags.mode}`}${persistence === undefined ? '' : `, persistence ${persistence}${flags.session !== undefined ? ` (session ${flags.session})` : ''}`}`
  const mode = flags.mode === undefined ? {} : { mode: flags.mode }
  const locale = flags.locale === undefined ? {} : { locale: flags.locale === 'off' ? false : flags.locale }
  const terminal = terminalSettings(flags)
  // PSReadLine asks for the cursor position at start and waits for the answer (README, "PowerShell").
  if (flags.shell === 'pwsh' && (terminal?.emulator === false || terminal?.replies === 'off')) throw new InvalidArgumentError(`--shell pwsh needs the terminal to answer: PowerShell's PSReadLine asks for the cursor position when it starts and waits for the answer, so with ${terminal.emulator === false ? '--no-emulator' : '--replies off'} it never shows a prompt`)
  // The runtime config's `locale`, `terminal` and `persistence`, as given (absent: the world's defaults).
  const shell = { ...locale, ...(terminal !== undefined ? { terminal } : {}), ...(persistence !== undefined ? { persistence } : {}) }
  // The owner agent's session id (openWorld): terminal-bash gives it to every shell as DSH_SESSION_ID.
  const session = flags.session !== undefined ? { session: flags.session } : {}
  // terminal-bash's dialect; its shell program must exist in the world.
  const dialect = flags.shell === 'pwsh' ? { terminal: { shellDialect: 'pwsh', shellPath: 'pwsh' } as const } : {}
  /** The workspace in the remote world: --workspace, else --cwd, else the user's usual place. */
  const remoteWorkspace = (login: string | undefined): string => flags.workspace ?? flags.cwd ?? (login === 'root' || login === '0' || (login === undefined && (flags.mode ?? 'danger-full-access') === 'danger-full-access') ? '/root' : '/tmp')
  if (flags.ssh !== undefined) {
    const login = user ?? parseSshTarget(flags.ssh).user
    return {
      description: `ssh ${flags.ssh}${suffix}`,
      world: {
        runtime: SshSubprocessRuntime as never,
        runtimeConfig: {
          target: flags.ssh,
          ...(user !== undefined ? { user } : {}),
          ...(flags.identity !== undefined ? { identity: flags.identity } : {}),
          ...(flags.knownHosts !== undefined ? { knownHosts: flags.knownHosts } : {}),
          ...shell,
        },
        workspaceRoot: remoteWorkspace(login),
        ...mode,
        ...dialect,
        ...session,
      },
      cwd: flags.cwd ?? remoteWorkspace(login),
      prepare: async () => {},
      managed: false,
      terminal,
      persistence,
    }
  }
  if (flags.devcontainer !== undefined) {
    const plan = await planDevcontainer(flags.devcontainer === true ? '.' : flags.devcontainer, { config: flags.config })
    const workspaceRoot = flags.workspace ?? plan.settings.workspaceFolder
    return {
      description: `dev container of ${plan.project.folder}${suffix}`,
      world: {
        ...(plan.forwardPorts.length > 0 ? { network: { forward: devcontainerForwards(plan.forwardPorts) } } : {}),
        runtime: DockerSubprocessRuntime as never,
        // The file just read: the runtime then finds the same container (or fails, should it be gone).
        runtimeConfig: { devcontainer: { folder: plan.project.folder, config: plan.configFile, ...(flags.start === true ? { start: true } : {}) }, ...(user !== undefined ? { user } : {}), ...shell },
        workspaceRoot,
        ...mode,
        ...dialect,
        ...session,
      },
      cwd: flags.cwd ?? workspaceRoot,
      prepare: async () => {},
      managed: false,
      terminal,
      persistence,
    }
  }
  if (flags.docker !== undefined) {
    return {
      description: `docker container ${flags.docker}${suffix}`,
      world: { runtime: DockerSubprocessRuntime as never, runtimeConfig: { container: flags.docker, ...(user !== undefined ? { user } : {}), ...shell }, workspaceRoot: remoteWorkspace(user), ...mode, ...dialect, ...session },
      cwd: flags.cwd ?? remoteWorkspace(user),
      prepare: async () => {},
      managed: false,
      terminal,
      persistence,
    }
  }
  const image = flags.image ?? (flags.shell === 'pwsh' ? PWSH_IMAGE : DEFAULT_IMAGE)
  // A managed container mounts a host workspace folder at /workspace. Without --user, a
  // confined shell runs as the folder's owner when that is not root, so workspace-write can
  // write there (the sandbox never runs confined work as root).
  const confined = (flags.mode ?? 'danger-full-access') !== 'danger-full-access'
  if (confined && flags.workspace === undefined && flags.cwd === undefined) {
    throw new InvalidArgumentError(`--mode ${flags.mode} in a managed container needs --workspace HOST_DIR (mounted at ${MANAGED_WORKSPACE}): without it the workspace would be /tmp, a private writable tmpfs that no mode can confine`)
  }
  if (flags.workspace !== undefined) {
    const folder = judgeWorkspaceFolder(flags.workspace)
    if (folder.kind === 'missing') throw new InvalidArgumentError(`--workspace ${flags.workspace}: no such host folder`)
    if (folder.kind === 'not-a-folder') throw new InvalidArgumentError(`--workspace ${flags.workspace}: not a folder`)
    if (confined && user === undefined) {
      if (folder.kind === 'owner') return await resolveTarget({ ...flags, user: folder.user })
      if (flags.mode === 'workspace-write') {
        throw new InvalidArgumentError(`--workspace ${flags.workspace} is owned by root, and confined shells never run as root: give the folder to the user who should write there (e.g. chown 1000:1000) or pass --user UID:GID of a user that may write it`)
      }
    }
  }
  const workspaceRoot = flags.workspace !== undefined ? MANAGED_WORKSPACE : remoteWorkspace(user)
  if (flags.swarm !== undefined) {
    if (persistence !== undefined && persistence !== 'off') throw new InvalidArgumentError('--persist applies to --docker, --devcontainer, --ssh and managed-container targets; a swarm world is a service of its own client')
    return {
      description: `swarm world from ${image} via ${flags.swarm}${suffix}${flags.workspace !== undefined ? `, workspace ${resolve(flags.workspace)} (on its node) at ${MANAGED_WORKSPACE}` : ''}`,
      world: {
        runtime: SwarmSubprocessRuntime as never,
        runtimeConfig: { ...swarmRuntimeConfig(flags, image), ...(user !== undefined ? { user } : {}), ...(flags.workspace !== undefined ? { workspace: { bind: resolve(flags.workspace) } } : {}), ...shell },
        workspaceRoot,
        ...mode,
        ...dialect,
      },
      cwd: flags.cwd ?? workspaceRoot,
      prepare: () => Promise.resolve(),
      managed: true,
      terminal,
      persistence,
    }
  }
  return {
    description: `managed container from ${image}${suffix}${flags.workspace !== undefined ? `, workspace ${resolve(flags.workspace)} at ${MANAGED_WORKSPACE}` : ''}`,
    world: {
      runtime: DockerSubprocessRuntime as never,
      runtimeConfig: { image, ...(user !== undefined ? { user } : {}), ...(flags.workspace !== undefined ? { workspace: { bind: resolve(flags.workspace) } } : {}), ...shell },
      workspaceRoot,
      ...mode,
      ...dialect,
      ...session,
    },
    cwd: flags.cwd ?? workspaceRoot,
    prepare: image === DEFAULT_IMAGE ? () => ensureDockerWorld(image) : image === PWSH_IMAGE ? () => ensurePwshWorld() : () => Promise.resolve(),
    managed: true,
    terminal,
    persistence,
  }
}

/**
 * What a session name may not hold (Unicode general categories): control characters (Cc:
 * U+0000-U+001F, U+007F-U+009F: a newline, a tab, an escape), line and paragraph separators
 * (Zl U+2028, Zp U+2029) and lone surrogates (Cs), none of which shows on one line.
 */
const UNSHOWABLE = /[\p{Cc}\p{Zl}\p{Zp}\p{Cs}]/u

/**
 * Check a `--session` name: one or more characters, each shown on one line (see {@link UNSHOWABLE}).
 * @throws InvalidSessionNameError naming the rule and the name, its refused characters as `\u{HEX}`.
 */
export function checkSessionName(name: string): string {
  const refused = [...name].filter(character => UNSHOWABLE.test(character))
  if (name.length > 0 && refused.length === 0) return name
  const shown = [...name].map(character => UNSHOWABLE.test(character) ? `\\u{${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}}` : character).join('')
  throw new InvalidSessionNameError(`--session "${shown}" cannot be shown on one line: a session name is one or more characters, none of them a control character (U+0000-U+001F, U+007F-U+009F: a newline, a tab, an escape), a line or paragraph separator (U+2028, U+2029) or a lone surrogate`)
}

/**
 * The persistence mode of `--persist`, with its `--session`; undefined without `--persist` (the
 * runtime applies the world's default, pty-holder/persistence.ts: 'connection' where dsh-pty can
 * hold shells, else 'off'). `--persist off` is given to the runtime as 'off'.
 * @throws InvalidArgumentError for another value, `--persist client` without `--session` (nothing a
 *   later run could name the shells by), or `--session` without `--persist client`.
 * @throws InvalidSessionNameError for a `--session` name that cannot be shown on one line ({@link checkSessionName}).
 */
export function persistenceFlag(flags: Pick<TargetFlags, 'persist' | 'session'>): PersistenceMode | undefined {
  if (flags.persist === undefined && flags.session === undefined) return undefined
  const mode = flags.persist ?? 'connection'
  if (!(PERSISTENCE_MODES as readonly string[]).includes(mode)) throw new InvalidArgumentError(`--persist takes off, connection or client, got ${JSON.stringify(mode)}`)
  if (mode === 'client' && flags.session === undefined) throw new InvalidArgumentError('--persist client needs --session NAME: the name a later run takes the shells back by')
  if (mode !== 'client' && flags.session !== undefined) throw new InvalidArgumentError('--session names the session a later run takes the shells back by: it needs --persist client')
  if (flags.session !== undefined) checkSessionName(flags.session)
  return mode as PersistenceMode
}

/** Prepare and open the target's world with the given terminal tuning (over the target's shell). */
export async function openTarget(target: Target, terminal: OpenWorldOptions<unknown>['terminal'] = {}): Promise<RemoteWorld> {
  await target.prepare()
  return openWorld({ ...target.world, terminal: { ...target.world.terminal, ...terminal } })
}

/** The runtime of a world as a {@link ControlledRuntime}. */
export function controlledRuntime(world: RemoteWorld): ControlledRuntime {
  return world.runtime as unknown as ControlledRuntime
}

/**
 * The swarm runtime's config of `--swarm` and its flags: the manager and node endpoints (with
 * `--tls-certs` for tcp:// ones, `--identity` for ssh:// ones), placement and reservations.
 * @throws InvalidArgumentError for a `--reserve-memory` or `--reserve-cpus` that is not a positive number.
 */
export function swarmRuntimeConfig(flags: TargetFlags, image: string): SwarmRuntimeConfig {
  const endpoint = (host: string): SwarmRuntimeConfig['manager'] => ({
    host,
    ...(host.startsWith('tcp://') && flags.tlsCerts !== undefined ? { tls: { ca: resolve(flags.tlsCerts, 'ca.pem'), cert: resolve(flags.tlsCerts, 'cert.pem'), key: resolve(flags.tlsCerts, 'key.pem') } } : {}),
    ...(host.startsWith('ssh://') && flags.identity !== undefined ? { identity: resolve(flags.identity) } : {}),
  })
  const positive = (flag: string, value: string | undefined, scale: number): number | undefined => {
    if (value === undefined) return undefined
    const number = Number(value)
    if (!(number > 0) || !Number.isFinite(number)) throw new InvalidArgumentError(`${flag} ${value}: a positive number`)
    return Math.round(number * scale)
  }
  const memoryBytes = positive('--reserve-memory', flags.reserveMemory, 1)
  const nanoCpus = positive('--reserve-cpus', flags.reserveCpus, 1e9)
  return {
    manager: endpoint(flags.swarm!),
    ...(flags.swarmNode !== undefined && flags.swarmNode.length > 0 ? { nodes: flags.swarmNode.map(endpoint) } : {}),
    image,
    ...((flags.constraint?.length ?? 0) + (flags.placementPref?.length ?? 0) > 0 ? { placement: { constraints: flags.constraint ?? [], preferences: flags.placementPref ?? [] } } : {}),
    ...(memoryBytes !== undefined || nanoCpus !== undefined ? { reservations: { ...(memoryBytes !== undefined ? { memoryBytes } : {}), ...(nanoCpus !== undefined ? { nanoCpus } : {}) } } : {}),
  }
}
