/**
 * SSH world faults against a real OpenSSH sshd (project image, host networking, 127.0.0.1):
 * every connect failure fails fast with its own typed error; a connection lost mid-send (the
 * serving sshd killed, or the whole sshd container paused) settles the send, rejects the
 * handle's `done` with TransportError and ends `output` within the keepalive bound, and the next
 * terminal on that target reconnects. Timing bounds are hang guards only.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHmac, randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SubprocessTerminalHandle } from '@deepseek-ai/dsh-subprocess'
import { Context } from '@deepseek-ai/cordis'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { RemoteWorldError, TransportError } from '../../src/providers/remote/errors.ts'
import {
  ConnectionRefusedError,
  HandshakeTimeoutError,
  HostKeyChangedError,
  HostNotFoundError,
  SshAuthenticationError,
  UnknownHostKeyError,
} from '../../src/providers/ssh/errors.ts'
import { type SshRuntimeConfig, type SshRuntimeExtras, SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { docker, execIn, hangGuard, terminalLeftovers, waitFor } from '../docker/helpers.ts'
import { type SshdWorld, TARGET_IMAGE, TEST_LABEL, freePort, generateKeyPair, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await sshd?.stop()
})

/** Connect options for `user` on the test sshd, overridable. */
function config(overrides: Partial<SshRuntimeConfig> = {}, user = 'agent'): SshRuntimeConfig {
  return { target: `${user}@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false, ...overrides }
}

/** A bare runtime (no terminal-bash): `control()` connects and starts the control program. */
async function connect(overrides: Partial<SshRuntimeConfig>, extras: SshRuntimeExtras = {}): Promise<{ uid: number; ms: number }> {
  const ctx = new Context()
  const runtime = new SshSubprocessRuntime(ctx, config(overrides), extras)
  const started = performance.now()
  try {
    const control = await hangGuard(runtime.control(), 15_000, 'connect')
    return { uid: control.info.uid, ms: performance.now() - started }
  } finally {
    await runtime.dispose()
  }
}

/** The typed error a connect attempt fails with. */
async function failure(overrides: Partial<SshRuntimeConfig>, extras: SshRuntimeExtras = {}): Promise<RemoteWorldError> {
  const error = await connect(overrides, extras).then(() => undefined, (caught: unknown) => caught)
  expect(error).toBeInstanceOf(RemoteWorldError)
  return error as RemoteWorldError
}

function file(name: string, text: string): string {
  const path = join(sshd.dir, name)
  writeFileSync(path, text, { mode: 0o600 })
  return path
}

describe('connecting: trust and authentication', () => {
  it('logs in with the key, verified against known_hosts', async () => {
    expect((await connect({})).uid).toBe(1000)
  })

  it('skips an unreachable ssh-agent and goes on with the next method', async () => {
    expect((await connect({ identity: undefined, agent: join(sshd.dir, 'no-agent.sock'), password: sshd.password }, { home: sshd.dir })).uid).toBe(1000)
  })

  it('logs in with a password', async () => {
    expect((await connect({ identity: undefined, password: sshd.password })).uid).toBe(1000)
  })

  it('logs in with a key given as data', async () => {
    expect((await connect({ identity: undefined }, { privateKeys: [sshd.clientKey.privateKey] })).uid).toBe(1000)
  })

  it('logs in with a key held by a real ssh-agent (SSH_AUTH_SOCK), not forwarding it', async () => {
    // OpenSSH's ssh-agent from the project image (no host tool), as this process's uid, its
    // socket in a folder bind-mounted from here: the runtime connects to it like to any agent.
    const dir = mkdtempSync(join(tmpdir(), 'dsh-agent-'))
    writeFileSync(join(dir, 'id_ed25519'), sshd.clientKey.privateKey, { mode: 0o600 })
    const socket = join(dir, 'agent.sock')
    const uid = `${process.getuid!()}:${process.getgid!()}`
    const agent = await docker.createContainer({ Image: TARGET_IMAGE, User: uid, Cmd: ['ssh-agent', '-D', '-a', '/agent/agent.sock'], Labels: { [TEST_LABEL]: 'agent' }, HostConfig: { NetworkMode: 'none', Init: true, Binds: [`${dir}:/agent`] } })
    await agent.start()
    try {
      await waitFor(() => existsSync(socket), exists => exists, 5_000, 10)
      const added = await execIn(agent.id, ['env', 'SSH_AUTH_SOCK=/agent/agent.sock', 'ssh-add', '/agent/id_ed25519'], uid)
      expect(added.exitCode, added.stderr).toBe(0)
      const previous = process.env.SSH_AUTH_SOCK
      process.env.SSH_AUTH_SOCK = socket
      try {
        // No identity and no `agent` option: the default is SSH_AUTH_SOCK.
        const ctx = new Context()
        const runtime = new SshSubprocessRuntime(ctx, { target: `agent@127.0.0.1:${sshd.ports[0]}`, knownHosts: sshd.knownHostsFile, sshConfig: false }, { home: sshd.dir })
        try {
          const control = await hangGuard(runtime.control(), 15_000, 'connect through the agent')
          expect(control.info.uid).toBe(1000)
          // Agent forwarding is off: the login has no SSH_AUTH_SOCK.
          expect((await control.environ()).SSH_AUTH_SOCK).toBeUndefined()
        } finally {
          await runtime.dispose()
        }
      } finally {
        if (previous === undefined) delete process.env.SSH_AUTH_SOCK
        else process.env.SSH_AUTH_SOCK = previous
      }
    } finally {
      await agent.remove({ force: true })
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('accepts a hashed known_hosts entry (|1|salt|hash) for [host]:port', async () => {
    const salt = randomBytes(20)
    const hash = createHmac('sha1', salt).update(`[127.0.0.1]:${sshd.ports[0]}`).digest('base64')
    const knownHosts = file('known_hosts.hashed', `# hashed\n|1|${salt.toString('base64')}|${hash} ${sshd.hostKey.publicKey}\n`)
    expect((await connect({ knownHosts })).uid).toBe(1000)
  })

  it('accepts a pinned SHA256 fingerprint instead of known_hosts', async () => {
    expect((await connect({ knownHosts: file('known_hosts.empty', ''), hostKeyFingerprint: sshd.hostKey.fingerprint })).uid).toBe(1000)
  })

  it('refuses a wrong password with SshAuthenticationError', async () => {
    const error = await failure({ identity: undefined, password: 'not-the-password' })
    expect(error).toBeInstanceOf(SshAuthenticationError)
    expect(error.code).toBe('AUTH_FAILED')
    expect((error as SshAuthenticationError).methods).toEqual(['password'])
  })

  it('refuses a key the server does not authorize with SshAuthenticationError', async () => {
    const stranger = file('id_stranger', generateKeyPair().privateKey)
    const error = await failure({ identity: stranger })
    expect(error).toBeInstanceOf(SshAuthenticationError)
    expect((error as SshAuthenticationError).methods).toEqual([`publickey:${stranger}`])
  })

  it('names the configured IdentityFiles it could not use when authentication fails (missing, a directory, not a key)', async () => {
    const missing = join(sshd.dir, 'id_missing')
    const directory = mkdtempSync(join(sshd.dir, 'id_dir-'))
    const garbage = file('id_garbage', 'not a key\n')
    const sshConfig = file('ssh_config.identities', `Host 127.0.0.1\n  IdentityFile ${missing}\n  IdentityFile ${directory}\n  IdentityFile ${garbage}\n`)
    const error = await failure({ identity: undefined, sshConfig }, { home: sshd.dir })
    expect(error).toBeInstanceOf(SshAuthenticationError)
    expect((error as SshAuthenticationError).methods).toEqual([])
    const skipped = (error as SshAuthenticationError).skipped
    expect(skipped.map(entry => entry.slice(0, entry.indexOf(' (')))).toEqual([missing, directory, garbage])
    expect(skipped[0]).toBe(`${missing} (ENOENT: no such file)`)
    expect(skipped[1]).toMatch(/^.+ \(EISDIR: illegal operation on a directory, read\)$/)
    expect(error.message).toBe(`authentication to agent@127.0.0.1:${sshd.ports[0]} failed; tried: no method; skipped identity files: ${skipped.join(', ')}`)
  })

  it('refuses an unknown host key with UnknownHostKeyError naming its fingerprint (no trust on first use)', async () => {
    const error = await failure({ knownHosts: file('known_hosts.none', `[127.0.0.1]:1 ${sshd.hostKey.publicKey}\n`) })
    expect(error).toBeInstanceOf(UnknownHostKeyError)
    expect(error.code).toBe('HOST_KEY_UNKNOWN')
    expect((error as UnknownHostKeyError).fingerprint).toBe(sshd.hostKey.fingerprint)
    expect((error as UnknownHostKeyError).host).toBe(`[127.0.0.1]:${sshd.ports[0]}`)
    expect(error.message).toContain(sshd.hostKey.fingerprint)
  })

  it('refuses a changed host key with HostKeyChangedError naming both fingerprints', async () => {
    const old = generateKeyPair()
    const error = await failure({ knownHosts: file('known_hosts.changed', `[127.0.0.1]:${sshd.ports[0]} ${old.publicKey}\n`) })
    expect(error).toBeInstanceOf(HostKeyChangedError)
    expect(error.code).toBe('HOST_KEY_CHANGED')
    expect((error as HostKeyChangedError).fingerprint).toBe(sshd.hostKey.fingerprint)
    expect((error as HostKeyChangedError).expected).toEqual([`${old.fingerprint} (${join(sshd.dir, 'known_hosts.changed')}:1)`])
  })

  it('refuses a key that does not match the pinned fingerprint with HostKeyChangedError', async () => {
    const pinned = generateKeyPair().fingerprint
    const error = await failure({ hostKeyFingerprint: pinned })
    expect(error).toBeInstanceOf(HostKeyChangedError)
    expect((error as HostKeyChangedError).expected).toEqual([pinned])
  })
})

describe('connecting: network failures fail fast', () => {
  let silent: Server
  const held: Socket[] = []

  beforeAll(async () => {
    // Accepts TCP and never speaks SSH.
    silent = createServer(socket => { held.push(socket) })
    await new Promise<void>(resolve => silent.listen(0, '127.0.0.1', resolve))
  })

  afterAll(async () => {
    for (const socket of held) socket.destroy()
    await new Promise(resolve => silent.close(resolve))
  })

  it('connection refused -> ConnectionRefusedError', async () => {
    const error = await failure({ target: `agent@127.0.0.1:${await freePort()}` })
    expect(error).toBeInstanceOf(ConnectionRefusedError)
    expect(error.code).toBe('CONNECTION_REFUSED')
  })

  it('a name that cannot resolve -> HostNotFoundError', async () => {
    // A 64-byte label is not a valid DNS name: the resolver fails it locally, no query is sent.
    const name = `${'x'.repeat(64)}.invalid`
    const error = await failure({ target: `agent@${name}:22` })
    expect(error).toBeInstanceOf(HostNotFoundError)
    expect((error as HostNotFoundError).hostname).toBe(name)
  })

  it('a server that accepts TCP but never speaks SSH -> HandshakeTimeoutError (banner)', async () => {
    const port = (silent.address() as { port: number }).port
    const error = await failure({ target: `agent@127.0.0.1:${port}`, connectTimeoutMs: 1_000 })
    expect(error).toBeInstanceOf(HandshakeTimeoutError)
    expect((error as HandshakeTimeoutError).phase).toBe('banner')
  })
})

/** Settle state of a send that was active when the connection was lost. */
async function lostConnection(lose: () => Promise<void>, restore: () => Promise<void>): Promise<void> {
  // Persistence 'off', given: a held shell (the default 'connection') outlives the lost connection by design (test/ssh/held-shells.test.ts).
  const world: RemoteWorld = await openWorld({ runtime: SshSubprocessRuntime, runtimeConfig: config({ persistence: 'off' }), workspaceRoot: '/tmp' })
  try {
    const terminal = await world.open()
    // A second terminal as a bare handle, to watch `done` and `output` directly.
    const handle: SubprocessTerminalHandle = await world.runtime.spawnTerminal({
      argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: '/tmp', env: { TERM: 'dumb', PS1: 'raw> ' }, rows: 24, cols: 80, graceMs: 1_000,
    })
    const outputEnded = new Promise<void>(resolve => { handle.output.on('data', () => undefined); handle.output.once('end', resolve) })
    const done = handle.done.then(() => 'resolved', (error: unknown) => error)
    const send = terminal.startSend('sleep 30; echo never-printed')
    await waitFor(() => terminal.read().text, text => text.includes('sleep 30'), 5_000)

    await lose()
    const lostAt = performance.now()
    // Keepalive bound: 1 s x (3 + 1); the guard is generous.
    const settled = await hangGuard(send.done.then(result => result, (error: unknown) => error), 15_000, 'the active send')
    // The send fails with what failed first: the PTY channel or the control channel beside it.
    expect(settled).toBeInstanceOf(RemoteWorldError)
    expect(['TRANSPORT_FAILED', 'CONTROL_FAILED']).toContain((settled as RemoteWorldError).code)
    const sendMs = performance.now() - lostAt
    expect(await hangGuard(done, 15_000, 'done')).toBeInstanceOf(TransportError)
    await hangGuard(outputEnded, 15_000, 'output end')
    if (process.env.DSH_TEST_TIMINGS === '1') console.log(`lost connection: send settled after ${Math.round(sendMs)} ms, output ended after ${Math.round(performance.now() - lostAt)} ms`)
    // The send may have failed first on the control channel: the shell's own PTY channel, on the
    // same lost connection, reports its end a moment later.
    expect(await waitFor(() => terminal.status(), status => status.kind === 'exited', 15_000)).toEqual({ kind: 'exited', exitCode: null, signal: null })
    await restore()

    // The next terminal on the same target reconnects.
    const next = await hangGuard(world.open(), 20_000, 'the next terminal')
    const result = await next.send('echo "again=$((20 + 22))"')
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport).toContain('again=42')
    await next.close()

    // Closing the lost terminals reconnects for teardown and proves nothing of them is left.
    await hangGuard(handle.terminate(), 20_000, 'terminate of the lost handle')
    const closed = await hangGuard(terminal.close().then(() => 'closed', (error: unknown) => error), 20_000, 'close of the lost terminal')
    // terminal-bash reports the first failure it saw again at close, after its cleanup succeeded:
    // the lost PTY channel (TransportError) or the control channel that went with it.
    expect(closed).toBeInstanceOf(RemoteWorldError)
    expect(['TRANSPORT_FAILED', 'CONTROL_FAILED']).toContain((closed as RemoteWorldError).code)
    expect(await terminalLeftovers(sshd.containerId, terminal.pid!)).toEqual([])
    expect(await terminalLeftovers(sshd.containerId, handle.pid)).toEqual([])
  } finally {
    await world.dispose().catch(() => undefined)
  }
}

describe('a connection lost mid-send', () => {
  it('the sshd serving the session is killed: the send settles, done rejects, output ends, the next terminal reconnects', async () => {
    await lostConnection(async () => {
      const killed = await sshd.exec(['pkill', '-KILL', '-f', '^sshd: agent'])
      expect(killed.exitCode).toBe(0)
    }, async () => {})
  }, 60_000)

  it('the sshd container is paused: keepalive detects the dead peer; after unpause the next terminal reconnects', async () => {
    let paused = false
    try {
      await lostConnection(async () => {
        await sshd.pause()
        paused = true
      }, async () => {
        await sshd.unpause()
        paused = false
      })
    } finally {
      if (paused) await sshd.unpause()
    }
  }, 60_000)
})

describe('a stuck control program (SIGSTOP) cannot hang a terminal teardown', () => {
  it('the request times out and fails the channel; terminate recovers on a fresh connection and proves nothing is left', async () => {
    const ctx = new Context()
    const runtime = new SshSubprocessRuntime(ctx, config())
    try {
      const handle = await runtime.spawnTerminal({ argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: '/', env: { TERM: 'dumb', PS1: 'ps1> ' }, rows: 24, cols: 80, graceMs: 500 })
      handle.output.resume()
      await handle.write('sleep 100\n')
      await waitFor(async () => (await terminalLeftovers(sshd.containerId, handle.pid)).some(row => row.cmdline === 'sleep 100'), found => found)
      const stuck = await runtime.control()
      const stopped = await execIn(sshd.containerId, ['kill', '-STOP', String(stuck.info.pid)])
      expect(stopped.exitCode).toBe(0)
      // Default request bound (10 s): the hang guard is far above it.
      await hangGuard(handle.terminate(), 60_000, 'terminate with a stopped control program')
      expect(stuck.alive).toBe(false)
      expect(await terminalLeftovers(sshd.containerId, handle.pid)).toEqual([])
      await execIn(sshd.containerId, ['kill', '-CONT', String(stuck.info.pid)])
    } finally {
      await hangGuard(runtime.dispose(), 30_000, 'dispose')
    }
  }, 90_000)
})
