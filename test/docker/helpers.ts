/**
 * Shared helpers of the Docker world suite: the real engine, the project image, container-side
 * process inspection through a SEPARATE `docker exec` (so checks never go through the control
 * channel under test, and never use host pids), and the upstream terminal-bash harness tuning.
 */
import { PassThrough } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import Docker from 'dockerode'
import { GenericContainer } from 'testcontainers'
import { expect } from 'vitest'
import type { TerminalSendOperation } from '@deepseek-ai/dsh-terminal'
import type { TerminalTuning } from '../../src/backend/world.ts'
import { disableRyukWhenAbsent } from '../../src/testcontainers/index.ts'

/** The project's test image (docker/ensure-world.sh builds it). */
export const IMAGE = process.env.DSH_REMOTE_IMAGE ?? 'dsh-remote-worlds/target:bookworm'

/** The users every important case runs as: root, and the image's unprivileged `agent` (uid 1000). */
export const USERS = [
  { label: 'root', user: 'root', uid: 0 },
  { label: 'agent', user: 'agent', uid: 1000 },
] as const

/** One engine connection for the helpers (default socket). */
export const docker = new Docker()

/** terminal-bash tuning of upstream's tests/local.spec.ts harness. */
export const UPSTREAM_TUNING: Required<Pick<TerminalTuning, 'pollIntervalMs' | 'exactProbeAfterMs' | 'idleSilenceMs' | 'handoffGraceMs' | 'timeoutMs' | 'disposeGraceMs' | 'scrollbackLines' | 'scrollbackMaxBytes' | 'maxReadBytes'>> = {
  pollIntervalMs: 10,
  exactProbeAfterMs: 20,
  idleSilenceMs: 250,
  handoffGraceMs: 250,
  timeoutMs: 2_000,
  disposeGraceMs: 500,
  scrollbackLines: 100,
  scrollbackMaxBytes: 32_768,
  maxReadBytes: 16_384,
}

/** The create options a test container may set; everything else is the helper's. */
export type TestContainerOptions = Pick<Docker.ContainerCreateOptions, 'Image' | 'Labels' | 'Env' | 'User' | 'HostConfig'>

/** GenericContainer with raw HostConfig fields (testcontainers has no builder for most of them). */
class TestContainer extends GenericContainer {
  withHostConfig(hostConfig: Docker.HostConfig): this {
    const { NetworkMode, ...rest } = hostConfig
    Object.assign(this.hostConfig, rest)
    if (NetworkMode !== undefined) this.withNetworkMode(NetworkMode)
    return this
  }
}

/**
 * Start a container the tests attach to, with testcontainers: the image (default the project
 * image) running `sleep infinity` under an init, NetworkMode none, plus `options`. Returns the
 * engine's handle, so tests pause, kill and remove it as any container.
 */
export async function startTestContainer(options: TestContainerOptions = {}): Promise<Docker.Container> {
  const environment = Object.fromEntries((options.Env ?? []).map(entry => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]))
  let container = new TestContainer(options.Image ?? IMAGE)
    .withCommand(['sleep', 'infinity'])
    .withLabels(options.Labels ?? {})
    .withEnvironment(environment)
    .withHostConfig({ Init: true, NetworkMode: 'none', ...options.HostConfig })
    .withAutoRemove(false)
  if (options.User !== undefined) container = container.withUser(options.User)
  await disableRyukWhenAbsent(docker)
  const started = await container.start()
  return docker.getContainer(started.getId())
}

/**
 * Whether the exec pool's standby for the next terminal runs in the container: a holder waiting
 * for its spawn frame (a dsh-pty with no shell under it, providers/remote/pty-holder/), or a TTY
 * standby (`sh ... dsh-standby`) where dsh-pty cannot run.
 */
export async function terminalStandbyRuns(containerId: string): Promise<boolean> {
  const rows = await containerProcesses(containerId)
  return rows.some(row => (row.cmdline.startsWith('/bin/sh -c') && row.cmdline.includes('dsh-standby')) || (row.comm === 'dsh-pty' && row.state !== 'Z' && !rows.some(child => child.ppid === row.pid)))
}

/** Result of a helper exec. */
export interface ExecResult {
  stdout: string
  stderr: string
  exitCode: number | null
}

/**
 * Run a command in the container through its own `docker exec` (not the world under test).
 * @param user - exec user; root by default so every /proc entry is readable.
 */
export async function execIn(containerId: string, cmd: string[], user = 'root'): Promise<ExecResult> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, User: user })
  const stream = await exec.start({ hijack: true, stdin: false })
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const out: Buffer[] = []
  const err: Buffer[] = []
  stdout.on('data', (chunk: Buffer) => out.push(chunk))
  stderr.on('data', (chunk: Buffer) => err.push(chunk))
  docker.modem.demuxStream(stream, stdout, stderr)
  await new Promise<void>((resolve, reject) => {
    stream.once('end', resolve)
    stream.once('close', resolve)
    stream.once('error', reject)
  })
  let info = await exec.inspect()
  for (let i = 0; i < 200 && info.Running; i++) {
    await delay(5)
    info = await exec.inspect()
  }
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), exitCode: info.ExitCode ?? null }
}

/** One row of the container's process table, read by the helper exec. */
export interface ContainerProcess {
  pid: number
  ppid: number
  pgrp: number
  session: number
  state: string
  comm: string
  cmdline: string
}

// Reads every /proc/PID/stat in the container (fields after the LAST ") ") plus cmdline, as JSON.
const PS_SCRIPT = String.raw`
import json, os
rows = []
for name in os.listdir('/proc'):
    if not name.isdigit() or int(name) == os.getpid():
        continue
    try:
        with open('/proc/%s/stat' % name, 'rb') as f:
            stat = f.read().decode('latin1')
        with open('/proc/%s/cmdline' % name, 'rb') as f:
            cmdline = f.read().replace(b'\0', b' ').decode('utf8', 'replace').strip()
    except OSError:
        continue
    comm = stat[stat.index('(') + 1:stat.rindex(') ')]
    fields = stat[stat.rindex(') ') + 2:].split()
    rows.append({'pid': int(name), 'state': fields[0], 'ppid': int(fields[1]), 'pgrp': int(fields[2]),
                 'session': int(fields[3]), 'comm': comm, 'cmdline': cmdline})
print(json.dumps(rows))
`

/** The container's whole process table (excluding the helper exec itself). */
export async function containerProcesses(containerId: string): Promise<ContainerProcess[]> {
  const result = await execIn(containerId, ['python3', '-c', PS_SCRIPT])
  expect(result.exitCode, result.stderr).toBe(0)
  return JSON.parse(result.stdout) as ContainerProcess[]
}

/** True when the state letter is a finished process (zombie or dead). */
export function isDead(state: string): boolean {
  return state === 'Z' || state === 'X' || state === 'x'
}

/** Is `pid` a live (non-zombie) process in the container? */
export async function aliveInContainer(containerId: string, pid: number): Promise<boolean> {
  const row = (await containerProcesses(containerId)).find(entry => entry.pid === pid)
  return row !== undefined && !isDead(row.state)
}

/**
 * Everything of the terminal whose shell had pid `shellPid` that is still alive in the container:
 * non-zombie processes whose session id is the shell's pid, plus their descendants by ppid and
 * the shell's own descendants (a `setsid` child leaves the session, not the tree), plus `extra`
 * pids the test tracked itself.
 */
export async function terminalLeftovers(containerId: string, shellPid: number, extra: readonly number[] = []): Promise<ContainerProcess[]> {
  const table = await containerProcesses(containerId)
  const members = new Set<number>(table.filter(row => row.session === shellPid || row.pid === shellPid || extra.includes(row.pid)).map(row => row.pid))
  let grew = true
  while (grew) {
    grew = false
    for (const row of table) {
      if (!members.has(row.pid) && members.has(row.ppid)) {
        members.add(row.pid)
        grew = true
      }
    }
  }
  return table.filter(row => members.has(row.pid) && !isDead(row.state))
}

/** Poll `read` until `done(value)` or the hang guard expires; returns the last value. */
export async function waitFor<T>(read: () => Promise<T> | T, done: (value: T) => boolean, guardMs = 10_000, stepMs = 20): Promise<T> {
  const deadline = Date.now() + guardMs
  let value = await read()
  while (!done(value) && Date.now() < deadline) {
    await delay(stepMs)
    value = await read()
  }
  return value
}

/**
 * Collect a send's output until it contains `expected` (upstream's waitForOutput): the
 * operation drops output once it settles, so this only sees what arrives while it is active.
 */
export async function waitForOutput(operation: TerminalSendOperation, expected: string, timeoutMs = 2_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  let output = ''
  while (!output.includes(expected) && Date.now() < deadline) {
    output += operation.readOutput().delta
    if (!output.includes(expected)) await delay(10)
  }
  expect(output).toContain(expected)
  return output
}

/** A send the test interrupts may settle on either readiness tier (see upstream's comment). */
export function expectReadyForNextSend(waitReason: string): void {
  expect(['stdin_read', 'inferred_idle']).toContain(waitReason)
}

/** Reject after `ms` with a named error: a generous hang guard, never a speed assertion. */
export function hangGuard<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const guard = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`hang guard: ${what} did not settle within ${ms} ms`)), ms)
  })
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer))
}

/** Settle state of a promise without awaiting it forever: 'pending' after `ms`. */
export async function settleState(promise: Promise<unknown>, ms: number): Promise<'fulfilled' | 'rejected' | 'pending'> {
  return Promise.race([
    promise.then(() => 'fulfilled' as const, () => 'rejected' as const),
    delay(ms).then(() => 'pending' as const),
  ])
}

/**
 * Unpause the container and return once the engine's state will not call it paused again.
 * Docker 20.10 applies containerd's TaskPaused and TaskResumed events after the API calls that
 * caused them return, and a TaskPaused applied after the unpause sets State.Paused once more
 * until its TaskResumed follows (moby daemon/monitor.go: EventPaused sets Paused when it is
 * false). In that moment ContainerInspect says paused and ContainerExecCreate refuses (seen in 1
 * of 800 pause-unpause rounds on 2 busy CPUs). The engine applies a container's events in order,
 * one queue per container (libcontainerd/remote/client.go), so once an exec created after the
 * unpause is seen ended by ExecInspect (its TaskExit came last), the late ones are applied.
 */
export async function unpauseSettled(containerId: string): Promise<void> {
  await docker.getContainer(containerId).unpause()
  const ranAfter = async (): Promise<boolean> => execIn(containerId, ['true']).then(result => result.exitCode === 0, () => false)
  expect(await waitFor(ranAfter, ran => ran), 'an exec created after the unpause ran and was seen ended').toBe(true)
}

/**
 * Wait until no exec of the container is starting: every exec the engine lists has either ended
 * or runs with its process started (ExecInspect `Pid`). Docker 20.10 (Debian's docker.io)
 * wedges for good when a container is paused while one of its execs starts (docs/how-it-works.md,
 * exec pool limits), so a test pauses a container only after this.
 */
export async function execsStarted(containerId: string, guardMs = 10_000): Promise<void> {
  const starting = async (): Promise<string[]> => {
    const info = await docker.getContainer(containerId).inspect()
    const execs = await Promise.all((info.ExecIDs ?? []).map(id => docker.getExec(id).inspect().catch(() => undefined)))
    return execs.flatMap(exec => exec !== undefined && exec.Running && !(exec.Pid > 0) ? [exec.ID] : [])
  }
  expect(await waitFor(starting, ids => ids.length === 0, guardMs), 'execs still starting').toEqual([])
}
