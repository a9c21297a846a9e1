/**
 * Held shells under an output flood with no client (issue 22): `yes` runs for 10 minutes in a
 * detached held shell of an attached container and of an SSH host at once (one test, so the
 * suite pays the 10 minutes once). The holder reads the PTY whenever it has output and drops the
 * oldest bytes beyond its log: its memory stays within the log's bound, it writes nothing to disk
 * but its description, and `yes` never blocks in write(2).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RemoteWorld } from '../../src/backend/world.ts'
import { DEFAULT_LOG_BYTES } from '../../src/providers/remote/pty-holder/persistence.ts'
import type { RemoteSubprocessRuntime } from '../../src/providers/remote/runtime.ts'
import { openPlanned } from '../helpers/held-shell-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'
import { execIn, startTestContainer, waitFor } from '../docker/helpers.ts'

/** How long the floods run detached (ms), and how often they are sampled (ms). */
const FLOOD_MS = 10 * 60_000
const SAMPLE_MS = 10_000
/** What a holder may hold besides its log: the static binary, its stack and buffers (bytes). */
const HOLDER_OVERHEAD_BYTES = 4 * 1024 * 1024

let container: Docker.Container
let sshd: SshdWorld
let stateDir: string

beforeAll(async () => {
  container = await startTestContainer()
  sshd = await startSshdWorld()
  stateDir = await mkdtemp(join(tmpdir(), 'dsh-held-flood-'))
})

afterAll(async () => {
  for (const id of [container?.id, sshd?.containerId]) if (id !== undefined) await execIn(id, ['pkill', '-KILL', '-x', 'dsh-held']).catch(() => undefined)
  await container?.remove({ force: true }).catch(() => undefined)
  await sshd?.stop()
  if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true })
})

/**
 * A field of a process's /proc file (kB for VmRSS, bytes for wchar), read as the process's user
 * in the container: /proc/PID/io needs ptrace read access (proc(5)), which the container's root
 * lacks for another uid's process without CAP_SYS_PTRACE.
 */
async function procField(containerId: string, pid: number, file: 'status' | 'io', field: string): Promise<number> {
  const read = await execIn(containerId, ['cat', `/proc/${pid}/${file}`], 'agent')
  const value = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(read.stdout)?.[1]
  if (value === undefined) throw new Error(`no ${field} in /proc/${pid}/${file}: ${read.stdout}${read.stderr}`)
  return Number(value)
}

describe('held shells flooding with no client for 10 minutes', () => {
  it('`yes` never blocks; each holder stays within its log in memory and writes only its description to disk', async () => {
    const worlds: { name: string; containerId: string; world: RemoteWorld }[] = []
    try {
      worlds.push({ name: 'docker', containerId: container.id, world: await openPlanned({ runtime: 'docker', config: { container: container.id, user: 'agent', persistence: { mode: 'client', stateDir } } }, '/tmp', 'flood-docker') })
      worlds.push({ name: 'ssh', containerId: sshd.containerId, world: await openPlanned({ runtime: 'ssh', config: { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false, persistence: { mode: 'client', stateDir } } }, '/tmp', 'flood-ssh') })
      const floods = []
      for (const { containerId, world } of worlds) {
        const terminal = await world.open()
        terminal.startSend('yes held-flood-line').done.catch(() => undefined)
        const yes = Number((await waitFor(async () => (await execIn(containerId, ['pgrep', '-u', 'agent', '-x', 'yes'])).stdout.trim(), text => /^\d+$/.test(text), 10_000)))
        const holder = (world.runtime as RemoteSubprocessRuntime<never>).terminal(terminal.pid!)!.worldParent!.pid
        floods.push({ containerId, yes, holder, written: 0, rss: 0 })
        expect(await world.detach()).toBe(1)
      }
      for (let elapsed = 0; elapsed < FLOOD_MS; elapsed += SAMPLE_MS) {
        await delay(SAMPLE_MS)
        for (const flood of floods) {
          const written = await procField(flood.containerId, flood.yes, 'io', 'wchar')
          // It wrote on since the last sample: never blocked on a full PTY.
          expect(written).toBeGreaterThan(flood.written + 1_000_000)
          flood.written = written
          flood.rss = Math.max(flood.rss, await procField(flood.containerId, flood.holder, 'status', 'VmRSS') * 1024)
        }
      }
      for (const flood of floods) {
        expect(flood.rss).toBeLessThanOrEqual(DEFAULT_LOG_BYTES + HOLDER_OVERHEAD_BYTES)
        // Far more than the log went through it.
        expect(flood.written).toBeGreaterThan(10 * DEFAULT_LOG_BYTES)
        const disk = await execIn(flood.containerId, ['du', '-sk', '/tmp/dsh-remote-held-1000'])
        expect(Number(disk.stdout.split('\t')[0])).toBeLessThanOrEqual(16)
      }
    } finally {
      for (const { world } of worlds) await world.dispose().catch(() => undefined)
    }
  }, FLOOD_MS + 120_000)
})
