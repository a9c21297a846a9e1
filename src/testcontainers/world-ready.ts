/**
 * A testcontainers wait strategy that asks the world itself whether it can run a shell, instead
 * of waiting for a log line. A log-line strategy can miss a line the container printed before
 * the strategy attached, and a world image has nothing to print: its readiness is a fact of the
 * world (the engine execs, `/bin/sh` runs, `/proc` is there), so that is what is asked.
 * @module dsh-remote-worlds/testcontainers/world-ready
 */
import { once } from 'node:events'
import { setTimeout as delay } from 'node:timers/promises'
import type Dockerode from 'dockerode'
import type { BoundPorts, WaitStrategy } from 'testcontainers'
import { demuxDockerStream } from '../providers/docker/demux.ts'

/** The readiness question, as a POSIX sh script; its answer is this exact line. */
const QUESTION = 'test -r /proc/self/stat && echo dsh-world-ready'
const ANSWER = 'dsh-world-ready'
/** What the question prints when the workspace root is no directory the user may enter. */
const NO_WORKSPACE = 'dsh-no-workspace-root'

/** How often the world is asked while it does not answer yet (ms). */
const POLL_MS = 50

/** Default bound of the whole wait (ms), as testcontainers' own strategies. */
const DEFAULT_STARTUP_TIMEOUT_MS = 60_000

/** Run one exec and collect its output (both streams, multiplexed or not: only the answer matters). */
async function ask(container: Dockerode.Container, user: string | undefined, workspaceRoot: string | undefined): Promise<{ output: string; exitCode: number | null }> {
  // The root travels as an argument ($1), never inside the script text.
  const question = workspaceRoot === undefined ? QUESTION : `{ test -d "$1" && test -x "$1"; } || echo ${NO_WORKSPACE}; ${QUESTION}`
  const exec = await container.exec({ Cmd: ['/bin/sh', '-c', question, 'sh', ...(workspaceRoot !== undefined ? [workspaceRoot] : [])], AttachStdout: true, AttachStderr: true, ...(user !== undefined ? { User: user } : {}) })
  const stream = await exec.start({ hijack: true, stdin: false })
  const chunks: Buffer[] = []
  const { stdout, stderr } = demuxDockerStream(stream)
  stdout.on('data', (chunk: Buffer) => chunks.push(chunk))
  stderr.on('data', (chunk: Buffer) => chunks.push(chunk))
  // Both end when the exec's stream ends, closes or fails (demux.ts): then every byte is in.
  await Promise.all([once(stdout, 'end'), once(stderr, 'end')])
  const info = await exec.inspect()
  return { output: Buffer.concat(chunks).toString('utf8').trim(), exitCode: info.ExitCode ?? null }
}

/** The engine's answer for an exec user the image does not know: asking again cannot help. */
const UNKNOWN_USER = /unable to find user/

/**
 * Ready when an exec of `/bin/sh` in the container, as the world's user, answers the readiness
 * question. Never reads logs, so a line printed before it attached cannot be missed.
 */
export class WorldReadyWaitStrategy implements WaitStrategy {
  private startupTimeoutMs = DEFAULT_STARTUP_TIMEOUT_MS
  private startupTimeoutSet = false
  private readonly user: string | undefined
  private readonly workspaceRoot: string | undefined

  /**
   * @param user - exec user of the question (the world's user); default the container's.
   * @param workspaceRoot - a directory the user must be able to enter (the sandbox's workspace
   *   root); a world without it fails the start at once.
   */
  constructor(user?: string, workspaceRoot?: string) {
    this.user = user
    this.workspaceRoot = workspaceRoot
  }

  /**
   * Ask until the world answers.
   * @throws Error naming the last answer (or the engine's error) when the startup timeout passes,
   *   and at once when the engine does not know the exec user or the workspace root is missing.
   */
  async waitUntilReady(container: Dockerode.Container, _boundPorts: BoundPorts, startTime?: Date): Promise<void> {
    const deadline = (startTime?.getTime() ?? Date.now()) + this.startupTimeoutMs
    let last = 'no answer'
    for (;;) {
      let answer: { output: string; exitCode: number | null } | undefined
      try {
        answer = await ask(container, this.user, this.workspaceRoot)
      } catch (error) {
        last = (error as Error).message
      }
      if (answer !== undefined) {
        const { output, exitCode } = answer
        if (exitCode === 0 && output.includes(NO_WORKSPACE)) throw new Error(`the world in container ${container.id.slice(0, 12)} has no workspace root ${this.workspaceRoot} that ${this.user ?? 'its user'} may enter`)
        if (exitCode === 0 && output.includes(ANSWER)) return
        last = `exit ${exitCode}: ${JSON.stringify(output.slice(-200))}`
        if (UNKNOWN_USER.test(output)) throw new Error(`the world in container ${container.id.slice(0, 12)} cannot run /bin/sh as ${this.user ?? 'its user'}: ${output.slice(-200)}`)
      }
      if (Date.now() >= deadline) throw new Error(`the world in container ${container.id.slice(0, 12)} did not answer within ${this.startupTimeoutMs} ms that it can run /bin/sh (last: ${last})`)
      await delay(POLL_MS)
    }
  }

  withStartupTimeout(startupTimeoutMs: number): this {
    this.startupTimeoutMs = startupTimeoutMs
    this.startupTimeoutSet = true
    return this
  }

  isStartupTimeoutSet(): boolean {
    return this.startupTimeoutSet
  }

  getStartupTimeout(): number {
    return this.startupTimeoutMs
  }
}
