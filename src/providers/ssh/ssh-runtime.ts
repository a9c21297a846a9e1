/**
 * `SshSubprocessRuntime`: DSH's subprocess seam (`ctx.subprocess`) on a host reached over SSH.
 * @module dsh-remote-worlds/providers/ssh/ssh-runtime
 */
import { readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import type { SubprocessHandle, SubprocessSpawnSpec, SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import ssh2, { type ParsedKey } from 'ssh2'
import type { z } from 'zod'
import { SshRuntimeConfig } from './ssh-config.ts'
import type { ControlChannel } from '../remote/control-channel.ts'
import { type UserEnvironment, remoteChildEnv, userEnvironment } from '../remote/environment.ts'
import { InvalidArgumentError } from '../remote/errors.ts'
import type { SessionOwnership } from '../remote/ownership.ts'
import type { ProcessTransport } from '../remote/process.ts'
import { checkSpawnSpec, resolveRemoteExecutable } from '../remote/process-runtime.ts'
import { RemoteSubprocessRuntime, parseRuntimeConfig } from '../remote/runtime.ts'
import { WORLD_OWNER } from '../remote/world-owner.ts'
import type { RemoteTerminalHandle, TerminalTransport } from '../remote/terminal.ts'
import { openHeldTerminal } from '../remote/pty-holder/held-terminal.ts'
import { holderScript, terminalHolder } from '../remote/pty-holder/holder-install.ts'
import type { WorldToolCopy } from '../remote/world-tools/launch.ts'
import { persistenceChoice } from '../remote/pty-holder/persistence.ts'
import { warmEmulatorWorker } from '../../emulator/host.ts'
import { emulatorChoice } from '../../emulator/settings.ts'
import type { HostLookup, SshCredentials, SshHop } from './connect.ts'
import { type HostKeyTrust, normalizeFingerprint, readKnownHosts } from './known-hosts.ts'
import { openSshProcess, processTransport } from './ssh-process.ts'
import { type SshConnection, type SshLease, SshWorld } from './ssh-world.ts'
import { type ResolvedSshTarget, parseSshTarget, readDefaultSshConfig, resolveSshTarget } from './target.ts'
import { sshSandboxCompanion } from '../../sandbox/ssh-companion.ts'


/** Extra construction options that are objects, not plain config. */
export interface SshRuntimeExtras {
  /** Private keys given as data (PEM/OpenSSH text) instead of files. */
  privateKeys?: readonly (string | Buffer)[]
  /** Host-name resolver; default the system resolver (`dns.lookup`). */
  lookup?: HostLookup
  /** Home directory for `~`, the default config and key files; default `os.homedir()`. */
  home?: string
}

/** Default identity files OpenSSH tries, in its order (the ones we can use). */
const DEFAULT_IDENTITIES = ['id_ed25519', 'id_ecdsa', 'id_rsa']

/**
 * The subprocess seam over SSH. `spawnTerminal` opens a PTY exec channel running the start
 * wrapper on a pooled connection; foreground probing, signals and teardown go through that
 * connection's control channel (the same login user). A terminal whose connection is lost
 * rejects `done` with TransportError; its teardown reconnects to prove quiescence. Disposal of
 * the cordis scope terminates every terminal and closes every connection.
 *
 * `spawn` runs the process wrapper (remote/process.ts) on a non-PTY exec channel (stderr is
 * separate natively), with spills in a private directory on the host (removed at disposal);
 * `resolveExecutable` asks the control channel.
 *
 * Limits: the login shell must accept POSIX `sh -c` syntax (sh, bash, dash,
 * ksh, zsh; not csh or fish). Host certificates (`@cert-authority`) are not supported.
 */
export class SshSubprocessRuntime extends RemoteSubprocessRuntime<SshWorld> {
  /** How openWorld gets a same-world `ctx.sandbox` (bubblewrap on the host, probed once; src/sandbox/ssh-companion.ts). */
  static readonly sandboxCompanion = sshSandboxCompanion
  /** The validated configuration. */
  readonly config: z.output<typeof SshRuntimeConfig>
  private readonly extras: SshRuntimeExtras

  /**
   * @param ctx - cordis context the service registers in (as `ctx.subprocess`).
   * @param config - see {@link SshRuntimeConfig}.
   * @throws InvalidArgumentError for an invalid config or target.
   */
  constructor(ctx: Context, config: SshRuntimeConfig, extras: SshRuntimeExtras = {}) {
    const parsed = parseRuntimeConfig(SshRuntimeConfig, config, 'SSH')
    super(ctx, 'ssh', { reapOrphans: parsed.reapOrphans })
    this.config = parsed
    this.persistence = persistenceChoice(parsed.persistence)
    // The terminals' emulator worker loads while the world opens (emulator/host.ts).
    if (emulatorChoice(parsed.terminal) !== undefined) warmEmulatorWorker()
    this.extras = extras
    parseSshTarget(this.config.target)
  }

  /**
   * The SSH world (target resolved, keys and known_hosts read); no connection is made yet.
   * @throws InvalidArgumentError for an unreadable identity file or a bad fingerprint.
   */
  protected openWorld(): Promise<SshWorld> {
    return buildSshWorld(this.config, this.extras, this.ownership)
  }

  /** @inheritdoc */
  protected async heldRecordsTarget(): Promise<string> {
    const { target } = (await this.world()).options.hop
    return `ssh:${target.user}@${target.host}:${target.port}`
  }

  protected disposalControl(world: SshWorld): Promise<ControlChannel> {
    return world.control()
  }

  /**
   * A control channel of the login user (any pooled connection; connects when none is open).
   * Used by the CLI's doctor and leftover scans.
   */
  async control(): Promise<ControlChannel> {
    return (await this.world()).control()
  }

  /** Short description of the world for messages, e.g. `ssh agent@host:22`. */
  describe(): string {
    return `ssh ${this.config.target}`
  }

  /**
   * Start `sh -c SCRIPT` (through the login shell) on a non-PTY exec channel with stdin, on any
   * pooled connection with a free slot (see {@link RemoteSubprocessRuntime.openProcess}).
   * @throws WorldClosedError after disposal; the connect errors; ChannelRefusedError; TransportError.
   */
  async openProcess(script: string): Promise<ProcessTransport> {
    this.assertOpen()
    return openSshProcess(await this.world(), script, { stdin: true })
  }

  /**
   * The PTY transport of a new terminal on the lease's connection: dsh-pty on an exec channel
   * without a pty (pty-holder/), or, where the holder cannot run on this host, an exec channel
   * with a pty that sshd allocates.
   */
  private async openTerminalTransport(lease: SshLease, start: { script: string; rows: number; cols: number; where: string }): Promise<TerminalTransport> {
    const holder = await terminalHolder(this[WORLD_OWNER])
    if (!('path' in holder)) return lease.openTerminal(start.script, start.rows, start.cols)
    return openHeldTerminal(await this.openHolder(lease, holder), start)
  }

  /** dsh-pty (`copy`, verified) on an exec channel of the lease's connection, waiting for its first frame (tagged: a dead client's is reaped). */
  private async openHolder(lease: SshLease, copy: WorldToolCopy): Promise<ProcessTransport> {
    return processTransport(await lease.exec(holderScript(copy, this.ownership.newTag())), lease.connection, true)
  }

  /** @inheritdoc */
  async spawnTerminal(spec: SubprocessTerminalSpawnSpec): Promise<SubprocessTerminalHandle> {
    this.assertOpen()
    spec.signal?.throwIfAborted()
    return this.startAdopted(() => this.startTerminalIn(spec))
  }

  /** The start of {@link spawnTerminal}, not yet adopted. */
  private async startTerminalIn(spec: SubprocessTerminalSpawnSpec): Promise<RemoteTerminalHandle> {
    const world = await this.world()
    // The terminal uses the control channel of the connection its PTY channel is on (one failure
    // domain); a refused channel (the server's MaxSessions) moves it to another connection.
    // The connection stays open until the terminal's teardown ended (the proof of quiescence
    // runs on its control channel after the shell, and so the PTY channel, is gone).
    return world.withSlot(async lease => {
      const unhold = lease.retain()
      try {
        const common = {
          spec,
          program: this.wrappedProgram(spec.argv),
          env: remoteChildEnv((await this.environmentOf(lease.connection)).ambient, spec.env),
          control: lease.connection.control,
          where: world.describe(),
          emulator: emulatorChoice(this.config.terminal),
          worldEnded: async () => false,
          recoverControl: () => world.control(),
          onTerminated: (terminated: RemoteTerminalHandle) => {
            unhold()
            this.forgetTerminal(terminated)
          },
        }
        return await this.startTerminal(common, {
          plain: script => this.openTerminalTransport(lease, { script, rows: spec.rows, cols: spec.cols, where: world.describe() }),
          holder: copy => this.openHolder(lease, copy),
        })
      } catch (error) {
        unhold()
        throw error
      }
    })
  }

  /**
   * Start one process on the host (a non-PTY exec channel running the process wrapper; see
   * remote/process.ts). Returns at once; `pid` is the remote pid once published (-1 before).
   * A terminate(), an abort of `spec.signal` or this runtime's disposal before the program
   * started lets the start finish, then signals the program: `done` is its true outcome
   * (RemoteProcessHandle; `terminate({ cancelUnstarted: true })` stops a start not yet opened).
   * @throws InvalidArgumentError for an invalid spec; Error when `spec.signal` already aborted;
   *   WorldClosedError after disposal. Start failures (CwdNotFoundError,
   *   ExecutableNotFoundError, the connect errors, ...) reject `done`.
   */
  spawn(spec: SubprocessSpawnSpec): SubprocessHandle {
    this.assertOpen()
    checkSpawnSpec(spec)
    let opened: SshWorld | undefined
    return this.processes.spawn({
      spec,
      tag: this.ownership.newTag(),
      where: this.describe(),
      prepare: async () => {
        const world = await this.world()
        opened = world
        const connection = await world.connection()
        const { ambient } = await this.environmentOf(connection)
        const stateDir = await this.stateDir.ensure(connection.control, ambient)
        const env = remoteChildEnv(ambient, spec.env)
        return { env, control: connection.control, stateDir, argv: await this.worldArgv(spec.argv, connection.control, env.PATH) }
      },
      open: (script, options) => openSshProcess(opened!, script, options),
      // exit-status / exit-signal are exact: the wrapper may become the program (exec mode).
      exactExit: true,
      // A lost connection does not end the host: the process may outlive it, so teardown
      // reconnects (recoverControl) instead of assuming nothing is left.
      worldEnded: async () => false,
      recoverControl: () => opened!.control(),
    })
  }

  /**
   * Resolve an executable on the host, as the login user: absolute paths verified, bare names
   * searched in the login's PATH (scrubbed) with `env.PATH` over it. One control request.
   * @throws InvalidArgumentError for an empty or relative (`a/b`) command.
   * @throws ExecutableNotFoundError when nothing executable matches.
   */
  async resolveExecutable(command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted()
    const world = await this.world()
    const connection = await world.connection()
    const path = remoteChildEnv((await this.environmentOf(connection)).ambient, env).PATH
    return resolveRemoteExecutable(connection.control, command, path, world.describe(), signal)
  }

  /**
   * The environment the host gives the login user, before a spec's env: the login's ambient
   * environment, then the locale (see remote/environment.ts `userEnvironment`; sshd accepts no
   * environment from the client, so a login without a LANG runs in POSIX otherwise). Connects
   * on first use.
   */
  async userEnvironment(): Promise<UserEnvironment> {
    return this.environmentOf(await (await this.world()).connection())
  }

  private async environmentOf(connection: SshConnection): Promise<UserEnvironment> {
    return userEnvironment({ ...connection.ambientEnv, ...this.worldVariables }, await connection.control.userFacts(), this.config.locale ?? 'auto', this.callerLang)
  }
}

/**
 * Resolve the target and read credentials and trust for it (and for its jump hosts).
 * @throws InvalidArgumentError for an unusable identity file or fingerprint.
 */
export async function buildSshWorld(config: z.output<typeof SshRuntimeConfig>, extras: SshRuntimeExtras = {}, ownership?: SessionOwnership): Promise<SshWorld> {
  const home = extras.home ?? homedir()
  const configText = config.sshConfig === false ? undefined : config.sshConfig === undefined ? readDefaultSshConfig(home) : readConfigFile(config.sshConfig)
  const spec = parseSshTarget(config.target)
  const target = resolveSshTarget({ host: spec.host, user: config.user ?? spec.user, port: config.port ?? spec.port }, { configText, home, proxyJump: config.proxyJump })
  const agent = config.agent === false ? undefined : config.agent ?? nonEmpty(process.env.SSH_AUTH_SOCK)
  const explicit = config.identity === undefined ? undefined : [config.identity].flat()
  const dataKeys = (extras.privateKeys ?? []).map((data, index) => ({ label: `key #${index + 1}`, key: parseKeyOrThrow(data, config.passphrase, `private key #${index + 1}`) }))
  const pinned = config.hostKeyFingerprint === undefined ? [] : [config.hostKeyFingerprint].flat().map(value => {
    try {
      return normalizeFingerprint(value)
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message)
    }
  })
  const explicitKnownHosts = config.knownHosts === undefined ? undefined : [config.knownHosts].flat()

  const hopFor = async (resolved: ResolvedSshTarget, pins: readonly string[]): Promise<SshHop> => {
    const keys = [...dataKeys]
    const skipped: string[] = []
    if (explicit !== undefined) {
      for (const file of explicit) keys.push({ label: file, key: parseKeyOrThrow(readKeyFile(file), config.passphrase, file) })
    } else if (dataKeys.length === 0) {
      // Config or default identity files: unusable ones are skipped, as OpenSSH skips them (an
      // agent may hold the key), and named if authentication fails. A missing default file is
      // no finding; a missing configured one is (OpenSSH warns "no such identity").
      const configured = resolved.identityFiles.length > 0
      const files = configured ? resolved.identityFiles : DEFAULT_IDENTITIES.map(name => join(home, '.ssh', name))
      for (const file of files) {
        let data: Buffer
        try {
          data = readFileSync(file)
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code
          if (configured || code !== 'ENOENT') skipped.push(`${file} (${code === 'ENOENT' ? 'ENOENT: no such file' : code === 'EACCES' ? 'EACCES: permission denied' : (error as Error).message})`)
          continue
        }
        const key = ssh2.utils.parseKey(data, config.passphrase)
        if (key instanceof Error) skipped.push(`${file} (${key.message})`)
        else keys.push({ label: file, key: Array.isArray(key) ? key[0]! : key })
      }
    }
    const credentials: SshCredentials = { keys, agent, password: config.password, skipped }
    const knownHostsFiles = explicitKnownHosts ?? [...(resolved.knownHostsFiles ?? [join(home, '.ssh', 'known_hosts')]), '/etc/ssh/ssh_known_hosts']
    const trust: HostKeyTrust = { entries: pins.length > 0 ? [] : await readKnownHosts(knownHostsFiles), pinned: pins }
    return { target: resolved, credentials, trust }
  }
  const hop = await hopFor(target, pinned)
  // A pinned fingerprint is the target's; jump hosts are verified by known_hosts.
  const jumps = await Promise.all(target.jumps.map(jump => hopFor(jump, [])))
  return new SshWorld({
    hop,
    jumps,
    timings: { connectTimeoutMs: config.connectTimeoutMs, keepaliveIntervalMs: config.keepaliveIntervalMs, keepaliveCountMax: config.keepaliveCountMax },
    pool: { maxSessions: config.maxSessions, idleMs: config.idleMs, maxConcurrentConnects: config.maxConcurrentConnects },
    lookup: extras.lookup,
    ownership,
  })
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.length === 0 ? undefined : value
}

function readConfigFile(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    throw new InvalidArgumentError(`cannot read ssh config file ${path}: ${(error as Error).message}`)
  }
}

function readKeyFile(path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (error) {
    throw new InvalidArgumentError(`cannot read identity file ${path}: ${(error as Error).message}`)
  }
}

function parseKeyOrThrow(data: string | Buffer, passphrase: string | undefined, label: string): ParsedKey {
  const parsed = ssh2.utils.parseKey(data, passphrase)
  if (parsed instanceof Error) throw new InvalidArgumentError(`cannot use ${label}: ${parsed.message}`)
  const key = Array.isArray(parsed) ? parsed[0] : parsed
  if (key === undefined || !key.isPrivateKey()) throw new InvalidArgumentError(`cannot use ${label}: not a private key`)
  return key
}

export { SshRuntimeConfig }

export default SshSubprocessRuntime
