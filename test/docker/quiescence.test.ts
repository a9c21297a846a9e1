/**
 * Quiescence after close: once a terminal is closed, nothing of its process session may be
 * alive in the container. Docker has no exec-kill API and closing the attach socket leaves the
 * exec's processes running (DESIGN.md section 5), so every case here is proven by scanning the
 * container's /proc through a separate `docker exec`: no member of the shell's session, and none
 * of the processes that descended from the shell before close, may be left non-zombie.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, type WorldTerminal, openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { DockerWorld } from '../../src/providers/docker/docker-world.ts'
import {
  type ContainerProcess,
  IMAGE,
  UPSTREAM_TUNING,
  USERS,
  containerProcesses,
  docker,
  expectReadyForNextSend,
  isDead,
  terminalLeftovers,
  waitFor,
} from './helpers.ts'

let shared: DockerWorld

beforeAll(async () => {
  shared = await DockerWorld.open({ docker, image: IMAGE })
})

afterAll(async () => {
  await shared?.dispose()
})

describe.each(USERS)('after close, nothing of the terminal session is alive in the container, as $label', ({ user }) => {
  let world: RemoteWorld

  beforeAll(async () => {
    world = await openWorld({
      runtime: DockerSubprocessRuntime,
      runtimeConfig: { container: shared.containerId, user },
      workspaceRoot: '/tmp',
      terminal: { ...UPSTREAM_TUNING, timeoutMs: 5_000 },
    })
  })

  afterAll(async () => {
    await world?.dispose()
  })

  /** Live processes of the terminal (session members and the shell's descendants). */
  const members = (terminal: WorldTerminal): Promise<ContainerProcess[]> => terminalLeftovers(shared.containerId, terminal.pid!)

  /**
   * Close the terminal and prove that none of `before` (everything seen before close), nor any
   * process of the shell's session, is alive afterwards.
   */
  async function closeAndProve(terminal: WorldTerminal, before: readonly ContainerProcess[]): Promise<void> {
    await terminal.close()
    const left = await terminalLeftovers(shared.containerId, terminal.pid!, before.map(row => row.pid))
    expect(left, JSON.stringify(left)).toEqual([])
    const table = await containerProcesses(shared.containerId)
    for (const row of before) {
      const now = table.find(entry => entry.pid === row.pid)
      expect(now === undefined || isDead(now.state), `${row.pid} (${row.cmdline}) survived close: ${JSON.stringify(now)}`).toBe(true)
    }
  }

  it('a plain shell: the shell itself is gone', async () => {
    const terminal = await world.open()
    const before = await members(terminal)
    expect(before.map(row => row.pid)).toEqual([terminal.pid])
    await closeAndProve(terminal, before)
  })

  it('stopped background jobs (sleep & then kill -STOP) are continued and killed', async () => {
    const terminal = await world.open()
    expect((await terminal.send('sleep 100 & sleep 100 &')).waitReason).toBe('stdin_read')
    // Stop them only once they run sleep (a stop right after fork would catch bash's fork).
    const running = await waitFor(() => members(terminal), rows => rows.filter(row => row.comm === 'sleep').length === 2)
    expect(running.filter(row => row.comm === 'sleep')).toHaveLength(2)
    // bash reports the stopped jobs around its prompt, so either readiness tier may settle this.
    expectReadyForNextSend((await terminal.send('kill -STOP %1 %2')).waitReason)
    const before = await waitFor(() => members(terminal), rows => rows.filter(row => row.comm === 'sleep' && row.state === 'T').length === 2)
    expect(before.filter(row => row.comm === 'sleep').map(row => row.state)).toEqual(['T', 'T'])
    await closeAndProve(terminal, before)
  })

  it('a Ctrl-Z\'d foreground job (SIGTSTP to the foreground group) is continued and killed', async () => {
    const terminal = await world.open()
    const operation = terminal.startSend('sleep 100')
    const running = await waitFor(() => members(terminal), rows => rows.some(row => row.comm === 'sleep'))
    const sleeper = running.find(row => row.comm === 'sleep')!
    expect(await terminal.signal('SIGTSTP')).toEqual({ delivered: true, targetPgid: sleeper.pgrp })
    expectReadyForNextSend((await operation.done).waitReason)
    const before = await waitFor(() => members(terminal), rows => rows.find(row => row.pid === sleeper.pid)?.state === 'T')
    expect(before.find(row => row.pid === sleeper.pid)?.state).toBe('T')
    const jobs = await terminal.send('jobs')
    expect(jobs.viewport).toMatch(/\[1\]\+\s+Stopped\s+sleep 100/)
    await closeAndProve(terminal, before)
  })

  it('TERM-ignoring children, running and stopped, background and foreground, are killed', async () => {
    const terminal = await world.open()
    // Three running TERM-ignoring jobs, and one that stops itself after installing the trap.
    const background = await terminal.send('for i in 1 2 3; do sh -c \'trap "" TERM; sleep 100\' & done; sh -c \'trap "" TERM; kill -STOP $$; sleep 100\' &')
    // bash reports the self-stopped job around its prompt, so either readiness tier may settle this.
    expectReadyForNextSend(background.waitReason)
    // A TERM- and INT-ignoring job left in the foreground at close.
    const operation = terminal.startSend('sh -c \'trap "" TERM INT; sleep 100\'')
    const before = await waitFor(
      () => members(terminal),
      rows => rows.filter(row => row.comm === 'sleep').length === 4 && rows.some(row => row.comm === 'sh' && row.state === 'T'),
    )
    expect(before.filter(row => row.comm === 'sleep')).toHaveLength(4)
    expect(before.filter(row => row.comm === 'sh' && row.state === 'T')).toHaveLength(1)
    await closeAndProve(terminal, before)
    // The in-flight send settles when its session closes; it does not hang.
    await operation.done.catch(() => undefined)
  })

  it('a process that spawns a new child when TERMed: the newcomer is killed too', async () => {
    const terminal = await world.open()
    const result = await terminal.send('sh -c \'trap "sleep 100 & echo spawned" TERM; while :; do sleep 1; done\' &')
    expect(result.waitReason).toBe('stdin_read')
    const before = await waitFor(() => members(terminal), rows => rows.some(row => row.cmdline.startsWith('sh -c trap')))
    await closeAndProve(terminal, before)
  })

  it('a setsid child of the shell (left the session, still a descendant) is gone', async () => {
    const terminal = await world.open()
    // `setsid -w` forks (a background job is a group leader) and waits: the new session's
    // leader stays a descendant of the shell while setsid lives.
    const result = await terminal.send('setsid -w sleep 100 & ( setsid sleep 101 & wait ) &')
    expect(result.waitReason).toBe('stdin_read')
    const before = await waitFor(() => members(terminal), rows => rows.filter(row => row.comm === 'sleep').length === 2)
    const sleepers = before.filter(row => row.comm === 'sleep')
    expect(sleepers).toHaveLength(2)
    for (const sleeper of sleepers) {
      expect(sleeper.session).toBe(sleeper.pid)
      expect(sleeper.session).not.toBe(terminal.pid)
    }
    await closeAndProve(terminal, before)
  })

  it('a TERM-ignoring setsid descendant whose parent dies on TERM (orphaned mid-teardown) is gone', async () => {
    const terminal = await world.open()
    // TERM kills `setsid -w` (it does not ignore TERM); its child then belongs to init and to a
    // session of its own: only the identity seen before the TERM still ties it to the terminal.
    const result = await terminal.send('setsid -w sh -c \'trap "" TERM; sleep 100\' &')
    expect(result.waitReason).toBe('stdin_read')
    const before = await waitFor(() => members(terminal), rows => rows.some(row => row.comm === 'sleep'))
    const orphanable = before.find(row => row.comm === 'sh' && row.session === row.pid)
    expect(orphanable, JSON.stringify(before)).toBeDefined()
    await closeAndProve(terminal, before)
  })

  it('a deep tree of nested shells and background waits is gone', async () => {
    const terminal = await world.open()
    const result = await terminal.send('bash -c \'bash -c "sleep 100 & sleep 100 & wait" & wait\' &')
    expect(result.waitReason).toBe('stdin_read')
    const before = await waitFor(() => members(terminal), rows => rows.filter(row => row.comm === 'sleep').length === 2)
    expect(before.filter(row => row.comm === 'bash').length).toBe(3)
    await closeAndProve(terminal, before)
  })
})
