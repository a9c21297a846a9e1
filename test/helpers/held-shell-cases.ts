/**
 * Held shells (issue 22), world-neutral: shells that outlive their transport (persistence
 * 'connection') and their client (persistence 'client'), held in the world by dsh-pty's holder
 * (world/dsh-pty/hold.c). Behaviour only: no case asserts a duration.
 *
 * A world under these cases reaches the world through a proxy this process controls
 * (socket-cut.ts): the SSH world's TCP connection, the Docker world's engine socket. A cut drops
 * every connection and refuses new ones, as a network outage does. Processes are read in the
 * world's pid namespace through a SEPARATE `docker exec`.
 */
import { spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { expect, it } from 'vitest'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { HeldShellBusyError, HeldShellDeniedError, HeldShellLostError, type RemoteWorldError } from '../../src/providers/remote/errors.ts'
import type { HeldShellRecord } from '../../src/providers/remote/pty-holder/held-records.ts'
import { SESSION_TAG_VARIABLE } from '../../src/providers/remote/ownership.ts'
import { holderScript, terminalHolder } from '../../src/providers/remote/pty-holder/holder-install.ts'
import { WORLD_OWNER } from '../../src/providers/remote/world-owner.ts'
import { type HeldTerminal, attachHeldShell } from '../../src/providers/remote/pty-holder/held-terminal.ts'
import type { PersistenceSetting } from '../../src/providers/remote/pty-holder/persistence.ts'
import type { RemoteSubprocessRuntime } from '../../src/providers/remote/runtime.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { ROOT } from './built-package.ts'
import { execIn, waitFor } from '../docker/helpers.ts'
import type { HeldClientPlan } from './held-client.ts'
import type { SocketCut } from './socket-cut.ts'

/** What a world supplies to the cases. */
export interface HeldShellWorld {
  /** The container the world's processes run in (the attached container, or the sshd's). */
  containerId(): string
  /** A writable directory in the world. */
  workspace: string
  /** Where this process's clients keep their held-shell records (a directory of the test's own). */
  stateDir: string
  /** The world's runtime and config with `persistence`, as `user`, reached through {@link proxy} (JSON: child clients get it too). */
  plan(persistence: PersistenceSetting, options?: { user?: string; replies?: 'answer' | 'off' }): HeldClientPlan['world']
  /** The proxy between the clients and the world. */
  proxy(): SocketCut
  /** The name of the world's records target for `user` (held-records.ts), known once a world was opened. */
  recordsTarget(world: RemoteWorld, user: string): string
}

const TUNING = { pollIntervalMs: 50, exactProbeAfterMs: 150, idleSilenceMs: 3000 } as const

/** Compose a world of `plan` in this process, for session `session`. */
export async function openPlanned(plan: HeldClientPlan['world'], workspaceRoot: string, session?: string, tuning: { timeoutMs?: number; idleSilenceMs?: number } = {}): Promise<RemoteWorld> {
  const terminal = { ...TUNING, ...tuning }
  const common = { workspaceRoot, terminal, ...(session !== undefined ? { session } : {}) }
  return plan.runtime === 'docker'
    ? openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: plan.config, ...common })
    : openWorld({ runtime: SshSubprocessRuntime, runtimeConfig: plan.config, ...common })
}

/** A client process (held-client.ts) that started `send` and said READY; resolves with the shell's pid and a SIGKILL. */
async function startClient(plan: HeldClientPlan): Promise<{ pid: number; kill(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test', 'helpers', 'held-client.ts'), JSON.stringify(plan)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { err += chunk.toString() })
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  await waitFor(() => out, text => text.includes('READY') || text.includes('FAILED'), 60_000).catch(() => undefined)
  expect(out, err).toContain('READY')
  return {
    pid: Number(/PID (\d+)/.exec(out)![1]),
    kill: async () => {
      child.kill('SIGKILL')
      await exited
    },
  }
}

/** The holder's pid of the terminal whose shell has pid `pid` in `world`. */
function holderOf(world: RemoteWorld, pid: number): number {
  return (world.runtime as RemoteSubprocessRuntime<never>).terminal(pid)!.worldParent!.pid
}

/** Occurrences of `text` in `within`. */
function count(within: string, text: string): number {
  return within.split(text).length - 1
}

/** The session tags (ownership.ts) in the initial environment of `pid` (/proc/PID/environ, what a reaper reads), read as `user` (the container has no CAP_SYS_PTRACE to read another uid's). */
async function sessionTagsOf(containerId: string, user: string, pid: number): Promise<string[]> {
  const listed = await execIn(containerId, ['sh', '-c', `tr '\\0' '\\n' < /proc/${pid}/environ`], user)
  if (listed.exitCode !== 0) throw new Error(`cannot read /proc/${pid}/environ: ${listed.stderr}`)
  return listed.stdout.split('\n').filter(line => line.startsWith(`${SESSION_TAG_VARIABLE}=`))
}

/** The held shells in the world of `user` (their dsh-held holders' pids), read through a separate exec. */
async function holders(containerId: string, user: string): Promise<number[]> {
  const listed = await execIn(containerId, ['sh', '-c', `ps -o pid= -o comm= -u ${user} | awk '$2 == "dsh-held" { print $1 }'`])
  return listed.stdout.split('\n').filter(line => line.trim().length > 0).map(Number)
}

/** What each case opens through: worlds it disposes after the case, and fresh session names. */
function caseKit(world: HeldShellWorld, user: string): {
  opened(plan: HeldClientPlan['world'], session?: string, tuning?: { timeoutMs?: number; idleSilenceMs?: number }): Promise<RemoteWorld>
  disposeAll(): Promise<void>
  session(): string
} {
  const worlds: RemoteWorld[] = []
  return {
    opened: async (plan, session, tuning = {}) => {
      const composed = await openPlanned(plan, world.workspace, session, tuning)
      worlds.push(composed)
      return composed
    },
    disposeAll: async () => {
      for (const composed of worlds.splice(0)) await composed.dispose().catch(() => undefined)
      // Whatever a failed case left held ends here, so the next case starts from none.
      await execIn(world.containerId(), ['pkill', '-KILL', '-x', '-u', user, 'dsh-held'])
    },
    session: () => `held-${randomBytes(6).toString('hex')}`,
  }
}

/**
 * Register the cases (call inside a `describe`).
 * @param world - the world under test.
 * @param options.restart - restart the world's container (the Docker world only: the SSH world's
 *   sshd does not survive a restart of its container).
 */
export function heldShellCases(world: HeldShellWorld, user: string, options: { restart?: () => Promise<void> } = {}): void {
  const { opened, disposeAll, session } = caseKit(world, user)

  it('a client killed with SIGKILL: a new client of the same session takes the same shell back ($$ unchanged) and sees done-42 once', async () => {
    try {
      const plan = world.plan({ mode: 'client', stateDir: world.stateDir }, { user })
      const name = session()
      // The command stays busy until this test opens its gate (a file), so it is still running
      // when the next client attaches, however long that takes, and ends then (no fixed sleep).
      const gate = `${world.workspace}/held-gate-${randomBytes(4).toString('hex')}`
      const command = `until [ -e ${gate} ]; do sleep 0.1; done; echo done-$((6*7))`
      const first = await startClient({ world: plan, session: name, workspaceRoot: world.workspace, send: command })
      await first.kill()
      const next = await opened(plan, name)
      const terminal = await next.open()
      // The replay: what the shell runs now, without a prompt marker (it is busy).
      expect(terminal.motd).toContain(command)
      expect(terminal.pid).toBe(first.pid)
      expect(terminal.read().text).not.toContain('done-42')
      await execIn(world.containerId(), ['touch', gate], user)
      const text = await waitFor(() => terminal.read().text, seen => seen.includes('done-42\n'), 40_000)
      expect(count(text, 'done-42')).toBe(1)
      const again = await terminal.send('echo "PID=$$"')
      expect(again.waitReason).toBe('stdin_read')
      expect(again.viewport).toContain(`PID=${first.pid}`)
      const holder = holderOf(next, terminal.pid!)
      expect(await holders(world.containerId(), user)).toContain(holder)
      // It started on a pipe that carried the first client's tag (a pooled exec, a tagged exec
      // channel); the holder ran itself again without it, so no reaper of a later client ends it.
      expect(await sessionTagsOf(world.containerId(), user, holder)).toEqual([])
      await terminal.close()
      expect(await holders(world.containerId(), user)).not.toContain(holder)
      await execIn(world.containerId(), ['rm', '-f', gate])
    } finally {
      await disposeAll()
    }
  }, 120_000)

  it('a 5 s cut of the transport during a running command (it ends once the cut is over): the send settles with ok, the shell saw no SIGHUP, its pid is unchanged', async () => {
    const gate = `${world.workspace}/held-gate-${randomBytes(4).toString('hex')}`
    try {
      // The silence bound above the command's run: the send settles on its prompt, after `ok`.
      const composed = await opened(world.plan({ mode: 'connection' }, { user }), undefined, { idleSilenceMs: 60_000 })
      const terminal = await composed.open()
      const before = await terminal.send('trap "echo got-\$((1+1))-HUP" HUP; echo "PID=$$"')
      const pid = /PID=(\d+)/.exec(before.viewport)![1]
      // The command runs until this test opens its gate (a file), after the cut: it spans the
      // whole outage however long the cut's setup takes, with no fixed sleep.
      const send = terminal.startSend(`until [ -e ${gate} ]; do sleep 0.1; done; echo ok-$((40+2))`)
      await waitFor(async () => (await execIn(world.containerId(), ['pgrep', '-x', '-u', user, 'sleep'])).exitCode, code => code === 0, 10_000)
      await world.proxy().cut(5_000)
      await execIn(world.containerId(), ['touch', gate], user)
      const result = await send.done
      expect(result.waitReason).toBe('stdin_read')
      expect(result.viewport).toContain('ok-42')
      expect(terminal.read().text).not.toContain('got-2-HUP')
      const after = await terminal.send('echo "PID=$$"')
      expect(after.viewport).toContain(`PID=${pid}`)
      await terminal.close()
    } finally {
      await disposeAll()
      await execIn(world.containerId(), ['rm', '-f', gate])
    }
  }, 120_000)

  it("without `persistence` (the default since issue 33): the world reports 'connection', and a 2 s cut of the transport under a shell at its prompt is not seen (same pid, the next send settles)", async () => {
    try {
      const plan = world.plan('connection', { user })
      // The same plan with no `persistence` at all: the world's default.
      const { persistence: _given, ...config } = plan.config
      const composed = await opened({ ...plan, config } as HeldClientPlan['world'])
      expect(await (composed.runtime as RemoteSubprocessRuntime<never>).persistenceInEffect()).toEqual({ mode: 'connection', defaulted: true })
      const terminal = await composed.open()
      const before = await terminal.send('echo "PID=$$"')
      const pid = /PID=(\d+)/.exec(before.viewport)![1]
      expect(await holders(world.containerId(), user)).toContain(holderOf(composed, terminal.pid!))
      await world.proxy().cut(2_000)
      const after = await terminal.send('echo "PID=$$ again"')
      expect(after.waitReason).toBe('stdin_read')
      expect(after.viewport).toContain(`PID=${pid} again`)
      await terminal.close()
    } finally {
      await disposeAll()
    }
  }, 60_000)

  it('a shell that printed 4 MiB while its transport was down, then waited at its prompt: after the reconnect all of it arrives and the send settles there', async () => {
    try {
      const composed = await opened(world.plan({ mode: 'connection' }, { user }), undefined, { idleSilenceMs: 60_000 })
      const terminal = await composed.open()
      const send = terminal.startSend("sleep 2; head -c 4194304 /dev/zero | tr '\\0' x; echo; echo end-$((40+2))")
      await waitFor(async () => (await execIn(world.containerId(), ['pgrep', '-x', '-u', user, 'sleep'])).exitCode, code => code === 0, 10_000)
      const cut = world.proxy().cut(5_000)
      // The relay ends too: the holder has no controller while the shell prints, so the 4 MiB
      // wait in its log, and the shell is back at its prompt, printing nothing, when the client
      // resumes far behind the log's head.
      await execIn(world.containerId(), ['pkill', '-9', '-x', '-u', user, 'dsh-pty'])
      await cut
      const result = await send.done
      expect(result.waitReason).toBe('stdin_read')
      expect(result.viewport).toContain('end-42')
      await terminal.close()
    } finally {
      await disposeAll()
    }
  }, 120_000)

  it('a probe while a client that attached behind the log\'s head is sent the log: its answer follows all the log held then, and says the true facts (the shell waiting at its prompt)', async () => {
    try {
      const name = session()
      const composed = await opened(world.plan({ mode: 'client', stateDir: world.stateDir }, { user }), name)
      const terminal = await composed.open()
      const printed = await terminal.send("head -c 524288 /dev/zero | tr '\\0' x; echo; echo end-$((40+2))")
      expect(printed.waitReason).toBe('stdin_read')
      const runtime = composed.runtime as RemoteSubprocessRuntime<never>
      const records = JSON.parse(await readFile(join(world.stateDir, await recordsFileOf(world.stateDir, world.recordsTarget(composed, user))), 'utf8')) as HeldShellRecord[]
      const record = records.find(entry => entry.program.pid === terminal.pid)!
      const holder = await terminalHolder(runtime[WORLD_OWNER])
      if (!('path' in holder)) throw new Error(holder.unavailable)
      const relay = (): ReturnType<typeof runtime.openProcess> => runtime.openProcess(holderScript(holder, undefined, ['--connect', `${record.stem}.sock`]))
      runtime.detachHeldShells()
      // From the log's first byte: the shell printed more than 512 KiB, the attach grants 256 KiB,
      // so the holder has not sent the log up to its head when the probe comes. (512 KiB, not
      // more: all of it must reach the reader within the holder's 2 s bound on a loaded machine.)
      // The detached connection's relay ends a moment after its transport closed; until the
      // holder saw it go, it refuses a new controller (HeldShellBusyError), as it would another client.
      const attach = async (): Promise<Awaited<ReturnType<typeof attachHeldShell>>> => {
        for (let tries = 1; ; tries += 1) {
          try {
            return await attachHeldShell(await relay(), 'test', { secret: Buffer.from(record.secret, 'hex'), controller: randomBytes(16).toString('hex'), reconnect: relay, deadlineMs: 30_000 }, 0, true)
          } catch (error) {
            if (!(error instanceof HeldShellBusyError) || tries === 50) throw error
            await delay(100)
          }
        }
      }
      const { terminal: held, reply } = await attach()
      expect(reply.start).toBe(0)
      let taken = 0
      held.output.on('data', (chunk: Buffer) => { taken += chunk.length })
      const answer = await held.foreground(record.program).then(facts => ({ facts, delivered: taken + held.output.readableLength }))
      expect(answer.facts).toMatchObject({ tpgid: terminal.pid, inputWaiting: true })
      expect(answer.delivered).toBe(reply.head)
      held.close()
    } finally {
      await disposeAll()
    }
  }, 120_000)

  it('a shell that exits while detached (`sleep 2; exit 7`): the next client gets status 7 and its last output, and a fresh shell', async () => {
    try {
      const plan = world.plan({ mode: 'client', stateDir: world.stateDir }, { user })
      const name = session()
      const first = await startClient({ world: plan, session: name, workspaceRoot: world.workspace, send: 'echo bye-$((3+4)); sleep 2; exit 7' })
      await first.kill()
      await waitFor(async () => (await execIn(world.containerId(), ['sh', '-c', `kill -0 ${first.pid} 2>/dev/null && echo alive || echo gone`])).stdout.trim(), state => state === 'gone', 20_000)
      const next = await opened(plan, name)
      const terminal = await next.open()
      expect(terminal.pid).not.toBe(first.pid)
      const handle = (next.runtime as RemoteSubprocessRuntime<never>).terminal(terminal.pid!)!
      expect(handle.previousEnding?.outcome).toEqual({ exitCode: 7, signal: null })
      expect(handle.previousEnding?.tail.toString()).toContain('bye-7')
      // The ended shell's holder was collected and ended; the fresh one ends with its terminal.
      expect(await holders(world.containerId(), user)).toEqual([holderOf(next, terminal.pid!)])
      await terminal.close()
      expect(await holders(world.containerId(), user)).toEqual([])
    } finally {
      await disposeAll()
    }
  }, 120_000)

  it("a 'connection' shell whose client died ends once its reconnect deadline and 10 s passed, never living out the 24 h of 'client'", async () => {
    try {
      const plan = world.plan({ mode: 'connection', reconnectDeadlineMs: 1_000 }, { user })
      const first = await startClient({ world: plan, session: session(), workspaceRoot: world.workspace, send: 'sleep 600' })
      // The shell runs under its dsh-held holder, the one this user has.
      const parent = await execIn(world.containerId(), ['ps', '-o', 'ppid=', '-p', String(first.pid)])
      expect(await holders(world.containerId(), user)).toEqual([Number(parent.stdout.trim())])
      await first.kill()
      // The holder's TTL is ceil(1000 ms / 1000) + 10 s; the wait allows three times that.
      expect(await waitFor(() => holders(world.containerId(), user), listed => listed.length === 0, 33_000)).toEqual([])
      const alive = await execIn(world.containerId(), ['sh', '-c', `kill -0 ${first.pid} 2>/dev/null && echo alive || echo gone`])
      expect(alive.stdout.trim()).toBe('gone')
    } finally {
      await disposeAll()
    }
  }, 120_000)

  it('a held start that fails (a shell that is not there) leaves no holder behind', async () => {
    try {
      const composed = await opened(world.plan({ mode: 'client', stateDir: world.stateDir }, { user }), session())
      const runtime = composed.runtime as RemoteSubprocessRuntime<never>
      for (let attempt = 0; attempt < 3; attempt += 1) {
        const failed = await runtime.spawnTerminal({ argv: ['/nonexistent/shell-x', '-i'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1_000 }).then(() => undefined, (error: unknown) => error as RemoteWorldError)
        expect(failed?.code).toBe('ENOENT')
      }
      expect(await waitFor(() => holders(world.containerId(), user), listed => listed.length === 0, 20_000)).toEqual([])
    } finally {
      await disposeAll()
    }
  }, 120_000)

  it("a held start raced by dispose() (at six points of a fresh world's open(), 'client' and 'connection'): dispose ends what the start began, no holder is left", async () => {
    try {
      // How long a fresh world's first open() takes here: the disposes fall across that window.
      const timed = await opened(world.plan({ mode: 'connection' }, { user }), session())
      const began = performance.now()
      await timed.open()
      const openMs = performance.now() - began
      await timed.dispose()
      for (let index = 0; index < 6; index += 1) {
        const afterMs = Math.round(openMs * index / 6)
        const mode = index % 2 === 0 ? 'client' : 'connection'
        const composed = await opened(world.plan(mode === 'client' ? { mode, stateDir: world.stateDir } : { mode }, { user }), session())
        // The open rejects (the world closed under it) or the terminal opened first: either way
        // nothing of it may outlive the dispose.
        const opening = composed.open().then(() => undefined, () => undefined)
        await delay(afterMs)
        await composed.dispose()
        await opening
        expect(await waitFor(() => holders(world.containerId(), user), listed => listed.length === 0, 10_000), `dispose ${afterMs} ms after open(), persistence '${mode}'`).toEqual([])
      }
    } finally {
      await disposeAll()
    }
  }, 120_000)

  it('the emulator rebuilt from a replay answers no query in it: a cursor position request printed while detached stays unanswered', async () => {
    try {
      const name = session()
      // The first client answers no query (replies off), so the request is still unanswered when it dies.
      const first = await startClient({ world: world.plan({ mode: 'client', stateDir: world.stateDir }, { user, replies: 'off' }), session: name, workspaceRoot: world.workspace, send: 'printf "\\033[6n"; read -t 6 -r -d R x; echo "answer$((1+1))=[${x#?}]"' })
      await first.kill()
      const next = await opened(world.plan({ mode: 'client', stateDir: world.stateDir }, { user, replies: 'answer' }), name)
      const terminal = await next.open()
      expect(terminal.pid).toBe(first.pid)
      // An answer typed into the read would show as its cursor position (`[1;1`).
      const text = await waitFor(() => terminal.read().text, seen => seen.includes('answer2=['), 30_000)
      expect(text).toContain('answer2=[]')
      await terminal.close()
    } finally {
      await disposeAll()
    }
  }, 120_000)

  it('refusals: a wrong secret, another uid, and a holder that is not the recorded one are each refused with their typed error, nothing attached', async () => {
    try {
      const plan = world.plan({ mode: 'client', stateDir: world.stateDir }, { user })
      const name = session()
      const first = await startClient({ world: plan, session: name, workspaceRoot: world.workspace, send: 'sleep 300' })
      await first.kill()
      const probe = await opened(plan)
      const file = join(world.stateDir, await recordsFileOf(world.stateDir, world.recordsTarget(probe, user)))
      const original = await readFile(file, 'utf8')
      const records = JSON.parse(original) as HeldShellRecord[]
      const mine = records.find(record => record.program.pid === first.pid)!
      const rewrite = (change: Partial<HeldShellRecord>): Promise<void> => writeFile(file, JSON.stringify(records.map(record => record === mine ? { ...record, ...change } : record)))
      const refusal = async (): Promise<RemoteWorldError> => {
        const composed = await opened(plan, name)
        return composed.open().then(() => { throw new Error('attached') }, (error: unknown) => rootCause(error))
      }
      await rewrite({ secret: randomBytes(32).toString('hex') })
      expect(await refusal()).toBeInstanceOf(HeldShellDeniedError)
      await rewrite({ holder: { pid: mine.holder.pid, starttime: mine.holder.starttime + 1 } })
      const replaced = await refusal()
      expect(replaced).toBeInstanceOf(HeldShellLostError)
      expect((replaced as HeldShellLostError).loss).toBe('holder-replaced')
      // The refused record was dropped: another uid is refused with the original record again.
      await writeFile(file, original)
      if (user !== 'root') {
        const rootPlan = world.plan({ mode: 'client', stateDir: world.stateDir }, { user: 'root' })
        const rootProbe = await opened(rootPlan)
        await writeFile(join(world.stateDir, await recordsFileOf(world.stateDir, world.recordsTarget(rootProbe, 'root'))), original)
        const asRoot = await opened(rootPlan, name)
        const refused = await asRoot.open().then(() => undefined, (error: unknown) => rootCause(error))
        expect(refused).toBeInstanceOf(HeldShellDeniedError)
      }
      // Nothing attached: the shell is still there, and its own client takes it back.
      const owner = await opened(plan, name)
      const terminal = await owner.open()
      expect(terminal.pid).toBe(first.pid)
      await terminal.close()
    } finally {
      await disposeAll()
    }
  }, 180_000)

  it('idle connections to the holder\'s socket (its own user\'s, never sending a frame) keep no reattach out, and the holder closes each of them', async () => {
    const marker = `/tmp/held-idle-${randomBytes(4).toString('hex')}`
    try {
      const plan = world.plan({ mode: 'client', stateDir: world.stateDir }, { user })
      const name = session()
      const first = await startClient({ world: plan, session: name, workspaceRoot: world.workspace, send: 'echo idle-$((1+1))' })
      await first.kill()
      const next = await opened(plan, name)
      const records = JSON.parse(await readFile(join(world.stateDir, await recordsFileOf(world.stateDir, world.recordsTarget(next, user))), 'utf8')) as HeldShellRecord[]
      const mine = records.find(record => record.program.pid === first.pid)!
      // One more idle connection than the holder has slots for connections not yet attached.
      const idle = execIn(world.containerId(), ['python3', '-c', IDLE_CONNECTIONS, `${mine.stem}.sock`, '5', marker], user)
      await waitFor(async () => (await execIn(world.containerId(), ['cat', marker])).stdout, text => text === 'open 5\n', 20_000)
      const terminal = await next.open()
      expect(terminal.pid).toBe(first.pid)
      expect((await terminal.send('echo back-$((40+2))')).viewport).toContain('back-42')
      // Every one of them was closed by the holder, none by its own end.
      expect((await idle).stdout).toBe('closed 5\n')
      await terminal.close()
    } finally {
      await disposeAll()
      await execIn(world.containerId(), ['rm', '-f', marker])
    }
  }, 120_000)

  if (options.restart !== undefined) {
    const restart = options.restart
    it('a restarted container is reported as such, never as a silent fresh shell; the next terminal starts fresh', async () => {
      try {
        const plan = world.plan({ mode: 'client', stateDir: world.stateDir }, { user })
        const name = session()
        const first = await startClient({ world: plan, session: name, workspaceRoot: world.workspace, send: 'sleep 300' })
        await first.kill()
        await restart()
        const composed = await opened(plan, name)
        const lost = await composed.open().then(() => undefined, (error: unknown) => rootCause(error))
        expect(lost).toBeInstanceOf(HeldShellLostError)
        expect((lost as HeldShellLostError).loss).toBe('world-restarted')
        const fresh = await composed.open()
        expect((await fresh.send('echo fresh-$((1+1))')).viewport).toContain('fresh-2')
        await fresh.close()
      } finally {
        await disposeAll()
      }
    }, 180_000)
  }
}

/**
 * The soak-length cases (minutes each by design: 1000 sends under random cuts, 100
 * detach/reattach cycles over 16 MiB), registered by test/long/held-shells-soak.test.ts for
 * both worlds (`npm run test:long`), out of `npm test`'s budget. Call inside a `describe`.
 */
export function heldShellSoakCases(world: HeldShellWorld, user: string): void {
  const { opened, disposeAll, session } = caseKit(world, user)

  it('1000 sends of `echo L$n >> f` while the transport drops at random: every line once, in order', async () => {
    const file = `${world.workspace}/held-lines-${randomBytes(4).toString('hex')}`
    let cutting = true
    try {
      const composed = await opened(world.plan({ mode: 'connection' }, { user }))
      const terminal = await composed.open()
      const cuts = (async () => {
        let made = 0
        while (cutting) {
          await delay(200 + Math.floor(Math.random() * 800))
          if (!cutting) break
          await world.proxy().cut(20 + Math.floor(Math.random() * 300))
          made += 1
        }
        return made
      })()
      for (let n = 1; n <= 1000; n += 1) await terminal.send(`echo L${n} >> ${file}`)
      cutting = false
      expect(await cuts).toBeGreaterThan(0)
      const written = await execIn(world.containerId(), ['cat', file])
      expect(written.stdout).toBe(Array.from({ length: 1000 }, (_, index) => `L${index + 1}\n`).join(''))
      await terminal.close()
    } finally {
      cutting = false
      await disposeAll()
      await execIn(world.containerId(), ['rm', '-f', file])
    }
  }, 600_000)

  it('100 detach/reattach cycles (50 transport drops, 50 clients gone) during a deterministic 16 MiB output: what was delivered is the source, byte for byte', async () => {
    // 2097152 lines of 8 bytes (`seq -w`: 7 digits, zero-padded), on a raw PTY (no \r added): 16 MiB.
    const lines = 2_097_152
    const source = createHash('sha256')
    for (let line = 1; line <= lines; line += 1) source.update(`${String(line).padStart(7, '0')}\n`)
    const expected = source.digest('hex')
    try {
      const name = session()
      const composed = await opened(world.plan({ mode: 'client', stateDir: world.stateDir }, { user }), name)
      const terminal = await composed.open()
      const ready = await terminal.send(`stty raw -echo; read -r go; seq -w 1 ${lines}; sleep 600`)
      expect(ready.waitReason).toBe('stdin_read')
      // The shell's secret and socket, as this user's client recorded them.
      const runtime = composed.runtime as RemoteSubprocessRuntime<never>
      const recordsFile = (await readFile(join(world.stateDir, await recordsFileOf(world.stateDir, world.recordsTarget(composed, user))), 'utf8'))
      const record = (JSON.parse(recordsFile) as HeldShellRecord[]).find(entry => entry.program.pid === terminal.pid)!
      expect(record).toBeDefined()
      // From here on, this test is the client: it detaches the world's handle and reads the
      // shell's output itself, through relays it opens and drops.
      const holder = await terminalHolder(runtime[WORLD_OWNER])
      if (!('path' in holder)) throw new Error(holder.unavailable)
      const delivered = createHash('sha256')
      let offset = -1
      let total = 0
      let cycles = 0
      const attach = async (resume: number | { fromHead: number }): Promise<HeldTerminal> => {
        const pipe = await runtime.openProcess(holderScript(holder, undefined, ['--connect', `${record.stem}.sock`]))
        const { terminal: held, reply } = await attachHeldShell(pipe, 'test', { secret: Buffer.from(record.secret, 'hex'), controller: randomBytes(16).toString('hex'), reconnect: () => runtime.openProcess(holderScript(holder, undefined, ['--connect', `${record.stem}.sock`])), deadlineMs: 30_000 }, resume, true)
        if (offset < 0) offset = reply.head
        expect(reply.start).toBe(offset)
        return held
      }
      runtime.detachHeldShells()
      let held = await attach({ fromHead: 0 })
      // Raw mode: no CR to NL translation, so the line ends with NL.
      await held.write(Buffer.from('go\n'))
      const target = lines * 8
      while (total < target) {
        const chunk = await new Promise<Buffer | null>(resolve => {
          const take = (): void => {
            // At most 64 KiB a read: the cycles come at points spread over the output.
            const data = (held.output.read(Math.min(65_536, held.output.readableLength)) ?? held.output.read()) as Buffer | null
            if (data !== null) { cleanup(); resolve(data) }
          }
          const ended = (): void => { cleanup(); resolve(null) }
          const cleanup = (): void => { held.output.off('readable', take); held.output.off('end', ended) }
          held.output.on('readable', take)
          held.output.once('end', ended)
          take()
        })
        if (chunk === null) throw new Error(`the output ended at ${total} of ${target} bytes`)
        const useful = chunk.subarray(0, Math.min(chunk.length, target - total))
        delivered.update(useful)
        total += useful.length
        offset += chunk.length
        // A cycle every 160 KiB: transport drops (the relay killed in the world) and clients
        // gone (this client's transport closed; a new one attaches at the offset delivered).
        if (total >= (cycles + 1) * 167_772 && cycles < 100) {
          cycles += 1
          if (cycles % 2 === 1) await execIn(world.containerId(), ['pkill', '-9', '-x', '-u', user, 'dsh-pty'])
          else {
            held.close()
            held = await attach(offset)
          }
          await delay(Math.floor(Math.random() * 30))
        }
      }
      expect(cycles).toBe(100)
      expect(delivered.digest('hex')).toBe(expected)
      held.close()
      await execIn(world.containerId(), ['pkill', '-9', '-u', user, '-x', 'dsh-held'])
    } finally {
      await disposeAll()
    }
  }, 600_000)
}

/**
 * A program for the world's python3 (argv: socket, count, marker file): opens `count` connections
 * to a holder's socket that never send a frame, writes `open COUNT` to the marker once all are
 * connected, then prints `closed N`, N the connections the holder closed within 30 s.
 */
const IDLE_CONNECTIONS = `
import select, socket, sys, time
path, count, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    conns.append(s)
with open(marker, 'w') as f:
    f.write('open %d\\n' % count)
closed, deadline = 0, time.monotonic() + 30
while conns and time.monotonic() < deadline:
    ready, _, _ = select.select(conns, [], [], 1)
    for s in ready:
        if not s.recv(65536):
            conns.remove(s)
            closed += 1
print('closed %d' % closed)
`

/** The records file name of `target` in `stateDir` (held-records.ts names it by the target's hash). */
async function recordsFileOf(stateDir: string, target: string): Promise<string> {
  void stateDir
  return `${createHash('sha256').update(target).digest('hex').slice(0, 32)}.json`
}

/** The RemoteWorldError under terminal-bash's wrapping of a failed spawn. */
function rootCause(error: unknown): RemoteWorldError {
  let current: unknown = error
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth += 1) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string' && code.startsWith('HELD_')) return current as RemoteWorldError
    const wrapped = current as { spawnError?: unknown; cause?: unknown }
    current = wrapped.spawnError ?? wrapped.cause
  }
  throw error
}
