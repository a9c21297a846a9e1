/**
 * `SshdContainer`: a real OpenSSH sshd in the project image, for testing the SSH world. Host
 * networking with sshd bound to 127.0.0.1 on a free port (never another address), host and
 * client keys generated per run with ssh2's keygen (no ssh-keygen on the host), a known_hosts
 * file written for the port, and `sshTarget()` giving `SshSubprocessRuntime`'s config.
 * @module dsh-remote-worlds/testcontainers/sshd-container
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import Dockerode from 'dockerode'
import { AbstractStartedContainer, GenericContainer, type StartedTestContainer, Wait } from 'testcontainers'
import { demuxedText } from '../providers/docker/demux.ts'
import { LIFELINE_LOOP, attachLifeline, lifelineCreateOptions } from '../providers/docker/lifeline.ts'
import { InvalidArgumentError } from '../providers/remote/errors.ts'
import { shQuote } from '../providers/remote/quote.ts'
import type { SshRuntimeConfig } from '../providers/ssh/ssh-config.ts'
import { fingerprintOf } from '../providers/ssh/known-hosts.ts'
import { readableKeyPair } from './key-pair.ts'
import { restartWithLifeline } from './lifeline-restart.ts'
import { disableRyukWhenAbsent } from './ryuk.ts'
import { DSH_WORLD_IMAGE } from './world-container.ts'

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freeLoopbackPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>(resolve => server.close(() => resolve()))
  if (address === null || typeof address === 'string') throw new Error('no free loopback port')
  return address.port
}

/**
 * An sshd to start in a test: `new SshdContainer().withMaxSessions(3).start()`. Logins: `agent`
 * (the image's user) by default, and root, both with the generated client key.
 */
export class SshdContainer extends GenericContainer {
  private lifeline: Duplex | undefined
  /** The created container, for its log when sshd never answers. */
  private containerId: string | undefined
  /** The engine, as the SSH world's tests and the Docker runtime reach it (dockerode's default). */
  private readonly docker = new Dockerode()
  private maxSessions = 10
  private login = 'agent'
  private password: string | undefined
  private setEnv: Readonly<Record<string, string>> = {}

  /** @param image - an image with openssh-server (default: the project image). */
  constructor(image: string = DSH_WORLD_IMAGE) {
    super(image)
    this.withNetworkMode('host')
    this.hostConfig.Init = true
  }

  /**
   * sshd's `MaxSessions`: channels per connection (OpenSSH default 10).
   * @throws InvalidArgumentError below 2: the SSH world needs its control channel and at least
   *   one terminal or process channel on a connection.
   */
  withMaxSessions(sessions: number): this {
    if (!Number.isInteger(sessions) || sessions < 2) throw new InvalidArgumentError(`withMaxSessions(${sessions}): the SSH world needs at least 2 sessions per connection (its control channel and one terminal or process)`)
    this.maxSessions = sessions
    return this
  }

  /**
   * Allow password logins, with this password for the login user (`PasswordAuthentication yes`).
   * Default: key logins only.
   */
  withPassword(password: string): this {
    this.password = password
    return this
  }

  /**
   * sshd's `SetEnv`: variables every session gets (a login's ambient environment).
   * @throws InvalidArgumentError for a name that is not a shell identifier, or a value holding
   *   whitespace or a quote (sshd_config cannot carry it: sshd would refuse to start).
   */
  withSetEnv(environment: Readonly<Record<string, string>>): this {
    for (const [name, value] of Object.entries(environment)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || /[\s"'\\]/.test(value)) throw new InvalidArgumentError(`withSetEnv: ${JSON.stringify(`${name}=${value}`)} cannot be an sshd_config SetEnv entry (names are identifiers; values hold no whitespace, quotes or backslashes)`)
    }
    this.setEnv = environment
    return this
  }

  /** The login user `sshTarget()` names (default `agent`); it must exist in the image. */
  override withUser(user: string): this {
    this.login = user
    return this
  }

  /** Attach the lifeline between create and start (testcontainers' hook). */
  protected override async containerCreated(containerId: string): Promise<void> {
    this.containerId = containerId
    this.lifeline = await attachLifeline(this.docker.getContainer(containerId))
  }

  /**
   * Generate the keys, write the config to a private host folder (bind-mounted read-only),
   * start sshd and wait until it greets on its port.
   * @throws testcontainers' errors, and the wait's when sshd does not answer.
   */
  override async start(): Promise<StartedSshdContainer> {
    const dir = mkdtempSync(join(tmpdir(), 'dsh-sshd-'))
    chmodSync(dir, 0o755)
    const host = readableKeyPair()
    const client = readableKeyPair()
    const port = await freeLoopbackPort()
    writeFileSync(join(dir, 'ssh_host_ed25519_key'), host.private, { mode: 0o600 })
    writeFileSync(join(dir, 'authorized_keys'), `${client.public}\n`, { mode: 0o644 })
    writeFileSync(join(dir, 'sshd_config'), [
      'ListenAddress 127.0.0.1',
      `Port ${port}`,
      'HostKey /etc/dsh-sshd/ssh_host_ed25519_key',
      'PidFile none',
      'AuthorizedKeysFile /etc/dsh-sshd/authorized_keys',
      'StrictModes no',
      `PasswordAuthentication ${this.password === undefined ? 'no' : 'yes'}`,
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'PermitRootLogin prohibit-password',
      'UseDNS no',
      'PrintMotd no',
      `MaxSessions ${this.maxSessions}`,
      ...(Object.keys(this.setEnv).length > 0 ? [`SetEnv ${Object.entries(this.setEnv).map(([name, value]) => `${name}=${value}`).join(' ')}`] : []),
      '',
    ].join('\n'), { mode: 0o644 })
    const clientKeyFile = join(dir, 'id_ed25519')
    writeFileSync(clientKeyFile, client.private, { mode: 0o600 })
    const knownHostsFile = join(dir, 'known_hosts')
    writeFileSync(knownHostsFile, `[127.0.0.1]:${port} ${host.public}\n`, { mode: 0o644 })
    this.withBindMounts([{ source: dir, target: '/etc/dsh-sshd', mode: 'ro' }])
    // Without UsePAM, sshd refuses a key login to an account whose password is locked (`!`, as
    // useradd leaves it): the logins get `*` (no password login, not locked).
    const password = this.password === undefined ? '' : `echo ${shQuote(`${this.login}:${this.password}`)} | chpasswd; `
    // sshd runs beside the lifeline (providers/docker/lifeline.ts): when this process dies, the
    // lifeline reads EOF, the container stops and the engine removes it, Ryuk or not.
    const { HostConfig, ...lifeline } = lifelineCreateOptions(this.hostConfig, ['/bin/sh', '-c', `for login in agent ${this.login}; do usermod -p '*' "$login" 2>/dev/null; done; ${password}mkdir -p /run/sshd && /usr/sbin/sshd -D -e -f /etc/dsh-sshd/sshd_config & ${LIFELINE_LOOP}`])
    Object.assign(this.createOpts, lifeline)
    this.hostConfig = HostConfig!
    this.withAutoRemove(false)
    // Ready when the port greets with an SSH identification line (asked through bash's /dev/tcp
    // inside the container), never when a log line was seen: a line printed before the
    // strategy attached could be missed.
    this.withWaitStrategy(Wait.forSuccessfulCommand(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && head -c 7 <&3 | grep -q SSH-2.0'`).withStartupTimeout(30_000))
    await disableRyukWhenAbsent(this.docker)
    try {
      const started = await super.start()
      const fingerprint = fingerprintOf(Buffer.from(host.public.split(' ')[1]!, 'base64'))
      return new StartedSshdContainer(started, { port, login: this.login, clientKeyFile, knownHostsFile, dir, hostPublicKey: host.public, hostKeyFingerprint: fingerprint, clientPrivateKey: client.private, lifeline: this.lifeline })
    } catch (error) {
      rmSync(dir, { recursive: true, force: true })
      // sshd's own words (it logs to stderr, -e) say why it never answered: a port taken
      // meanwhile, a config it refused.
      const log = this.containerId === undefined ? undefined : await this.docker.getContainer(this.containerId).logs({ stdout: true, stderr: true, tail: 20 }).then(buffer => demuxedText(buffer).trim(), () => undefined)
      if (log === undefined || log.length === 0) throw error
      throw new Error(`${(error as Error).message}; sshd's log: ${log.slice(-2000)}`, { cause: error })
    }
  }
}

/** What a started sshd offers. */
interface SshdSettings {
  port: number
  login: string
  clientKeyFile: string
  knownHostsFile: string
  dir: string
  hostPublicKey: string
  hostKeyFingerprint: string
  clientPrivateKey: string
  lifeline: Duplex | undefined
}

/** A started sshd: the testcontainers handle plus its target, key and known_hosts. */
export class StartedSshdContainer extends AbstractStartedContainer {
  private readonly settings: SshdSettings

  /** @internal Use {@link SshdContainer.start}. */
  constructor(started: StartedTestContainer, settings: SshdSettings) {
    super(started)
    this.settings = settings
  }

  /** The port sshd listens on, on 127.0.0.1. */
  get port(): number {
    return this.settings.port
  }

  /** The generated client private key file (mode 0600), authorized for every login. */
  get clientKeyFile(): string {
    return this.settings.clientKeyFile
  }

  /** A known_hosts file naming the generated host key for `[127.0.0.1]:PORT`. */
  get knownHostsFile(): string {
    return this.settings.knownHostsFile
  }

  /** The host key's public line (`ssh-ed25519 BASE64`). */
  get hostPublicKey(): string {
    return this.settings.hostPublicKey
  }

  /** The host key's `SHA256:...` fingerprint (OpenSSH's form), for a pinned `hostKeyFingerprint`. */
  get hostKeyFingerprint(): string {
    return this.settings.hostKeyFingerprint
  }

  /** The client private key (OpenSSH format), also in {@link clientKeyFile}. */
  get clientPrivateKey(): string {
    return this.settings.clientPrivateKey
  }

  /** The private host folder holding the keys and config (removed at stop). */
  get keyDirectory(): string {
    return this.settings.dir
  }

  /**
   * `SshSubprocessRuntime`'s config for this sshd: the target, the client key, the generated
   * known_hosts, and neither ~/.ssh/config nor ssh-agent (a test sees only this server).
   * @param user - login user (default: `withUser`'s, else `agent`).
   */
  sshTarget(user: string = this.settings.login): SshRuntimeConfig {
    return { target: `${user}@127.0.0.1:${this.settings.port}`, identity: this.settings.clientKeyFile, knownHosts: this.settings.knownHostsFile, sshConfig: false, agent: false }
  }

  /**
   * Restart sshd's container and hold its lifeline again (lifeline-restart.ts).
   * @throws NotSupportedError, with the container untouched, on an engine older than Docker
   *   23.0, whose restart may remove it (lifeline-restart.ts).
   */
  override async restart(options?: Parameters<AbstractStartedContainer['restart']>[0]): Promise<void> {
    if (this.settings.lifeline === undefined) return super.restart(options)
    this.settings.lifeline = await restartWithLifeline(new Dockerode(), this.getId(), () => super.restart(options), this.settings.lifeline)
  }

  /** Remove the generated keys with the container, and let the lifeline go. */
  protected override async containerStopped(): Promise<void> {
    this.settings.lifeline?.destroy()
    // Gone with the container: a restart() now is testcontainers' own (and its "no such container").
    this.settings.lifeline = undefined
    rmSync(this.settings.dir, { recursive: true, force: true })
  }
}
