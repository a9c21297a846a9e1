/**
 * The pre-started exec programs (src/providers/docker/exec-pool/boot-scripts.ts) run by a real
 * local `sh` over pipes, as a non-TTY Docker exec runs the launcher: readiness, runs framed by
 * their end lines on both streams with the wrapper's status, stdin kept from the programs, and
 * the end at EOF. The Docker world's own tests (test/docker/exec-pool.test.ts) cover the engine.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import { FRAME_TAG, LAUNCHER_SCRIPT, READY_TAG, specBytes } from '../../src/providers/docker/exec-pool/boot-scripts.ts'

/** A launcher over pipes; `next(stream, text)` resolves once `text` appeared on that stream. */
function localLauncher() {
  const child = spawn('sh', ['-c', LAUNCHER_SCRIPT, 'dsh-launcher', 'n0'], { stdio: ['pipe', 'pipe', 'pipe'] })
  const seen = { stdout: '', stderr: '' }
  const waiters: { stream: 'stdout' | 'stderr'; text: string; resolve: () => void }[] = []
  const check = (): void => {
    for (const waiter of [...waiters]) {
      if (!seen[waiter.stream].includes(waiter.text)) continue
      waiters.splice(waiters.indexOf(waiter), 1)
      waiter.resolve()
    }
  }
  child.stdout.on('data', (chunk: Buffer) => { seen.stdout += chunk.toString('utf8'); check() })
  child.stderr.on('data', (chunk: Buffer) => { seen.stderr += chunk.toString('utf8'); check() })
  const next = (stream: 'stdout' | 'stderr', text: string): Promise<void> => new Promise(resolve => { waiters.push({ stream, text, resolve }); check() })
  return { child, seen, next }
}

describe('the launcher program over a local sh', () => {
  it('announces itself, frames each run on both streams with the wrapper status, and keeps its stdin from the programs', async () => {
    const { child, seen, next } = localLauncher()
    await next('stdout', `${READY_TAG}n0:ready\n`)
    expect(seen.stdout).toBe(`${READY_TAG}n0:ready\n`)
    // A multi-line script with a quoted newline, a backslash and a byte ISIG would act on in a tty.
    child.stdin.write(specBytes("printf 'a\\\\b\\n'; printf 'two\nlines\\n'; printf '\x03err' >&2\nread x && echo stole-stdin\nexit 3", 'f1'))
    await next('stderr', `${FRAME_TAG}f1:3:\n`)
    await next('stdout', `${FRAME_TAG}f1:3:\n`)
    expect(seen.stdout).toBe(`${READY_TAG}n0:ready\na\\b\ntwo\nlines\n${FRAME_TAG}f1:3:\n`)
    expect(seen.stderr).toBe(`\x03err${FRAME_TAG}f1:3:\n`)
    // The next run, on the same process.
    child.stdin.write(specBytes('echo second', 'f2'))
    await next('stdout', `${FRAME_TAG}f2:0:\n`)
    expect(seen.stdout.endsWith(`${FRAME_TAG}f1:3:\nsecond\n${FRAME_TAG}f2:0:\n`)).toBe(true)
    child.stdin.end()
    const [code] = await once(child, 'exit')
    expect(code).toBe(0)
  })

  it('ends a run only when every holder of its streams closed them: a background writer comes before the end line', async () => {
    const { child, seen, next } = localLauncher()
    await next('stdout', 'ready\n')
    // `early` is written before the background writer starts: the order below is the pipe's, not a race's.
    child.stdin.write(specBytes('echo early; (sleep 0.3; echo late) &', 'f1'))
    await next('stdout', `${FRAME_TAG}f1:0:\n`)
    expect(seen.stdout.slice(seen.stdout.indexOf('ready\n') + 6)).toBe(`early\nlate\n${FRAME_TAG}f1:0:\n`)
    child.stdin.end()
    await once(child, 'exit')
  })

  it('a killed wrapper ends its run with the status the shell saw (128+9)', async () => {
    const { child, next } = localLauncher()
    await next('stdout', 'ready\n')
    child.stdin.write(specBytes('kill -KILL $$', 'f1'))
    await next('stdout', `${FRAME_TAG}f1:137:\n`)
    await next('stderr', `${FRAME_TAG}f1:137:\n`)
    child.stdin.end()
    await once(child, 'exit')
  })
})
