/**
 * A real OpenSSH sshd test world: the package's own SshdContainer (src/testcontainers: the
 * project image, host networking, sshd on 127.0.0.1 at a free port, keys generated per run),
 * with a password for `agent`, this suite's label, and what testcontainers does not do here:
 * pause and unpause, and the container's process list.
 *
 * Never sends traffic anywhere but 127.0.0.1 (DESIGN.md section 7).
 */
import Docker from 'dockerode'
import { readableKeyPair } from '../../src/testcontainers/key-pair.ts'
import { fingerprintOf } from '../../src/providers/ssh/known-hosts.ts'
import { LIFELINE_LOOP } from '../../src/providers/docker/lifeline.ts'
import { SshdContainer } from '../../src/testcontainers/index.ts'
import { freeLoopbackPort } from '../../src/testcontainers/sshd-container.ts'

export const TARGET_IMAGE = process.env.DSH_REMOTE_IMAGE ?? 'dsh-remote-worlds/target:bookworm'
export const TEST_LABEL = 'dsh-remote-worlds.test-sshd'

/** One sshd instance's settings. */
export interface SshdSpec {
  /** `MaxSessions` (OpenSSH default 10). */
  maxSessions?: number
  /** `SetEnv`: variables sshd puts in every session's environment (the login's ambient env). */
  setEnv?: Readonly<Record<string, string>>
}

/** A generated key pair: OpenSSH private key text and `type base64` public key line. */
export interface KeyPair {
  privateKey: string
  publicKey: string
  /** `SHA256:...` of the public key. */
  fingerprint: string
}

/** A running sshd world. */
export interface SshdWorld {
  readonly containerId: string
  /** The sshd's port on 127.0.0.1 (one instance: a one-element list). */
  readonly ports: readonly number[]
  /** The host key sshd presents. */
  readonly hostKey: Pick<KeyPair, 'publicKey' | 'fingerprint'>
  /** The client key authorized for `agent` and `root`. */
  readonly clientKey: Pick<KeyPair, 'privateKey'>
  /** Path of the client private key file (mode 0600). */
  readonly clientKeyFile: string
  /** A known_hosts file listing the host key as `[127.0.0.1]:PORT`. */
  readonly knownHostsFile: string
  /** `agent`'s password. */
  readonly password: string
  /** The sshd's private key and config folder on the host (removed by stop()); tests may add files. */
  readonly dir: string
  /** Run a command in the container as root; resolves with stdout and the exit code. */
  exec(argv: readonly string[]): Promise<{ stdout: string; exitCode: number }>
  /** `ps` rows (pid, user, args) of the container, excluding the ps itself. */
  processes(): Promise<{ pid: number; user: string; comm: string; args: string }[]>
  /**
   * Everything running in the container besides its init, its lifeline and the sshd listener:
   * per-connection sshd processes, login sessions and whatever they started.
   */
  leftovers(): Promise<{ pid: number; user: string; comm: string; args: string }[]>
  pause(): Promise<void>
  unpause(): Promise<void>
  stop(): Promise<void>
}

/** Generate an ed25519 key pair in OpenSSH formats. */
export function generateKeyPair(): KeyPair {
  const pair = readableKeyPair()
  const blob = Buffer.from(pair.public.split(' ')[1]!, 'base64')
  return { privateKey: pair.private, publicKey: pair.public, fingerprint: fingerprintOf(blob) }
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export const freePort = freeLoopbackPort

/** Container settings of the sshd world. */
export interface SshdContainerOptions {
  /**
   * HostConfig fields merged over the world's. Bubblewrap inside the world needs
   * {@link BWRAP_CAPABLE}: Docker's seccomp profile refuses unprivileged user namespaces, and its
   * masked and read-only /proc paths forbid mounting a new /proc.
   */
  hostConfig?: Docker.HostConfig
  /** The image sshd runs in (default {@link TARGET_IMAGE}); it needs openssh-server and `agent`. */
  image?: string
}

/** HostConfig under which bubblewrap works in the world (`--security-opt seccomp=unconfined --security-opt systempaths=unconfined`). */
export const BWRAP_CAPABLE: Docker.HostConfig = { SecurityOpt: ['seccomp=unconfined'], MaskedPaths: [], ReadonlyPaths: [] }

/** SshdContainer with the HostConfig fields a test needs beyond testcontainers' builders. */
class TestSshdContainer extends SshdContainer {
  withHostConfig(hostConfig: Docker.HostConfig): this {
    Object.assign(this.hostConfig, hostConfig)
    return this
  }
}

/**
 * Start the world: a {@link SshdContainer} (src/testcontainers) with a password for `agent` and
 * this suite's labels, plus what testcontainers does not offer (pause, ps).
 * @param specs - one sshd instance's settings (default MaxSessions 10).
 * @param options - container settings (default: none).
 */
export async function startSshdWorld(specs: readonly [SshdSpec] | readonly SshdSpec[] = [{}], options: SshdContainerOptions = {}): Promise<SshdWorld> {
  if (specs.length !== 1) throw new Error('startSshdWorld: one sshd per world')
  const spec = specs[0]!
  const password = `pw-${Math.random().toString(36).slice(2)}`
  const started = await new TestSshdContainer(options.image ?? TARGET_IMAGE)
    .withMaxSessions(spec.maxSessions ?? 10)
    .withSetEnv(spec.setEnv ?? {})
    .withPassword(password)
    .withLabels({ [TEST_LABEL]: 'true' })
    .withHostConfig(options.hostConfig ?? {})
    .start()
  const container = new Docker().getContainer(started.getId())

  const exec = async (argv: readonly string[]): Promise<{ stdout: string; exitCode: number }> => {
    const result = await started.exec([...argv])
    return { stdout: result.stdout, exitCode: result.exitCode }
  }

  const processesOf = async (): Promise<{ pid: number; user: string; comm: string; args: string }[]> => {
    const { stdout } = await exec(['ps', '-eo', 'pid=,user=,comm=,args='])
    return stdout.split('\n').map(line => /^\s*(\d+)\s+(\S+)\s+(\S+)\s+(.*)$/.exec(line)).flatMap(match => match === null ? [] : [{ pid: Number(match[1]), user: match[2]!, comm: match[3]!, args: match[4]! }])
      .filter(row => !row.args.startsWith('ps -eo'))
  }

  return {
    containerId: started.getId(),
    ports: [started.port],
    hostKey: { publicKey: started.hostPublicKey, fingerprint: started.hostKeyFingerprint },
    clientKey: { privateKey: started.clientPrivateKey },
    clientKeyFile: started.clientKeyFile,
    knownHostsFile: started.knownHostsFile,
    password,
    dir: started.keyDirectory,
    exec,
    processes: processesOf,
    leftovers: async () => {
      const rows = await processesOf()
      // Not the container's own: its init, the sshd listener, and the lifeline beside it.
      return rows.filter(row => row.pid !== 1 && !row.args.includes('[listener]') && !row.args.includes(LIFELINE_LOOP))
    },
    pause: () => container.pause(),
    unpause: () => container.unpause(),
    stop: async () => {
      await started.stop().catch(() => undefined)
    },
  }
}
