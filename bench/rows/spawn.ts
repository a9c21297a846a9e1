/**
 * The ordinary-process rows (the seam's `spawn`, what the bash tool and language servers use):
 * - `spawn-to-exit of true`: spawn() to `done`, pipes drained (the bare round trip);
 * - `... (bash tool stdio)`: the same with dsh-bash-local's collect + spill stdio (a remote world
 *   tees both streams into spill files in the world; the local provider spills lazily);
 * - `100 MB stdout throughput`: spawn() to `done` of `head -c 100MiB /dev/zero` on a pipe the
 *   bench drains (MB/s = 104.9 / seconds).
 * @module bench/rows/spawn
 */
import type { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import { STDOUT_THROUGHPUT_BYTES, type SampleTable, pushSample, withTimeout } from '../timing.ts'
import type { BenchTarget } from '../worlds.ts'

/** The rows, in report order. */
export const SPAWN_METRICS = [
  'spawn-to-exit of true',
  'spawn-to-exit of true (bash tool stdio)',
  '100 MB stdout throughput',
] as const

/** The stdio the upstream bash executor (dsh-bash-local) asks for: both streams collected with a spill. */
const BASH_TOOL_STDIO = {
  stdin: 'ignore',
  stdout: { maxBytes: 64_000, spill: { maxBytes: 64 * 1024 * 1024 } },
  stderr: { maxBytes: 64_000, spill: { maxBytes: 64 * 1024 * 1024 } },
} as const

/** Measure the rows into `samples`: `runs` round trips each, min(runs, 5) throughput runs. */
export async function spawnRuns(target: BenchTarget, runs: number, samples: SampleTable): Promise<void> {
  const runtime = target.world.runtime
  const exit = async (spec: Parameters<SubprocessRuntime['spawn']>[0]): Promise<number> => {
    const started = performance.now()
    const handle = runtime.spawn(spec)
    handle.stdout?.resume()
    handle.stderr?.resume()
    const outcome = await withTimeout(handle.done, `spawn ${spec.argv.join(' ')}`)
    const ms = performance.now() - started
    if (outcome.exitCode !== 0) throw new Error(`bench: ${spec.argv.join(' ')} exited ${JSON.stringify(outcome)}`)
    await withTimeout(handle.waitForExit(), 'waitForExit')
    return ms
  }
  const base = { cwd: '/tmp', graceMs: 1_000 }
  // Warm-up (discarded): the spill directory and the JIT.
  await exit({ ...base, argv: ['true'], stdio: BASH_TOOL_STDIO })
  for (let run = 0; run < runs; run += 1) {
    pushSample(samples, 'spawn-to-exit of true', { ms: await exit({ ...base, argv: ['true'], stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } }) })
    pushSample(samples, 'spawn-to-exit of true (bash tool stdio)', { ms: await exit({ ...base, argv: ['true'], stdio: BASH_TOOL_STDIO }) })
  }
  for (let run = 0; run < Math.min(runs, 5); run += 1) {
    let bytes = 0
    const started = performance.now()
    const handle = runtime.spawn({ ...base, argv: ['head', '-c', String(STDOUT_THROUGHPUT_BYTES), '/dev/zero'], stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } })
    handle.stdout!.on('data', (chunk: Buffer) => { bytes += chunk.length })
    handle.stderr!.resume()
    await withTimeout(handle.done, '100 MB stdout', 120_000)
    if (!handle.stdout!.readableEnded) await withTimeout(new Promise(resolve => handle.stdout!.once('end', resolve)), '100 MB stdout end')
    const ms = performance.now() - started
    if (bytes !== STDOUT_THROUGHPUT_BYTES) throw new Error(`bench: 100 MB stdout delivered ${bytes} bytes`)
    pushSample(samples, '100 MB stdout throughput', { ms })
  }
}
