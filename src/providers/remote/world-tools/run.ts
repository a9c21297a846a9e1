/**
 * Run one short POSIX `sh` script in a world, as its user, with bytes on its stdin, and collect
 * what it printed: how the world tools are checked and copied in (install.ts).
 * @module dsh-remote-worlds/providers/remote/world-tools/run
 */
import { TransportError } from '../errors.ts'
import type { WorldOwner } from '../world-owner.ts'

/** What a script printed and how it ended. */
export interface WorldScriptResult {
  /** Exit code; null when the world reported a signal or nothing. */
  exitCode: number | null
  /** stdout (UTF-8, at most 64 KiB kept). */
  stdout: string
  /** stderr (UTF-8, at most 64 KiB kept). */
  stderr: string
}

const KEEP_BYTES = 64 * 1024

/**
 * Run `script` with `input` on its stdin (then EOF).
 * @throws TransportError when the world broke before the script ended; the owner's open errors.
 */
export async function runInWorld(owner: Pick<WorldOwner, 'openProcess' | 'describe'>, script: string, input?: Buffer): Promise<WorldScriptResult> {
  const transport = await owner.openProcess(script)
  // Listeners first: a script that ends at once has its bytes and end queued already.
  const collect = (stream: NodeJS.ReadableStream): Promise<string> => new Promise(resolve => {
    const chunks: Buffer[] = []
    let kept = 0
    stream.on('data', (chunk: Buffer) => {
      if (kept < KEEP_BYTES) { chunks.push(chunk); kept += chunk.length }
    })
    const done = (): void => resolve(Buffer.concat(chunks).subarray(0, KEEP_BYTES).toString('utf8'))
    stream.once('end', done)
    stream.once('close', done)
    stream.once('error', done)
  })
  const stdout = collect(transport.stdout)
  const stderr = collect(transport.stderr)
  const stdin = transport.stdin
  if (stdin !== undefined) {
    // A script that exits without reading all its input closes the pipe: EPIPE is its answer,
    // which its exit status tells, not an error of ours.
    stdin.on('error', () => undefined)
    if (input !== undefined && input.length > 0) stdin.write(input)
    stdin.end()
  }
  try {
    const [out, err] = await Promise.all([stdout, stderr])
    const outcome = await transport.exit()
    return { exitCode: outcome.exitCode, stdout: out, stderr: err }
  } catch (error) {
    if (error instanceof TransportError) throw error
    throw new TransportError(`${owner.describe()}: a setup script failed: ${(error as Error).message}`, { cause: error })
  } finally {
    transport.close()
  }
}
