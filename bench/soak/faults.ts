/**
 * The soak's fault matrix: a fault injected while a terminal runs a command, in a fresh client
 * each time. For each: the typed error the client sees first (terminal `done`, or a foreground
 * probe), the time from the fault to it, and whether the next open (a new client, after the
 * fault is undone where it can be) gets a working terminal.
 * @module bench/soak/faults
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFile } from 'node:fs/promises'
import { type Server, type Socket, connect, createServer } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import { Context } from '@deepseek-ai/cordis'
import type { SubprocessRuntime, SubprocessTerminalHandle } from '@deepseek-ai/dsh-subprocess'
import type Docker from 'dockerode'

/** One row of the matrix. */
export interface FaultRow {
  world: 'docker' | 'ssh'
  fault: string
  /** `Name [CODE]` of the first error the client saw, or what happened instead. */
  error: string
  /** Fault to that error (ms); null when none came within the bound. */
  detectMs: number | null
  /** The bound the design promises for this fault (ms). */
  boundMs: number
  /** Whether a new client's next open got a working terminal. */
  nextOpen: 'recovers' | string
}

/** Mounts a runtime for one client. */
export type Mount = (ctx: Context) => Promise<void>

const BASH = ['/bin/bash', '--noprofile', '--norc', '-i']

async function client(mount: Mount): Promise<{ ctx: Context; runtime: SubprocessRuntime }> {
  const ctx = new Context()
  await mount(ctx)
  return { ctx, runtime: ctx.subprocess }
}

function describeError(error: unknown): string {
  const failure = error as { name?: string; code?: string; message?: string }
  return `${failure.name ?? 'Error'}${failure.code !== undefined ? ` [${failure.code}]` : ''}`
}

/** A terminal printing a tick every 100 ms: a command in progress when the fault lands. */
async function busyTerminal(runtime: SubprocessRuntime): Promise<SubprocessTerminalHandle> {
  const terminal = await runtime.spawnTerminal({ argv: BASH, cwd: '/tmp', env: { TERM: 'dumb', PS1: 'dsh> ' }, rows: 24, cols: 80, graceMs: 1_000 })
  terminal.output.resume()
  await terminal.write('while :; do echo tick; sleep 0.1; done\r')
  await delay(300)
  return terminal
}

/**
 * Wait for the first failure the client sees after a fault: `done` settling (a rejection, or an
 * exit the fault caused), or a foreground probe (as terminal-bash polls every 50 ms) rejecting.
 */
async function firstFailure(terminal: SubprocessTerminalHandle, boundMs: number): Promise<{ error: string; ms: number | null }> {
  const started = performance.now()
  let settled = false
  const done = terminal.done.then(outcome => `done resolved ${JSON.stringify(outcome)}`, describeError)
  const probes = (async (): Promise<string> => {
    for (;;) {
      if (settled) return ''
      try {
        await terminal.inspectForeground()
      } catch (error) {
        return describeError(error)
      }
      await delay(50)
    }
  })()
  const bound = delay(boundMs * 2).then(() => undefined)
  const first = await Promise.race([done, probes, bound])
  settled = true
  return first === undefined ? { error: `nothing within ${boundMs * 2} ms`, ms: null } : { error: first, ms: Math.round(performance.now() - started) }
}

/** A new client opens a terminal and runs `echo`: 'recovers', or the typed error it got. */
async function nextOpen(mount: Mount): Promise<string> {
  let opened: { ctx: Context; runtime: SubprocessRuntime } | undefined
  try {
    opened = await client(mount)
    const terminal = await opened.runtime.spawnTerminal({ argv: BASH, cwd: '/tmp', env: { TERM: 'dumb', PS1: 'dsh> ' }, rows: 24, cols: 80, graceMs: 1_000 })
    let text = ''
    terminal.output.on('data', (chunk: Buffer) => { text += chunk.toString() })
    await terminal.write('echo recovered-$((6*7))\r')
    for (let look = 0; look < 200 && !text.includes('recovered-42'); look += 1) await delay(10)
    await terminal.terminate()
    return text.includes('recovered-42') ? 'recovers' : 'opens, but the command printed nothing'
  } catch (error) {
    return `fails: ${describeError(error)}`
  } finally {
    await opened?.ctx.fiber.dispose().catch(() => undefined)
  }
}

/** One scenario: a busy terminal, the fault, the first failure, the undo, and the next open. */
export async function faultScenario(options: {
  world: 'docker' | 'ssh'
  fault: string
  boundMs: number
  mount: Mount
  inject(): Promise<void>
  undo?: () => Promise<void>
  /** The client for the next open, when it differs (e.g. a new container after an engine restart). */
  reopen?: Mount
}): Promise<FaultRow> {
  const { ctx, runtime } = await client(options.mount)
  try {
    const terminal = await busyTerminal(runtime)
    const injected = options.inject()
    const seen = await firstFailure(terminal, options.boundMs)
    await injected
    await options.undo?.()
    await terminal.terminate().catch(() => undefined)
    return { world: options.world, fault: options.fault, error: seen.error, detectMs: seen.ms, boundMs: options.boundMs, nextOpen: await nextOpen(options.reopen ?? options.mount) }
  } finally {
    await ctx.fiber.dispose().catch(() => undefined)
  }
}

/**
 * A TCP relay on 127.0.0.1 in front of an SSH server: the client connects to it, and `reset()`
 * ends every relayed connection with a TCP RST on both sides.
 */
export class ResettingRelay {
  private constructor(private readonly server: Server, readonly port: number, private readonly sockets: Set<Socket>) {}

  static async start(targetPort: number): Promise<ResettingRelay> {
    const sockets = new Set<Socket>()
    const server = createServer(inbound => {
      const outbound = connect(targetPort, '127.0.0.1')
      for (const socket of [inbound, outbound]) {
        sockets.add(socket)
        socket.on('error', () => undefined)
        socket.once('close', () => sockets.delete(socket))
      }
      inbound.pipe(outbound)
      outbound.pipe(inbound)
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('relay has no port')
    return new ResettingRelay(server, address.port, sockets)
  }

  /** RST every relayed connection. */
  reset(): void {
    for (const socket of this.sockets) socket.resetAndDestroy()
  }

  close(): void {
    this.reset()
    this.server.close()
  }
}

/**
 * Restart the Docker engine as an operator does (`systemctl restart docker`): SIGTERM, wait
 * until dockerd is gone (it stops its containers and its containerd first), then start it again
 * with the project's own script (docker/ensure-world.sh starts dockerd when none answers).
 */
export async function restartEngine(ensureScript: string): Promise<void> {
  // dockerd's own pid file; no host tool (pkill) is needed to find it.
  const pid = Number((await readFile('/var/run/docker.pid', 'utf8')).trim())
  process.kill(pid, 'SIGTERM')
  // Gone means gone from the process table, or a zombie nobody reaps (ensure-world.sh then
  // removes the stale pid file); at most 60 s for the engine to stop its containers.
  for (let look = 0; look < 600; look += 1) {
    const state = await readFile(`/proc/${pid}/stat`, 'utf8').then(stat => stat.slice(stat.lastIndexOf(') ') + 2, stat.lastIndexOf(') ') + 3), () => 'gone')
    if (state === 'gone' || state === 'Z') break
    await delay(100)
  }
  const starter = spawn('bash', [ensureScript], { stdio: ['ignore', 'ignore', 'inherit'] })
  const [code] = await once(starter, 'exit') as [number | null]
  if (code !== 0) throw new Error(`docker/ensure-world.sh exited with ${code} while restarting the engine`)
}

/** Remove managed containers an engine restart left behind (the engine did not AutoRemove them). */
export async function sweepManaged(docker: Docker, label: string): Promise<number> {
  const left = await docker.listContainers({ all: true, filters: { label: [label] } })
  await Promise.all(left.map(info => docker.getContainer(info.Id).remove({ force: true }).catch(() => undefined)))
  return left.length
}
