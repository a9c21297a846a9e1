/**
 * A real OpenSSH sshd test world: a container from the project image with host networking,
 * running one or more `sshd -D -e -f CONFIG` instances that listen on 127.0.0.1 only, each on a
 * free high port. Host keys and the client key pair are generated per run with ssh2's keygen
 * (no host ssh-keygen needed) and bind-mounted read-only at /etc/dsh-test.
 *
 * Never sends traffic anywhere but 127.0.0.1 (DESIGN.md section 7).
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import Docker from 'dockerode'
import ssh2 from 'ssh2'
import { fingerprintOf } from '../../src/providers/ssh/known-hosts.ts'

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
  /** Ports of the sshd instances, in the order of the specs. */
  readonly ports: readonly number[]
  /** The host key every instance presents. */
  readonly hostKey: KeyPair
  /** The client key authorized for `agent` and `root`. */
  readonly clientKey: KeyPair
  /** Path of the client private key file (mode 0600). */
  readonly clientKeyFile: string
  /** A known_hosts file listing the host key for every instance as `[127.0.0.1]:PORT`. */
  readonly knownHostsFile: string
  /** `agent`'s password. */
  readonly password: string
  /** A scratch directory on the host, removed by stop(). */
  readonly dir: string
  /** Run a command in the container as root; resolves with stdout and the exit code. */
  exec(argv: readonly string[]): Promise<{ stdout: string; exitCode: number }>
  /** `ps` rows (pid, user, args) of the container, excluding the ps itself. */
  processes(): Promise<{ pid: number; user: string; args: string }[]>
  /**
   * Everything running in the container besides its init, the start script and the sshd
   * listeners: per-connection sshd processes, login sessions and whatever they started.
   */
  leftovers(): Promise<{ pid: number; user: string; args: string }[]>
  pause(): Promise<void>
  unpause(): Promise<void>
  stop(): Promise<void>
}

/** Generate an ed25519 key pair in OpenSSH formats. */
export function generateKeyPair(): KeyPair {
  const pair = ssh2.utils.generateKeyPairSync('ed25519')
  const blob = Buffer.from(pair.public.split(' ')[1]!, 'base64')
  return { privateKey: pair.private, publicKey: pair.public, fingerprint: fingerprintOf(blob) }
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>(resolve => server.close(() => resolve()))
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}

function sshdConfig(port: number, spec: SshdSpec): string {
  return [
    'ListenAddress 127.0.0.1',
    `Port ${port}`,
    'HostKey /etc/dsh-test/ssh_host_ed25519_key',
    'PidFile none',
    'AuthorizedKeysFile /etc/dsh-test/authorized_keys',
    'StrictModes no',
    'PubkeyAuthentication yes',
    'PasswordAuthentication yes',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'PermitRootLogin prohibit-password',
    'AllowTcpForwarding yes',
    'UseDNS no',
    'PrintMotd no',
    'LogLevel VERBOSE',
    `MaxSessions ${spec.maxSessions ?? 10}`,
    ...(spec.setEnv !== undefined ? [`SetEnv ${Object.entries(spec.setEnv).map(([name, value]) => `${name}=${value}`).join(' ')}`] : []),
    '',
  ].join('\n')
}

/** Wait until `port` answers with an SSH identification line. */
async function waitForBanner(port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const ok = await new Promise<boolean>(resolve => {
      const socket = new Socket()
      const done = (value: boolean): void => { socket.destroy(); resolve(value) }
      socket.setTimeout(1_000, () => done(false))
      socket.once('error', () => done(false))
      socket.once('data', chunk => done(chunk.toString('latin1').startsWith('SSH-2.0-')))
      socket.connect(port, '127.0.0.1')
    })
    if (ok) return
    if (Date.now() > deadline) throw new Error(`sshd on 127.0.0.1:${port} did not answer within ${timeoutMs} ms`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

/** Container settings of the sshd world. */
export interface SshdContainerOptions {
  /**
   * HostConfig fields merged over the world's. Bubblewrap inside the world needs
   * {@link BWRAP_CAPABLE}: Docker's seccomp profile refuses unprivileged user namespaces, and its
   * masked and read-only /proc paths forbid mounting a new /proc.
   */
  hostConfig?: Docker.HostConfig
}

/** HostConfig under which bubblewrap works in the world (`--security-opt seccomp=unconfined --security-opt systempaths=unconfined`). */
export const BWRAP_CAPABLE: Docker.HostConfig = { SecurityOpt: ['seccomp=unconfined'], MaskedPaths: [], ReadonlyPaths: [] }

/**
 * Start the world: one container, one sshd per spec.
 * @param specs - sshd instances (default: one with MaxSessions 10).
 * @param options - container settings (default: none).
 */
export async function startSshdWorld(specs: readonly SshdSpec[] = [{}], options: SshdContainerOptions = {}): Promise<SshdWorld> {
  const docker = new Docker()
  const dir = mkdtempSync(join(tmpdir(), 'dsh-sshd-'))
  chmodSync(dir, 0o755)
  const hostKey = generateKeyPair()
  const clientKey = generateKeyPair()
  const password = `pw-${Math.random().toString(36).slice(2)}`
  const ports: number[] = []
  for (const _spec of specs) {
    let port = await freePort()
    while (ports.includes(port)) port = await freePort()
    ports.push(port)
  }
  writeFileSync(join(dir, 'ssh_host_ed25519_key'), hostKey.privateKey, { mode: 0o600 })
  writeFileSync(join(dir, 'ssh_host_ed25519_key.pub'), `${hostKey.publicKey}\n`, { mode: 0o644 })
  writeFileSync(join(dir, 'authorized_keys'), `${clientKey.publicKey}\n`, { mode: 0o644 })
  specs.forEach((spec, index) => writeFileSync(join(dir, `sshd_config.${index}`), sshdConfig(ports[index]!, spec), { mode: 0o644 }))
  writeFileSync(join(dir, 'start.sh'), [
    'set -e',
    `echo 'agent:${password}' | chpasswd`,
    'mkdir -p /run/sshd',
    `for index in ${specs.map((_spec, index) => index).join(' ')}; do`,
    '  /usr/sbin/sshd -D -e -f /etc/dsh-test/sshd_config.$index 2>>/tmp/sshd.$index.log &',
    'done',
    'wait',
    '',
  ].join('\n'), { mode: 0o644 })
  const clientKeyFile = join(dir, 'id_ed25519')
  writeFileSync(clientKeyFile, clientKey.privateKey, { mode: 0o600 })
  const knownHostsFile = join(dir, 'known_hosts')
  writeFileSync(knownHostsFile, ports.map(port => `[127.0.0.1]:${port} ${hostKey.publicKey}\n`).join(''), { mode: 0o644 })

  const container = await docker.createContainer({
    Image: TARGET_IMAGE,
    Cmd: ['/bin/sh', '/etc/dsh-test/start.sh'],
    Labels: { [TEST_LABEL]: 'true' },
    HostConfig: { NetworkMode: 'host', Init: true, Binds: [`${dir}:/etc/dsh-test:ro`], ...options.hostConfig },
  })
  await container.start()
  try {
    await Promise.all(ports.map(port => waitForBanner(port)))
  } catch (error) {
    const logs = await container.logs({ stdout: true, stderr: true }).catch(() => Buffer.alloc(0))
    await container.remove({ force: true }).catch(() => undefined)
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`${(error as Error).message}; container log: ${logs.toString('utf8').slice(-2000)}`)
  }

  const exec = async (argv: readonly string[]): Promise<{ stdout: string; exitCode: number }> => {
    const run = await container.exec({ Cmd: [...argv], AttachStdout: true, AttachStderr: true })
    const stream = await run.start({})
    const stdout = new PassThrough()
    const chunks: Buffer[] = []
    stdout.on('data', (chunk: Buffer) => chunks.push(chunk))
    docker.modem.demuxStream(stream, stdout, new PassThrough().resume())
    await new Promise(resolve => stream.once('end', resolve))
    const info = await run.inspect()
    return { stdout: Buffer.concat(chunks).toString('utf8'), exitCode: info.ExitCode ?? -1 }
  }

  const processesOf = async (): Promise<{ pid: number; user: string; args: string }[]> => {
    const { stdout } = await exec(['ps', '-eo', 'pid=,user=,args='])
    return stdout.split('\n').map(line => /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(line)).flatMap(match => match === null ? [] : [{ pid: Number(match[1]), user: match[2]!, args: match[3]! }])
      .filter(row => !row.args.startsWith('ps -eo'))
  }

  return {
    containerId: container.id,
    ports,
    hostKey,
    clientKey,
    clientKeyFile,
    knownHostsFile,
    password,
    dir,
    exec,
    processes: processesOf,
    leftovers: async () => {
      const rows = await processesOf()
      return rows.filter(row => row.pid !== 1 && !row.args.includes('/etc/dsh-test/start.sh') && !row.args.includes('[listener]'))
    },
    pause: () => container.pause(),
    unpause: () => container.unpause(),
    stop: async () => {
      await container.remove({ force: true }).catch(() => undefined)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
