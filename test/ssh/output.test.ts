/**
 * Large terminal output over SSH through the unchanged terminal-bash (upstream default buffer
 * sizes), against a real OpenSSH sshd. An SSH channel delivers PTY output in many small packets;
 * RemoteTerminalHandle coalesces them before terminal-bash sees them, so a few MB of output
 * settle in about a second instead of starving the event loop until ssh2's keepalive (1 s x 3,
 * the runtime default) dropped the connection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld
let world: RemoteWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
  world = await openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: '/tmp',
    // Upstream defaults (scrollback 256 KiB, 50 ms polls); the bound is far above the ~1 s a
    // healthy run takes and below the ~20 s the uncoalesced path needed for one `seq 1 300000`.
    terminal: { pollIntervalMs: 50, exactProbeAfterMs: 150, idleSilenceMs: 3_000, timeoutMs: 15_000 },
  })
}, 60_000)

afterAll(async () => {
  await world?.dispose()
  await sshd?.stop()
})

describe('large output over SSH through terminal-bash', () => {
  it('settles with the last line present and the session stays usable', async () => {
    const terminal = await world.open()
    try {
      const big = await terminal.send('seq 1 300000 | tail -c 0; seq 1 300000')
      expect(big.waitReason).toBe('stdin_read')
      expect(big.viewport).toMatch(/299999\r?\n300000\r?\n/)
      // The connection survived (a keepalive timeout would have ended the shell).
      expect(terminal.status()).toEqual({ kind: 'running' })

      const again = await terminal.send('seq 1 300000; echo after-big')
      expect(again.waitReason).toBe('stdin_read')
      expect(again.viewport).toMatch(/300000\r?\nafter-big\r?\n/)

      const echo = await terminal.send('echo ok')
      expect(echo.waitReason).toBe('stdin_read')
      expect(echo.viewport).toMatch(/^ok$/m)
    } finally {
      await terminal.close()
    }
  }, 90_000)
})
