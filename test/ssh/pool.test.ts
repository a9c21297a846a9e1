/**
 * The connection pool against a real sshd with `MaxSessions 3`: 20 terminals opened at once on
 * one target all work, one connection serving several of them; after they close, idle
 * connections close and no channel, connection or remote process is left.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, type WorldTerminal, openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { waitFor } from '../docker/helpers.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld([{ maxSessions: 3 }])
})

afterAll(async () => {
  await sshd?.stop()
})

async function world(maxSessions: number | undefined, idleMs = 200): Promise<RemoteWorld> {
  return openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: {
      target: `agent@127.0.0.1:${sshd.ports[0]}`,
      identity: sshd.clientKeyFile,
      knownHosts: sshd.knownHostsFile,
      sshConfig: false,
      agent: false,
      idleMs,
      ...(maxSessions !== undefined ? { maxSessions } : {}),
    },
    workspaceRoot: '/tmp',
  })
}

/**
 * What the server holds: connections (one privileged `sshd: agent [priv]` monitor each),
 * terminals (each a dsh-pty of agent, the shell's world-side parent on its own exec channel;
 * providers/remote/pty-holder/) and control programs (`sh -s` processes of agent).
 */
async function serverView(): Promise<{ connections: number; terminals: number; controls: number }> {
  const rows = await sshd.processes()
  return {
    connections: rows.filter(row => row.args === 'sshd: agent [priv]').length,
    terminals: rows.filter(row => row.user === 'agent' && row.comm === 'dsh-pty').length,
    controls: rows.filter(row => row.user === 'agent' && row.args === '/bin/sh -s').length,
  }
}

async function openAndUse(composed: RemoteWorld): Promise<WorldTerminal[]> {
  const terminals = await Promise.all(Array.from({ length: 20 }, () => composed.open()))
  expect(new Set(terminals.map(terminal => terminal.pid)).size).toBe(20)
  const results = await Promise.all(terminals.map((terminal, index) => terminal.send(`echo "T${index}=$((${index} * 7))"`)))
  results.forEach((result, index) => {
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport).toContain(`T${index}=${index * 7}\n`)
  })
  return terminals
}

async function closeAndProveNothingLeft(composed: RemoteWorld, terminals: readonly WorldTerminal[]): Promise<void> {
  const runtime = composed.runtime as SshSubprocessRuntime
  const pool = await runtime.world()
  await Promise.all(terminals.map(terminal => terminal.close()))
  // A terminal's slot is released when its channel's close reaches this client (ssh-world.ts
  // makeLease), which nothing orders before close() resolving: the count is read until it
  // settles (CI once read 2 at once).
  expect(await waitFor(() => pool.stats().terminalChannels, count => count === 0, 10_000)).toBe(0)
  // Idle connections close after idleMs (200 ms); the hang guard is generous.
  expect(await waitFor(() => pool.stats().connections, count => count === 0, 10_000)).toBe(0)
  expect(await waitFor(() => sshd.leftovers(), rows => rows.length === 0, 10_000)).toEqual([])
  await composed.dispose()
}

describe('20 terminals at once on a target with MaxSessions 3', () => {
  it('with maxSessions: 3 configured, fills each connection with 2 terminals beside its control channel', async () => {
    const composed = await world(3)
    try {
      const terminals = await openAndUse(composed)
      const pool = await (composed.runtime as SshSubprocessRuntime).world()
      // 20 terminals / (3 sessions - 1 control channel) = 10 connections, none refused.
      const { opened, ...stats } = pool.stats()
      expect(stats).toEqual({ connections: 10, terminalChannels: 20, maxSessions: 3 })
      // The first terminals wait for dsh-pty's copy into the host (world-tools/install.ts), whose
      // channels may have filled a connection meanwhile: one more may have been opened in all.
      expect(opened).toBeGreaterThanOrEqual(10)
      expect(opened).toBeLessThanOrEqual(11)
      expect(await serverView()).toEqual({ connections: 10, terminals: 20, controls: 10 })
      await closeAndProveNothingLeft(composed, terminals)
    } finally {
      await composed.dispose()
    }
  }, 60_000)

  it('with the default maxSessions (10), learns the limit from Channel open failure and still opens all 20', async () => {
    const composed = await world(undefined)
    try {
      const terminals = await openAndUse(composed)
      const pool = await (composed.runtime as SshSubprocessRuntime).world()
      const stats = pool.stats()
      expect(stats.terminalChannels).toBe(20)
      // The first refusal taught the pool the server's limit.
      expect(stats.maxSessions).toBe(3)
      // The server allows 2 terminals per connection, so at least 10 connections carry them.
      expect(stats.connections).toBeGreaterThanOrEqual(10)
      expect(await serverView()).toEqual({ connections: stats.connections, terminals: 20, controls: stats.connections })
      await closeAndProveNothingLeft(composed, terminals)
    } finally {
      await composed.dispose()
    }
  }, 60_000)
})

describe('idle connections', () => {
  it('stay open while a terminal\'s teardown runs on their control channel after its PTY channel closed', async () => {
    // idleMs 1: the connection would close the moment the shell's channel does, mid-proof.
    const composed = await world(3, 1)
    try {
      const terminals = await Promise.all([composed.open(), composed.open()])
      for (const terminal of terminals) {
        const started = await terminal.send('sh -c \'trap "" TERM; sleep 60\' & sleep 0.1; echo started')
        expect(started.viewport).toContain('started\n')
      }
      // Teardown: TERM (ignored by bash and the child), KILL, then the proof, which continues
      // after the shell died and its channel closed.
      await Promise.all(terminals.map(terminal => terminal.close()))
      const pool = await (composed.runtime as SshSubprocessRuntime).world()
      expect(await waitFor(() => pool.stats().connections, count => count === 0, 10_000)).toBe(0)
      expect(await waitFor(() => sshd.leftovers(), rows => rows.length === 0, 10_000)).toEqual([])
    } finally {
      await composed.dispose()
    }
  }, 30_000)
})
