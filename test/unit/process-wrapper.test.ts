/**
 * The process wrapper (process-wrapper.ts), its trailer scanner, the exit-fact mapping and the
 * output collector. The wrapper is also run for real by this machine's `sh -c`, so the marker
 * and trailer the scanners expect are the ones the script prints.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { BoundaryScanner } from '../../src/providers/remote/boundary.ts'
import { RemoteOutputCollector } from '../../src/providers/remote/output.ts'
import { outcomeOfTrailer } from '../../src/providers/remote/process.ts'
import { TrailerScanner, buildProcessWrapper, type ProcessWrapperOptions } from '../../src/providers/remote/process-wrapper.ts'

const NONCE = '0123456789abcdef0123456789abcdef'
const dir = mkdtempSync(join(tmpdir(), 'dsh-wrapper-test-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('TrailerScanner', () => {
  const trailer = Buffer.from(`DSHE${NONCE}:143:Terminated\n`, 'latin1')
  const before = Buffer.from([0x65, 0x72, 0x72, 0x0a, 0xe4, 0xb8])
  const after = Buffer.from([0x96, 0x00, 0xff, 0x44, 0x53, 0x48])

  it('removes the trailer exactly, wherever the chunks split, and keeps every other byte', () => {
    const all = Buffer.concat([before, trailer, after])
    for (let a = 0; a <= all.length; a++) {
      for (const b of [a, Math.min(all.length, a + 7), all.length]) {
        const scanner = new TrailerScanner(NONCE)
        const out = Buffer.concat([scanner.push(all.subarray(0, a)), scanner.push(all.subarray(a, b)), scanner.push(all.subarray(b)), scanner.flush()])
        expect(out.equals(Buffer.concat([before, after]))).toBe(true)
        expect(scanner.trailer).toEqual({ status: 143, report: 'Terminated' })
      }
    }
  })

  it('hands back a held partial prefix that never completed, and ignores another nonce', () => {
    const scanner = new TrailerScanner(NONCE)
    expect(scanner.push(Buffer.from('abcDSHE0123')).toString()).toBe('abc')
    expect(scanner.flush().toString()).toBe('DSHE0123')
    const other = new TrailerScanner(NONCE)
    const forged = Buffer.from('DSHEffffffffffffffffffffffffffffffff:0:\n')
    expect(other.push(forged).equals(forged)).toBe(true)
    expect(other.trailer).toBeUndefined()
  })
})

describe('outcomeOfTrailer', () => {
  it('maps the status and the shell report to exit facts', () => {
    const none = new Set<number>()
    expect(outcomeOfTrailer({ status: 0, report: '' }, none)).toEqual({ exitCode: 0, signal: null })
    expect(outcomeOfTrailer({ status: 128, report: '' }, none)).toEqual({ exitCode: 128, signal: null })
    expect(outcomeOfTrailer({ status: 137, report: 'Killed' }, none)).toEqual({ exitCode: null, signal: 'SIGKILL' })
    expect(outcomeOfTrailer({ status: 139, report: 'Segmentation fault (core dumped)' }, none)).toEqual({ exitCode: null, signal: 'SIGSEGV' })
    expect(outcomeOfTrailer({ status: 137, report: '' }, none)).toEqual({ exitCode: 137, signal: null })
    // No report (SIGINT/SIGPIPE, or a shell that reports nothing): the handle's own delivery decides.
    expect(outcomeOfTrailer({ status: 143, report: '' }, new Set([15]))).toEqual({ exitCode: null, signal: 'SIGTERM' })
    expect(outcomeOfTrailer({ status: 255, report: 'x' }, none)).toEqual({ exitCode: 255, signal: null })
  })
})

describe('RemoteOutputCollector', () => {
  it('keeps the tail, reads by offset without consuming, and advertises the spill only when it is whole and needed', () => {
    const collector = new RemoteOutputCollector(4, 10)
    collector.attachSpill('/tmp/s')
    collector.push(Buffer.from('abc'))
    expect(collector.readFrom(0)).toEqual({ text: 'abc', nextOffset: 3, lossy: false })
    expect(collector.spillDisposable).toBe(true)
    collector.push(Buffer.from('defg'))
    expect(collector.readFrom(0)).toEqual({ text: 'defg', nextOffset: 7, lossy: true, spillPath: '/tmp/s' })
    expect(collector.readFrom(5)).toEqual({ text: 'fg', nextOffset: 7, lossy: false, spillPath: '/tmp/s' })
    expect(collector.spillDisposable).toBe(false)
    collector.push(Buffer.from('hijk'))
    expect(collector.readFrom(0)).toEqual({ text: 'hijk', nextOffset: 11, lossy: true })
    expect(collector.spillDisposable).toBe(true)
    const cut = new RemoteOutputCollector(1, 100)
    cut.attachSpill('/tmp/c')
    cut.push(Buffer.from('xy'))
    cut.invalidateSpill()
    expect(cut.readFrom(0)).toEqual({ text: 'y', nextOffset: 2, lossy: true })
  })
})

/** Run a wrapper with this machine's sh (in a session of its own when `leader`); returns raw stdout and stderr. */
async function runLocally(options: Omit<ProcessWrapperOptions, 'statusFile'>, stdin?: string, leader = false): Promise<{ stdout: Buffer; stderr: Buffer; nonce: string; exitCode: number | null; signal: string | null }> {
  const wrapper = buildProcessWrapper({ ...options, statusFile: join(dir, `status-${Math.random()}`) })
  const child = spawn('sh', ['-c', wrapper.script], { stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], detached: leader })
  if (stdin !== undefined) child.stdin!.end(stdin)
  const out: Buffer[] = []
  const err: Buffer[] = []
  child.stdout!.on('data', (chunk: Buffer) => out.push(chunk))
  child.stderr!.on('data', (chunk: Buffer) => err.push(chunk))
  const [exitCode, signal] = await new Promise<[number | null, string | null]>(resolve => child.once('close', (code, sig) => resolve([code, sig])))
  return { stdout: Buffer.concat(out), stderr: Buffer.concat(err), nonce: wrapper.nonce, exitCode, signal }
}

function strip(run: { stdout: Buffer; stderr: Buffer; nonce: string }): { pid: number; extra: number[] | undefined; stdout: string; stderr: string; trailer: unknown } {
  const event = new BoundaryScanner(run.nonce, undefined, { process: true }).push(run.stdout)
  if (event.kind !== 'started') throw new Error(`no start marker: ${JSON.stringify(event)}`)
  const scanner = new TrailerScanner(run.nonce)
  const stderr = Buffer.concat([scanner.push(run.stderr), scanner.flush()])
  return { pid: event.pid, extra: event.extra, stdout: event.rest.toString('utf8'), stderr: stderr.toString('utf8'), trailer: scanner.trailer }
}

describe('buildProcessWrapper, run by a real sh', () => {
  const env = { PATH: '/usr/bin:/bin', ONLY: 'this' }

  it('publishes pid, start time and wrapper pid; the program gets exactly env and its own session', async () => {
    const run = strip(await runLocally({ argv: ['sh', '-c', 'env; read -r _ _ _ _ pg sid _ </proc/$$/stat; echo "$$ $pg $sid"; echo e >&2; exit 3'], cwd: dir, env, stdin: 'ignore' }))
    const [envText, ids] = [run.stdout.split('\n').slice(0, -2).join('\n'), run.stdout.split('\n').at(-2)]
    // (PWD is the inner sh's own.)
    expect(envText.split('\n').sort()).toEqual(['ONLY=this', 'PATH=/usr/bin:/bin', `PWD=${dir}`])
    expect(ids).toBe(`${run.pid} ${run.pid} ${run.pid}`)
    // Its start time, then the wrapper's pid and start time.
    expect(run.extra).toHaveLength(3)
    expect(run.extra![0]).toBeGreaterThan(0)
    expect(run.extra![2]).toBeGreaterThan(0)
    expect(run.extra![2]).toBeLessThanOrEqual(run.extra![0]!)
    expect(run.stderr).toBe('e\n')
    expect(run.trailer).toEqual({ status: 3, report: '' })
  })

  it('reports a death by signal with the shell report, and keeps stdin', async () => {
    const killed = strip(await runLocally({ argv: ['sh', '-c', 'kill -TERM $$'], cwd: dir, env, stdin: 'ignore' }))
    expect(killed.trailer).toEqual({ status: 143, report: 'Terminated' })
    expect(killed.stderr).toBe('')
    const cat = strip(await runLocally({ argv: ['cat'], cwd: dir, env, stdin: 'attached' }, 'in\u00e9'))
    expect(cat.stdout).toBe('in\u00e9')
  })

  it('tees collected streams into capped spill files (the handle, not the wrapper, removes files)', async () => {
    const stdoutSpill = { path: join(dir, 'out.spill'), maxBytes: 5 }
    const stderrSpill = { path: join(dir, 'err.spill'), maxBytes: 100 }
    const run = strip(await runLocally({ argv: ['sh', '-c', 'printf 0123456789; printf oops >&2'], cwd: dir, env, stdin: 'ignore', stdoutSpill, stderrSpill }))
    expect([run.stdout, run.stderr]).toEqual(['0123456789', 'oops'])
    expect(readFileSync(stdoutSpill.path, 'utf8')).toBe('01234')
    expect(readFileSync(stderrSpill.path, 'utf8')).toBe('oops')
    const empty = { path: join(dir, 'empty.spill'), maxBytes: 100 }
    strip(await runLocally({ argv: ['true'], cwd: dir, env, stdin: 'ignore', stderrSpill: empty }))
    expect(statSync(empty.path).size).toBe(0)
    expect(statSync(stdoutSpill.path).size).toBe(5)
    // One status file per run, left for the handle: empty unless the shell reported a signal.
    const statuses = readdirSync(dir).filter(name => name.startsWith('status-'))
    expect(statuses.map(name => readFileSync(join(dir, name), 'utf8')).sort()).toEqual(['', '', '', '', 'Terminated\n'])
  })

  it('exec mode: a session-leading wrapper becomes the program (pidx marker, no trailer); otherwise it waits', async () => {
    const argv = ['sh', '-c', 'read -r _ _ _ _ pg sid _ </proc/$$/stat; echo "$$ $pg $sid"; kill -KILL $$']
    const leading = await runLocally({ argv, cwd: dir, env, stdin: 'ignore', execWhenLeader: true }, undefined, true)
    const event = new BoundaryScanner(leading.nonce, undefined, { process: true }).push(leading.stdout)
    expect(event).toMatchObject({ kind: 'started', exec: true })
    if (event.kind !== 'started') throw new Error('unreachable')
    expect(event.rest.toString()).toBe(`${event.pid} ${event.pid} ${event.pid}\n`)
    expect(event.extra).toHaveLength(1)
    // The transport's own exit facts are the program's (here: node's wait status of the child).
    expect([leading.exitCode, leading.signal, leading.stderr.toString()]).toEqual([null, 'SIGKILL', ''])
    // Not a session leader (node's child): the waiting mode, with its trailer.
    const waiting = strip(await runLocally({ argv, cwd: dir, env, stdin: 'ignore', execWhenLeader: true }))
    expect(waiting.trailer).toEqual({ status: 137, report: 'Killed' })
  })

  it('runs the same under bash (an SSH login shell runs the wrapper itself): exec mode, and the waiting mode with its report', async () => {
    const argv = ['sh', '-c', 'echo hi; kill -TERM $$']
    for (const leader of [true, false]) {
      const wrapper = buildProcessWrapper({ argv, cwd: dir, env, stdin: 'ignore', statusFile: join(dir, `status-bash-${leader}`), execWhenLeader: true })
      const child = spawn('bash', ['-c', wrapper.script], { stdio: ['ignore', 'pipe', 'pipe'], detached: leader })
      const out: Buffer[] = []
      const err: Buffer[] = []
      child.stdout!.on('data', (chunk: Buffer) => out.push(chunk))
      child.stderr!.on('data', (chunk: Buffer) => err.push(chunk))
      await new Promise(resolve => child.once('close', resolve))
      const event = new BoundaryScanner(wrapper.nonce, undefined, { process: true }).push(Buffer.concat(out))
      expect(event).toMatchObject({ kind: 'started', rest: Buffer.from('hi\n') })
      expect(event.kind === 'started' && event.exec === true).toBe(leader)
      const scanner = new TrailerScanner(wrapper.nonce)
      expect(scanner.push(Buffer.concat(err)).toString()).toBe('')
      expect(scanner.trailer).toEqual(leader ? undefined : { status: 143, report: 'Terminated' })
    }
  })

  it('fails with the cwd and exe markers before anything starts', async () => {
    const cwd = await runLocally({ argv: ['true'], cwd: join(dir, 'missing'), env, stdin: 'ignore' })
    expect(new BoundaryScanner(cwd.nonce, undefined, { process: true }).push(cwd.stdout)).toMatchObject({ kind: 'failed', reason: 'cwd' })
    const exe = await runLocally({ argv: ['no-such-program-xyz'], cwd: dir, env, stdin: 'ignore' })
    expect(new BoundaryScanner(exe.nonce, undefined, { process: true }).push(exe.stdout)).toMatchObject({ kind: 'failed', reason: 'exe' })
  })
})
