/**
 * The persistence family (issue 22): what a held shell costs beside one that is not, and how
 * fast a client takes one back. Per remote world, on the infrastructure of the default
 * composition (Docker: attached to its managed container, since a managed container refuses
 * 'client'; SSH: the same sshd):
 * - `open-to-prompt` and `echo settle` with persistence 'off', 'connection' (the default since
 *   issue 33, so also what the default composition's own rows measure) and 'client', on the same
 *   world in the same loop, so 'off' and the default stand side by side (the report prints each
 *   held row over its 'off' row: goal within 1.1x);
 * - `reattach-to-ready`: a world of the same session takes back a detached shell, from its
 *   `open()` until terminal-bash's startup settled, for a shell idle at its prompt and for a busy
 *   one (a loop printing every 100 ms: settles by silence, its live output held meanwhile);
 * - `replay throughput`: a client attaches to a detached shell whose log holds 8 MiB and reads
 *   all of it (MB/s = 8.39 / seconds).
 * `--no-persistence` skips the family.
 * @module bench/rows/persistence
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { attachHeldShell } from '../../src/providers/remote/pty-holder/held-terminal.ts'
import type { ProcessTransport } from '../../src/providers/remote/process.ts'
import { holderScript, terminalHolder } from '../../src/providers/remote/pty-holder/holder-install.ts'
import type { PersistenceSetting } from '../../src/providers/remote/pty-holder/persistence.ts'
import type { RemoteSubprocessRuntime } from '../../src/providers/remote/runtime.ts'
import { WORLD_OWNER } from '../../src/providers/remote/world-owner.ts'
import { type SampleTable, pushSample, withTimeout } from '../timing.ts'
import { type BenchTarget, DEFAULT_TUNING, type WorldName } from '../worlds.ts'

const MODES = ['off', 'connection', 'client'] as const

/** The rows the report divides by their 'off' row of the same world and run (bench/report.ts DIRECT_COUNTERPART). */
export const PERSISTENCE_BESIDE_OFF: Readonly<Record<string, string>> = Object.fromEntries(MODES.filter(mode => mode !== 'off').flatMap(mode => [
  [`open-to-prompt (persist ${mode})`, 'open-to-prompt (persist off)'],
  [`echo settle (persist ${mode})`, 'echo settle (persist off)'],
]))

export const PERSISTENCE_METRICS = [
  ...MODES.flatMap(mode => [`open-to-prompt (persist ${mode})`, `echo settle (persist ${mode})`]),
  'reattach-to-ready (idle shell)',
  'reattach-to-ready (busy shell)',
  'replay throughput (8 MiB log)',
] as const

/** Bytes the replay row reads (8 MiB, the default log). */
export const REPLAY_ROW_BYTES = 8 * 1024 * 1024

/** The runtime config of `target` with `persistence` (Docker: attached to the managed container, as 'client' needs). */
export async function heldConfig(target: BenchTarget, persistence: PersistenceSetting): Promise<Record<string, unknown>> {
  const config: Record<string, unknown> = { ...target.runtimeConfig, persistence }
  if (target.world.runtime instanceof DockerSubprocessRuntime) {
    delete config.image
    config.container = (await target.world.runtime.world()).containerId
  }
  return config
}

/**
 * min(runs, 5) runs of each row on `target` (a world of the default composition; its own rows
 * measure the default, 'connection', on its own infrastructure: a managed container in Docker).
 */
export async function persistenceRuns(world: WorldName, target: BenchTarget, runs: number, samples: SampleTable): Promise<void> {
  const stateDir = await mkdtemp(join(tmpdir(), 'dsh-bench-held-'))
  const opened: RemoteWorld[] = []
  const compose = async (persistence: PersistenceSetting, session?: string): Promise<RemoteWorld> => {
    const composed = await openWorld({ runtime: target.runtime, runtimeConfig: await heldConfig(target, persistence) as never, workspaceRoot: '/tmp', terminal: DEFAULT_TUNING, ...(session !== undefined ? { session } : {}) })
    opened.push(composed)
    return composed
  }
  try {
    for (const mode of MODES) {
      const composed = await compose({ mode, stateDir }, mode === 'client' ? `bench-${randomBytes(4).toString('hex')}` : undefined)
      // Warm-up (discarded): the holder copied in, the control channel open.
      await (await withTimeout(composed.open(), 'warm-up open')).close()
      for (let run = 0; run < Math.min(runs, 5); run += 1) {
        const started = performance.now()
        const terminal = await withTimeout(composed.open(), `open (persist ${mode})`)
        pushSample(samples, `open-to-prompt (persist ${mode})`, { ms: performance.now() - started })
        const echo = await withTimeout(terminal.send('echo bench'), 'echo')
        pushSample(samples, `echo settle (persist ${mode})`, { ms: echo.ms, reason: echo.waitReason })
        await terminal.close()
      }
    }
    for (const [row, command] of [['reattach-to-ready (idle shell)', undefined], ['reattach-to-ready (busy shell)', 'while :; do echo tick; sleep 0.1; done']] as const) {
      for (let run = 0; run < Math.min(runs, 3); run += 1) {
        const session = `bench-${randomBytes(4).toString('hex')}`
        const first = await compose({ mode: 'client', stateDir }, session)
        const terminal = await first.open()
        if (command !== undefined) {
          terminal.startSend(command).done.catch(() => undefined)
          await withTimeout(echoed(terminal, command), 'the busy command echoed')
        }
        await first.detach()
        const next = await compose({ mode: 'client', stateDir }, session)
        const started = performance.now()
        const back = await withTimeout(next.open(), 'reattach')
        pushSample(samples, row, { ms: performance.now() - started })
        if (back.pid !== terminal.pid) throw new Error(`bench: ${row} took back pid ${back.pid}, not ${terminal.pid}`)
        await back.close()
      }
    }
    // The reader of the replay rows: a world of its own, as a later client is (the detached world is closed).
    const reader = (await compose({ mode: 'connection', stateDir })).runtime as RemoteSubprocessRuntime<never>
    for (let run = 0; run < Math.min(runs, 3); run += 1) {
      // A detached shell whose log holds 8 MiB (a 16 MiB output: the oldest half dropped).
      const session = `bench-${randomBytes(4).toString('hex')}`
      const first = await compose({ mode: 'client', stateDir }, session)
      const terminal = await first.open()
      const runtime = reader
      const pid = terminal.pid!
      // The sleep first: the echo must be on the screen before 16 MiB without a newline push it out of the scrollback.
      const flood = 'sleep 1; head -c 16777216 /dev/zero | tr "\\0" x; sleep 600'
      terminal.startSend(flood).done.catch(() => undefined)
      await withTimeout(echoed(terminal, flood), 'the flood command echoed')
      const holder = await terminalHolder(runtime[WORLD_OWNER])
      if (!('path' in holder)) throw new Error(holder.unavailable)
      const record = await recordOf(stateDir, pid)
      await first.detach()
      // The 16 MiB pass through the detached holder's log (seconds at its pace); untimed.
      await new Promise(resolve => setTimeout(resolve, 3_000))
      const reopen = (): Promise<ProcessTransport> => runtime.openProcess(holderScript(holder, undefined, ['--connect', `${record.stem}.sock`]))
      const started = performance.now()
      const { terminal: held } = await attachHeldShell(await reopen(), world, { secret: Buffer.from(record.secret, 'hex'), controller: randomBytes(16).toString('hex'), reconnect: reopen, deadlineMs: 30_000 }, { fromHead: REPLAY_ROW_BYTES }, true)
      let received = 0
      const replayed = await withTimeout(new Promise<void>(resolve => {
        held.output.on('data', (chunk: Buffer) => {
          received += chunk.length
          if (received >= REPLAY_ROW_BYTES) resolve()
        })
      }), 'the replay of 8 MiB').then(() => true, (error: Error) => {
        // A replay that stops (as one did after 512 KiB before the holder pumped its log on when
        // its socket took all: hold.c serve) is said, not sampled, and the row goes on.
        console.error(`[bench] ${world}: replay throughput: STALLED after ${received} of ${REPLAY_ROW_BYTES} bytes (${error.message}); no sample`)
        return false
      })
      if (replayed) pushSample(samples, 'replay throughput (8 MiB log)', { ms: performance.now() - started })
      held.close()
      await runtime.control().then(control => control.kill('TERM', [record.holder])).catch(() => undefined)
    }
  } finally {
    for (const composed of opened) await composed.dispose().catch(() => undefined)
    // Whatever this family left held (the busy rows' loops end with their terminals).
    await rm(stateDir, { recursive: true, force: true })
  }
}

/**
 * Resolves once the tty echoed `command`: its bytes reached the shell, so a detach from here on
 * cannot take them with it (a write still in flight is not replayed by a later client).
 */
async function echoed(terminal: { read(): { text: string } }, command: string): Promise<void> {
  while (!terminal.read().text.includes(command)) await new Promise(resolve => setTimeout(resolve, 20))
}

/** The held-shell record (secret, stem, holder) of the shell with program pid `pid` in `stateDir`. */
async function recordOf(stateDir: string, pid: number): Promise<{ stem: string; secret: string; holder: { pid: number; starttime: number } }> {
  const { readdir, readFile } = await import('node:fs/promises')
  for (const file of (await readdir(stateDir)).filter(name => name.endsWith('.json'))) {
    const found = (JSON.parse(await readFile(join(stateDir, file), 'utf8')) as { program: { pid: number }; stem: string; secret: string; holder: { pid: number; starttime: number } }[]).find(record => record.program.pid === pid)
    if (found !== undefined) return found
  }
  throw new Error(`bench: no held-shell record of pid ${pid}`)
}
