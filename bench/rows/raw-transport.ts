/**
 * The raw transports' own throughput (issue 14), beside the product's `100 MB stdout
 * throughput` row of the same world and run: the same `head -c 100MiB /dev/zero`, moved by the
 * bare transport library with no project code on the data path; and the other way, 100 MiB
 * written by this client into a `wc -c` in the world (the `stdin` rows), beside a download the
 * world makes through this client (issue 34: `egress 100 MB download` moves its bytes into the
 * world, as stdin does, and a transport need not be as fast both ways):
 * - `raw dockerode exec 100 MB stdout`: a plain dockerode exec in a throwaway container of the
 *   project image, its multiplexed stream split by `docker.modem.demuxStream`;
 * - `raw ssh2 exec 100 MB stdout`: a plain ssh2 exec channel on a connection made by the
 *   provider's own connect path (the credentials and trust the runtime resolved).
 * The report divides the product rows' MB/s by these (bench/report.ts): `100 MB stdout
 * throughput` and `fs readBytes (100 MB)`. The plain execs themselves ({@link plainDockerExec},
 * {@link plainSshExec}) also time `rg` run directly in a world, beside the grep tool (rows/fs.ts).
 * @module bench/rows/raw-transport
 */
import { Writable } from 'node:stream'
import { finished } from 'node:stream/promises'
import Docker from 'dockerode'
import type { Client, ClientChannel } from 'ssh2'
import { connectSsh } from '../../src/providers/ssh/connect.ts'
import { SshRuntimeConfig, buildSshWorld } from '../../src/providers/ssh/ssh-runtime.ts'
import { STDOUT_THROUGHPUT_BYTES, type Sample, type SampleTable, withTimeout } from '../timing.ts'

export const RAW_DOCKER_METRIC = 'raw dockerode exec 100 MB stdout'
export const RAW_SSH_METRIC = 'raw ssh2 exec 100 MB stdout'
export const RAW_DOCKER_STDIN_METRIC = 'raw dockerode exec 100 MB stdin'
export const RAW_SSH_STDIN_METRIC = 'raw ssh2 exec 100 MB stdin'

/** Payload bytes of each raw row (100 MiB, as the product row), for its MB/s. */
export const RAW_TRANSPORT_BYTES: Readonly<Record<string, number>> = {
  [RAW_DOCKER_METRIC]: STDOUT_THROUGHPUT_BYTES,
  [RAW_SSH_METRIC]: STDOUT_THROUGHPUT_BYTES,
  [RAW_DOCKER_STDIN_METRIC]: STDOUT_THROUGHPUT_BYTES,
  [RAW_SSH_STDIN_METRIC]: STDOUT_THROUGHPUT_BYTES,
}

/** The raw row of each remote world (by world name) that moves bytes out of the world, beside its `100 MB stdout throughput`. */
export const RAW_METRIC_OF_WORLD: Readonly<Record<string, string>> = {
  docker: RAW_DOCKER_METRIC,
  ssh: RAW_SSH_METRIC,
}

/** The raw row of each remote world (by world name) that moves bytes into the world: beside a download the world makes through this client. */
export const RAW_STDIN_METRIC_OF_WORLD: Readonly<Record<string, string>> = {
  docker: RAW_DOCKER_STDIN_METRIC,
  ssh: RAW_SSH_STDIN_METRIC,
}

/** What every raw stdin sample runs: counts its stdin, which must be exactly the payload. */
const STDIN_ARGV = ['wc', '-c'] as const

/** The block a raw stdin sample writes, again and again (1 MiB of zeros). */
const STDIN_BLOCK = Buffer.alloc(1 << 20)

/**
 * Write {@link STDOUT_THROUGHPUT_BYTES} zeros to `sink` in {@link STDIN_BLOCK}s, waiting for
 * 'drain' whenever a write says so, then end it (EOF for the world's `wc -c`).
 */
async function writePayload(sink: NodeJS.WritableStream): Promise<void> {
  for (let left = STDOUT_THROUGHPUT_BYTES; left > 0;) {
    const block = left >= STDIN_BLOCK.length ? STDIN_BLOCK : STDIN_BLOCK.subarray(0, left)
    left -= block.length
    if (!sink.write(block)) await new Promise<void>(resolve => sink.once('drain', () => resolve()))
  }
  sink.end()
}

/** What every raw sample runs: exactly {@link STDOUT_THROUGHPUT_BYTES} bytes on stdout. */
const ARGV = ['head', '-c', String(STDOUT_THROUGHPUT_BYTES), '/dev/zero'] as const
const COMMAND = ARGV.join(' ')

/** Runs of a raw row at most (as the product row: min(runs, 5)). */
const MAX_RUNS = 5

/** Bound of one raw sample (ms), as the product row's. */
const SAMPLE_STEP_MS = 120_000

/**
 * `measure` min(`runs`, {@link MAX_RUNS}) times after one discarded warm-up; each call returns
 * one sample (ms).
 */
async function samplesOf(runs: number, measure: () => Promise<number>): Promise<Sample[]> {
  const samples: Sample[] = []
  for (let run = 0; run <= Math.min(runs, MAX_RUNS); run += 1) {
    const ms = await measure()
    if (run > 0) samples.push({ ms })
  }
  return samples
}

/** Throw unless `bytes` is the payload: a short read would inflate the MB/s. */
function expectPayload(metric: string, bytes: number): void {
  if (bytes !== STDOUT_THROUGHPUT_BYTES) throw new Error(`bench: ${metric} delivered ${bytes} bytes, expected ${STDOUT_THROUGHPUT_BYTES}`)
}

/** A Writable that hands what is written to it to `onChunk` and drops it. */
function sinkOf(onChunk: (chunk: Buffer) => void): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, callback) {
      onChunk(chunk)
      callback()
    },
  })
}

/** What one plain exec did: its wall time, exit code and stderr byte count. */
export interface PlainExecResult {
  /** From the exec's creation (Docker) or `client.exec()` (SSH) to its stream's end / channel's close (ms). */
  ms: number
  exitCode: number | null
  stderrBytes: number
}

/** A program for {@link plainDockerExec}. */
export interface PlainDockerCommand {
  argv: readonly string[]
  /** The exec's working directory (default: the container's). */
  workingDir?: string | undefined
  /** The exec user (default: the container's). */
  user?: string | undefined
  /** For the timeout's message. */
  what: string
  timeoutMs: number
}

/**
 * One plain dockerode exec in `container`, with no project code on the data path: create
 * (AttachStdout/AttachStderr), `start({ hijack: true, stdin: false })`, `docker.modem.demuxStream`
 * into `onStdout` and a stderr counter, until the stream ends (the timed span); then the
 * ExecInspect for the exit code (untimed).
 */
export async function plainDockerExec(docker: Docker, container: Docker.Container, command: PlainDockerCommand, onStdout: (chunk: Buffer) => void): Promise<PlainExecResult> {
  let stderrBytes = 0
  const stdout = sinkOf(onStdout)
  const stderr = sinkOf(chunk => { stderrBytes += chunk.length })
  const started = performance.now()
  const exec = await container.exec({
    Cmd: [...command.argv],
    AttachStdout: true,
    AttachStderr: true,
    ...(command.workingDir !== undefined ? { WorkingDir: command.workingDir } : {}),
    ...(command.user !== undefined ? { User: command.user } : {}),
  })
  const stream = await exec.start({ hijack: true, stdin: false })
  docker.modem.demuxStream(stream, stdout, stderr)
  await withTimeout(finished(stream, { writable: false }), command.what, command.timeoutMs)
  const ms = performance.now() - started
  stream.destroy()
  // Every chunk demuxStream read was written before the end; ending the sinks flushes them.
  stdout.end()
  stderr.end()
  await Promise.all([finished(stdout), finished(stderr)])
  const { ExitCode } = await exec.inspect()
  return { ms, exitCode: ExitCode, stderrBytes }
}

/**
 * One plain ssh2 exec channel of `command` on `client`, stdout to `onStdout`, stderr counted,
 * until the channel closes (`client.exec()` to close: the timed span).
 */
export async function plainSshExec(client: Client, command: string, what: string, timeoutMs: number, onStdout: (chunk: Buffer) => void): Promise<PlainExecResult> {
  let stderrBytes = 0
  let exitCode: number | null = null
  const started = performance.now()
  const closed = new Promise<void>((resolve, reject) => {
    client.exec(command, (error: Error | undefined, channel: ClientChannel) => {
      if (error !== undefined) {
        reject(error)
        return
      }
      channel.on('data', onStdout)
      channel.stderr.on('data', (chunk: Buffer) => { stderrBytes += chunk.length })
      channel.once('exit', (code: number | null) => { exitCode = code })
      channel.once('close', () => resolve())
    })
  })
  await withTimeout(closed, what, timeoutMs)
  return { ms: performance.now() - started, exitCode, stderrBytes }
}

/**
 * `raw dockerode exec 100 MB stdout`: a throwaway container of `image` (no network, an init,
 * `sleep infinity`, labelled `labels` so the bench's sweep removes it if the run dies), in which
 * each sample is one {@link plainDockerExec} of {@link ARGV} (no shell), its stdout counted
 * (exec create to the stream's end, ms); and `raw dockerode exec 100 MB stdin`: each sample one
 * plain exec of `wc -c` with its stdin attached (hijacked), the payload written and the stream
 * half-closed, until its stream ends (exec create to end, ms). The container is removed after.
 * @param labels - the bench's labels (name and value) for its containers.
 * @throws Error when a sample's stdout (or `wc -c`'s count) is not exactly the payload, or the
 *   exec exits non-zero.
 */
export async function measureRawDockerExec(image: string, labels: Readonly<Record<string, string>>, runs: number): Promise<SampleTable> {
  const docker = new Docker()
  const container = await docker.createContainer({
    Image: image,
    Cmd: ['sleep', 'infinity'],
    Labels: { ...labels },
    HostConfig: { NetworkMode: 'none', Init: true },
  })
  try {
    await container.start()
    const once = async (): Promise<number> => {
      let bytes = 0
      const result = await plainDockerExec(docker, container, { argv: ARGV, what: RAW_DOCKER_METRIC, timeoutMs: SAMPLE_STEP_MS }, chunk => { bytes += chunk.length })
      expectPayload(RAW_DOCKER_METRIC, bytes)
      if (result.exitCode !== 0) throw new Error(`bench: ${RAW_DOCKER_METRIC}: the exec exited ${result.exitCode} (${result.stderrBytes} bytes on stderr)`)
      return result.ms
    }
    const stdinOnce = async (): Promise<number> => {
      let counted = ''
      const started = performance.now()
      const exec = await container.exec({ Cmd: [...STDIN_ARGV], AttachStdin: true, AttachStdout: true, AttachStderr: true })
      const stream = await exec.start({ hijack: true, stdin: true })
      docker.modem.demuxStream(stream, sinkOf(chunk => { counted += chunk.toString('utf8') }), sinkOf(() => undefined))
      const ended = finished(stream, { writable: false })
      await writePayload(stream)
      await withTimeout(ended, RAW_DOCKER_STDIN_METRIC, SAMPLE_STEP_MS)
      const ms = performance.now() - started
      stream.destroy()
      expectPayload(RAW_DOCKER_STDIN_METRIC, Number(counted.trim()))
      const { ExitCode } = await exec.inspect()
      if (ExitCode !== 0) throw new Error(`bench: ${RAW_DOCKER_STDIN_METRIC}: the exec exited ${ExitCode}`)
      return ms
    }
    return new Map([[RAW_DOCKER_METRIC, await samplesOf(runs, once)], [RAW_DOCKER_STDIN_METRIC, await samplesOf(runs, stdinOnce)]])
  } finally {
    await container.remove({ force: true }).catch(() => undefined)
  }
}

/**
 * `raw ssh2 exec 100 MB stdout`: one connection through the provider's connect path, on which
 * each sample opens an exec channel of {@link COMMAND} and counts its stdout until the channel
 * closes (exec call to close, ms); and `raw ssh2 exec 100 MB stdin`: an exec channel of `wc -c`
 * to which the payload is written, then EOF, until the channel closes (exec call to close, ms).
 * The connection is closed after.
 * @param config - the SSH runtime config of the world under test.
 * @throws Error when a sample's stdout (or `wc -c`'s count) is not exactly the payload, or the
 *   command exits non-zero.
 */
export async function measureRawSshExec(config: SshRuntimeConfig, runs: number): Promise<SampleTable> {
  const world = await buildSshWorld(SshRuntimeConfig.parse(config))
  try {
    const { client } = await withTimeout(connectSsh(world.options.hop, world.options.jumps, world.options.timings), 'ssh connect')
    try {
      const once = async (): Promise<number> => {
        let bytes = 0
        const result = await plainSshExec(client, COMMAND, RAW_SSH_METRIC, SAMPLE_STEP_MS, chunk => { bytes += chunk.length })
        expectPayload(RAW_SSH_METRIC, bytes)
        if (result.exitCode !== 0) throw new Error(`bench: ${RAW_SSH_METRIC}: the command exited ${String(result.exitCode)}`)
        return result.ms
      }
      const stdinOnce = async (): Promise<number> => {
        let counted = ''
        let exitCode: number | null = null
        const started = performance.now()
        const closed = new Promise<void>((resolve, reject) => {
          client.exec(STDIN_ARGV.join(' '), (error: Error | undefined, channel: ClientChannel) => {
            if (error !== undefined) {
              reject(error)
              return
            }
            channel.on('data', (chunk: Buffer) => { counted += chunk.toString('utf8') })
            channel.stderr.resume()
            channel.once('exit', (code: number | null) => { exitCode = code })
            channel.once('close', () => resolve())
            writePayload(channel).catch(reject)
          })
        })
        await withTimeout(closed, RAW_SSH_STDIN_METRIC, SAMPLE_STEP_MS)
        const ms = performance.now() - started
        expectPayload(RAW_SSH_STDIN_METRIC, Number(counted.trim()))
        if (exitCode !== 0) throw new Error(`bench: ${RAW_SSH_STDIN_METRIC}: the command exited ${String(exitCode)}`)
        return ms
      }
      return new Map([[RAW_SSH_METRIC, await samplesOf(runs, once)], [RAW_SSH_STDIN_METRIC, await samplesOf(runs, stdinOnce)]])
    } finally {
      const gone = new Promise<void>(resolve => client.once('close', () => resolve()))
      client.end()
      await withTimeout(gone, 'ssh disconnect').catch(() => undefined)
    }
  } finally {
    await world.dispose()
  }
}
