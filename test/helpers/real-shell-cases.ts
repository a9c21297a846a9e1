/**
 * Upstream terminal-bash's real-shell suite (packages/terminal/terminal-bash/tests/local.spec.ts)
 * as a world-neutral peer suite: the UNCHANGED @deepseek-ai/dsh-terminal-bash over any of our
 * runtimes, composed by openWorld, with upstream's harness tuning, for one remote user. Pid
 * checks that upstream does with the host's process.kill are done in the world's own pid
 * namespace: every world under test runs in a container (the Docker world itself, or the sshd
 * container of the SSH world), read through a SEPARATE `docker exec` (never the control channel
 * under test).
 *
 * The world must inject the ambient variables `DSH_TEST_SECRET=ambient-must-not-leak`,
 * `SERVICE_API_KEY=sk-must-not-leak` and `KEEP_AMBIENT=visible` into what it gives a new process
 * (container Env; sshd_config SetEnv): the first two must be scrubbed, the last must survive.
 */
import { expect, it } from 'vitest'
import type { RemoteWorld, TerminalTuning } from '../../src/backend/world.ts'
import {
  aliveInContainer,
  containerProcesses,
  execIn,
  expectReadyForNextSend,
  terminalLeftovers,
  waitFor,
  waitForOutput,
} from '../docker/helpers.ts'

/** Ambient entries a world under this suite injects (see the module comment). */
export const AMBIENT_FOR_SCRUB_TEST = {
  DSH_TEST_SECRET: 'ambient-must-not-leak',
  SERVICE_API_KEY: 'sk-must-not-leak',
  KEEP_AMBIENT: 'visible',
} as const

/** What a world supplies to the suite. */
export interface RealShellWorld {
  /** The container whose pid namespace the shells run in (read at test time). */
  containerId(): string
  /** Workspace root in that world: writable by `user`, absent on the host. */
  workspace: string
  /** upstream's harness(): a fresh composition per test (the caller disposes it after the test). */
  harness(user: string, timing?: Pick<TerminalTuning, 'idleSilenceMs' | 'handoffGraceMs' | 'timeoutMs'>): Promise<RemoteWorld>
}

/**
 * Register the cases (call inside a `describe` for one user).
 * @param uid - the user's numeric uid, as `id -u` prints it.
 */
export function realShellCases(world: RealShellWorld, user: string, uid: number): void {
  it('persists cwd and environment across sends, scrubs secrets, and closes', async () => {
    const previous = process.env.DSH_TEST_SECRET
    process.env.DSH_TEST_SECRET = 'must-not-leak'
    try {
      const { ctx, agent } = await world.harness(user)
      const created = await ctx.terminals.spawn(agent, { type: 'shell', name: 'main', cwd: world.workspace })
      expect(created.motd).toContain('dsh> ')
      expect(created.pid).toBeGreaterThan(1)

      const start = ctx.terminals.startSend(agent, created.sessionId, { text: 'printf "start=%s uid=%s\\n" "$PWD" "$(id -u)"', submit: true })
      const started = await start.done
      expect(started.waitReason).toBe('stdin_read')
      expect(started.viewport).toContain(`start=${world.workspace} uid=${uid}`)

      const first = ctx.terminals.startSend(agent, created.sessionId, { text: 'export KEEP=ok; cd /', submit: true })
      expect((await first.done).waitReason).toBe('stdin_read')
      const second = ctx.terminals.startSend(agent, created.sessionId, {
        text: 'printf "cwd=%s keep=%s secret=%s key=%s ambient=%s\\n" "$PWD" "$KEEP" "${DSH_TEST_SECRET-unset}" "${SERVICE_API_KEY-unset}" "${KEEP_AMBIENT-unset}"',
        submit: true,
      })
      const result = await second.done
      expect(result.waitReason).toBe('stdin_read')
      // The harness's own DSH_TEST_SECRET never crosses; the world's credential-shaped ambient
      // entries are scrubbed like a local parent env; ordinary ambient entries stay.
      expect(result.viewport).toContain('cwd=/ keep=ok secret=unset key=unset ambient=visible')

      expect(ctx.terminals.read(agent, created.sessionId, { offset: 0, count: 20 }).text).toContain('cwd=/ keep=ok secret=unset key=unset ambient=visible')
      expect(await ctx.terminals.kill(agent, created.sessionId)).toBe(true)
      expect(ctx.terminals.list(agent)).toEqual([])
      expect(await terminalLeftovers(world.containerId(), created.pid!)).toEqual([])
    } finally {
      if (previous === undefined) delete process.env.DSH_TEST_SECRET
      else process.env.DSH_TEST_SECRET = previous
    }
  }, 20_000)

  it('restores the controlled prompt after an in-shell PS1 override', async () => {
    // The silence tier is pushed beyond every assertion below, so each settle proves
    // prompt-based readiness survives the override rather than inferred_idle absorbing it.
    const { ctx, agent } = await world.harness(user, { idleSilenceMs: 5_000, timeoutMs: 8_000 })
    const created = await ctx.terminals.spawn(agent, { type: 'shell' })

    const override = ctx.terminals.startSend(agent, created.sessionId, { text: 'PS1=broken-prompt', submit: true })
    expect((await override.done).waitReason).toBe('stdin_read')

    const after = ctx.terminals.startSend(agent, created.sessionId, { text: 'printf "healed=[%s]\\n" "$PS1"', submit: true })
    const result = await after.done
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport).toContain('healed=[dsh> ]')
    await ctx.terminals.kill(agent, created.sessionId)
  }, 30_000)

  it('signals a foreground command and kills a TERM-ignoring background descendant', async () => {
    // Upstream signals 50 ms after the send. Here the foreground group is first looked up in
    // the world (a separate docker exec, slow under load), so the silence tier is moved out of
    // reach: the send must not settle by silence before the SIGINT it is meant to observe.
    const { ctx, agent } = await world.harness(user, { idleSilenceMs: 5_000, timeoutMs: 8_000 })
    const created = await ctx.terminals.spawn(agent, { type: 'shell' })
    const shellPid = created.pid!
    const screen = (): string => ctx.terminals.read(agent, created.sessionId, { offset: 0, count: 100 }).text

    const foreground = ctx.terminals.startSend(agent, created.sessionId, { text: 'sleep 60', submit: true })
    // The SIGINT must reach the group the world shows in the foreground: the sleep's own.
    const sleeper = await waitFor(
      async () => (await containerProcesses(world.containerId())).find(row => row.session === shellPid && row.comm === 'sleep'),
      row => row !== undefined,
    )
    expect(sleeper, screen()).toBeDefined()
    expect(sleeper!.pgrp).toBe(sleeper!.pid)
    const signalled = await ctx.terminals.signal(agent, created.sessionId, 'SIGINT')
    expect(signalled).toEqual({ delivered: true, targetPgid: sleeper!.pgrp })
    expect((await foreground.done).waitReason, screen()).toBe('stdin_read')
    expect(await waitFor(() => aliveInContainer(world.containerId(), sleeper!.pid), alive => !alive)).toBe(false)

    const background = ctx.terminals.startSend(agent, created.sessionId, {
      text: 'sh -c \'trap "" TERM; sleep 60\' & echo CHILD=$!',
      submit: true,
    })
    const output = (await background.done).viewport
    const child = /CHILD=(\d+)/.exec(output)?.[1]
    expect(child, screen()).toBeDefined()
    const pid = Number(child)
    expect(await aliveInContainer(world.containerId(), pid), JSON.stringify(await containerProcesses(world.containerId()))).toBe(true)
    await ctx.terminals.kill(agent, created.sessionId)
    expect(await aliveInContainer(world.containerId(), pid)).toBe(false)
    expect(await terminalLeftovers(world.containerId(), shellPid, [pid])).toEqual([])
  }, 20_000)

  it('quiesces a disowned same-session descendant after the shell exits naturally', async () => {
    const { ctx, agent } = await world.harness(user)
    const created = await ctx.terminals.spawn(agent, { type: 'shell' })
    const pidFile = `/tmp/disowned-${user}-${process.pid}-${Date.now()}.pid`
    const background = ctx.terminals.startSend(agent, created.sessionId, {
      text: `sh -c 'trap "" TERM; printf "%s" "$$" > "$1"; sleep 60' dsh "${pidFile}" & disown`,
      submit: true,
    })
    await background.done
    const readPid = async (): Promise<number> => Number((await execIn(world.containerId(), ['cat', pidFile])).stdout || 0)
    const childPid = await waitFor(readPid, value => value > 0, 10_000, 10)
    expect(childPid, ctx.terminals.read(agent, created.sessionId, { offset: 0, count: 100 }).text).toBeGreaterThan(0)
    expect(await aliveInContainer(world.containerId(), childPid)).toBe(true)
    // It really is in the shell's session, disowned (not a job), TERM ignored.
    const row = (await containerProcesses(world.containerId())).find(entry => entry.pid === childPid)
    expect(row?.session).toBe(created.pid)

    await ctx.terminals.startSend(agent, created.sessionId, { text: 'exit', submit: true }).done
    const status = await waitFor(() => ctx.terminals.list(agent)[0]?.status.kind, kind => kind === 'exited', 10_000, 10)
    expect(status).toBe('exited')
    // The shell is gone; its disowned child still runs until the session is closed.
    expect(await aliveInContainer(world.containerId(), created.pid!)).toBe(false)
    expect(await aliveInContainer(world.containerId(), childPid)).toBe(true)
    await ctx.terminals.kill(agent, created.sessionId)
    expect(await aliveInContainer(world.containerId(), childPid)).toBe(false)
    expect(await terminalLeftovers(world.containerId(), created.pid!, [childPid])).toEqual([])
    await execIn(world.containerId(), ['rm', '-f', pidFile])
  }, 20_000)

  it('cancels a slow-starting raw-mode foreground process with a real SIGINT', async () => {
    const { ctx, agent } = await world.harness(user, { idleSilenceMs: 10_000, timeoutMs: 15_000 })
    const created = await ctx.terminals.spawn(agent, { type: 'shell' })
    const controller = new AbortController()
    const ready = 'RAW_READY'
    // The interactive shell echoes the command, so only child output may contain the marker.
    const command = 'python3 -c \'import signal,sys,termios,time; signal.signal(signal.SIGINT, lambda *_: (print("SIGINT_SEEN", flush=True), sys.exit(0))); attrs=termios.tcgetattr(0); attrs[3] &= ~termios.ISIG; termios.tcsetattr(0, termios.TCSANOW, attrs); time.sleep(2.1); print("RAW_" + "READY", flush=True); time.sleep(60)\''
    expect(command).not.toContain(ready)
    const foreground = ctx.terminals.startSend(agent, created.sessionId, { text: command, submit: true, signal: controller.signal })
    await waitForOutput(foreground, ready, 15_000)
    // ISIG is off, so a ^C byte would not do: only a real kill(2) to the group reaches python.
    const python = (await containerProcesses(world.containerId())).find(row => row.session === created.pid && row.comm.startsWith('python3'))
    expect(python).toBeDefined()
    controller.abort()
    const result = await foreground.done
    expectReadyForNextSend(result.waitReason)
    expect(await waitFor(() => aliveInContainer(world.containerId(), python!.pid), alive => !alive)).toBe(false)
    const afterReady = 'AFTER_SIGINT'
    const afterCommand = 'printf "AFTER_%s\\n" SIGINT'
    expect(afterCommand).not.toContain(afterReady)
    const after = ctx.terminals.startSend(agent, created.sessionId, { text: afterCommand, submit: true })
    await waitForOutput(after, afterReady, 15_000)
    expectReadyForNextSend((await after.done).waitReason)
    // The handler ran in python (the signal was delivered, not a byte that ISIG would ignore).
    expect(ctx.terminals.read(agent, created.sessionId, { offset: 0, count: 100 }).text).toContain('SIGINT_SEEN')
    await ctx.terminals.kill(agent, created.sessionId)
    expect(await terminalLeftovers(world.containerId(), created.pid!)).toEqual([])
  }, 35_000)

  it('settles programs blocked reading the terminal as stdin_read (python input(), the shell\'s own read after a job, cat)', async () => {
    // Proving stdin-wait needs the probe to run as the shell's own uid (DESIGN.md section 3);
    // the silence tier is out of reach, so only a proven read settles these sends.
    const { ctx, agent } = await world.harness(user, { idleSilenceMs: 5_000, timeoutMs: 8_000 })
    const created = await ctx.terminals.spawn(agent, { type: 'shell' })
    const asked = await ctx.terminals.startSend(agent, created.sessionId, { text: 'python3 -c \'name = input("na" + "me? "); print("hi", name)\'', submit: true }).done
    expect(asked.waitReason).toBe('stdin_read')
    expect(asked.viewport).toContain('name? ')
    const answered = await ctx.terminals.startSend(agent, created.sessionId, { text: 'world', submit: true }).done
    expect(answered.waitReason).toBe('stdin_read')
    expect(answered.viewport).toContain('hi world')
    // The shell's builtin `read` after a job of another group: the shell's group goes from its
    // prompt's wait to seq's group being foreground to `read`, and no probe sees it not waiting.
    const job = await ctx.terminals.startSend(agent, created.sessionId, { text: 'seq 1 200000; read x; echo "got-$x"', submit: true }).done
    expect(job.waitReason).toBe('stdin_read')
    expect(job.viewport).toContain('200000')
    const replied = await ctx.terminals.startSend(agent, created.sessionId, { text: 'ok', submit: true }).done
    expect(replied.viewport).toContain('got-ok')
    const cat = await ctx.terminals.startSend(agent, created.sessionId, { text: 'cat', submit: true }).done
    expect(cat.waitReason).toBe('stdin_read')
    // Closing with cat still in the foreground leaves nothing behind.
    await ctx.terminals.kill(agent, created.sessionId)
    expect(await terminalLeftovers(world.containerId(), created.pid!)).toEqual([])
  }, 30_000)

  it('closes with TERM-ignoring and stopped children and proves nothing is left', async () => {
    const { ctx, agent } = await world.harness(user)
    const created = await ctx.terminals.spawn(agent, { type: 'shell' })
    const shellPid = created.pid!
    // A TERM-ignoring child, a stopped job, and a stopped TERM-ignoring child.
    const started = await ctx.terminals.startSend(agent, created.sessionId, {
      text: 'sh -c \'trap "" TERM; sleep 61\' & A=$!; sleep 62 & B=$!; kill -STOP $B; sh -c \'trap "" TERM; kill -STOP $$; sleep 63\' & C=$!; sleep 0.2; echo "KIDS=$A,$B,$C"',
      submit: true,
    }).done
    const kids = /KIDS=(\d+),(\d+),(\d+)/.exec(started.viewport)
    expect(kids, started.viewport).not.toBeNull()
    const pids = kids!.slice(1, 4).map(Number)
    // C stops itself once it runs, and A sleeps once it waits for its sleep: when, the machine says.
    const states = await waitFor(async () => {
      const table = await containerProcesses(world.containerId())
      return pids.map(pid => table.find(row => row.pid === pid)?.state)
    }, found => found.join() === 'S,T,T')
    expect(states).toEqual(['S', 'T', 'T'])
    await ctx.terminals.kill(agent, created.sessionId)
    for (const pid of pids) expect(await aliveInContainer(world.containerId(), pid)).toBe(false)
    expect(await terminalLeftovers(world.containerId(), shellPid, pids)).toEqual([])
  }, 20_000)
}
