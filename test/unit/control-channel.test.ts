/**
 * The control channel's request queue when its program dies, run for real: control.sh over a
 * local `sh -s`, the process stopped (SIGSTOP) so requests pile up, then killed. Every request,
 * the one in flight AND the ones queued behind it, must reject with ControlChannelError; none may
 * stay pending (a terminate() waits for in-flight probes, so one pending request hangs a close).
 * Also the cgroup reads of resource-limit events: `counters` (builtins only) and `cgroup`.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createHash } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ControlChannel } from '../../src/providers/remote/control-channel.ts'
import { ControlChannelError } from '../../src/providers/remote/errors.ts'
import { hangGuard, settleState } from '../docker/helpers.ts'

async function localChannel(): Promise<{ channel: ControlChannel; pid: number; exited: Promise<unknown> }> {
  const child = spawn('sh', ['-s'], { stdio: ['pipe', 'pipe', 'ignore'] })
  const exited = once(child, 'exit')
  const channel = await ControlChannel.open({ stdin: child.stdin, stdout: child.stdout, close: () => { child.stdin.destroy() } }, 'local sh')
  return { channel, pid: child.pid!, exited }
}

describe('ControlChannel when its program dies', () => {
  it('rejects the in-flight request and every queued one with ControlChannelError', async () => {
    const { channel, pid, exited } = await localChannel()
    expect(await channel.request('ping')).toEqual(['ok', 'pong'])
    process.kill(pid, 'SIGSTOP')
    const requests = [channel.request('ping'), channel.stat(pid), channel.processTable(), channel.request('ping')]
    // Stopped: nothing answers (a bounded look, not a timing assertion).
    expect(await settleState(Promise.race(requests), 100)).toBe('pending')
    process.kill(pid, 'SIGKILL')
    await exited
    const outcomes = await Promise.all(requests.map(request => settleState(request, 5_000)))
    expect(outcomes).toEqual(['rejected', 'rejected', 'rejected', 'rejected'])
    for (const request of requests) await expect(request).rejects.toBeInstanceOf(ControlChannelError)
    expect(channel.alive).toBe(false)
    await channel.closed
    // Requests after the failure reject at once with the same typed error.
    await expect(channel.request('ping')).rejects.toBeInstanceOf(ControlChannelError)
  })

  it('close(): queued requests reject, the program exits, and the channel reports closed', async () => {
    const { channel, exited } = await localChannel()
    const requests = [channel.request('ping'), channel.request('ping'), channel.request('ping')]
    channel.close()
    const outcomes = await Promise.all(requests.map(request => settleState(request, 5_000)))
    // The first may have been answered before close; none may stay pending.
    expect(outcomes.every(outcome => outcome !== 'pending')).toBe(true)
    await exited
    expect(channel.alive).toBe(false)
    await expect(channel.request('ping')).rejects.toBeInstanceOf(ControlChannelError)
  })
})

describe('ControlChannel that never starts', () => {
  it('names what the world printed instead, without the line ending an engine ends it with', async () => {
    // As Docker ends an exec whose user is missing: the refusal and \r\n, then the stream ends.
    const child = spawn('sh', ['-c', 'cat >/dev/null & printf \'unable to find user nosuchuser: no matching entries in passwd file\\r\\n\''], { stdio: ['pipe', 'pipe', 'ignore'] })
    const opening = ControlChannel.open({ stdin: child.stdin, stdout: child.stdout, close: () => { child.stdin.destroy() } }, 'local sh')
    await expect(opening).rejects.toThrow(new ControlChannelError('the remote control program in local sh ended before it started: "unable to find user nosuchuser: no matching entries in passwd file"'))
  })
})

describe('ControlChannel whose world exits before reading the program', () => {
  it('rejects with ControlChannelError and raises no unhandled EPIPE from the program write', async () => {
    // The world closes its stdin and says so on stderr before the program is written, so the
    // write meets a pipe with no reader (EPIPE) every time; its stdout ends 200 ms later.
    const child = spawn('sh', ['-c', 'exec 0<&-; echo closed >&2; sleep 0.2'], { stdio: ['pipe', 'pipe', 'pipe'] })
    await once(child.stderr, 'data')
    const opening = ControlChannel.open({ stdin: child.stdin, stdout: child.stdout, close: () => { child.stdin.destroy() } }, 'local sh')
    await expect(opening).rejects.toThrow(new ControlChannelError('the remote control program in local sh ended before it started'))
    // The EPIPE of the write, if it comes, comes before the pipe's close; vitest fails the file on
    // an unhandled one.
    if (!child.stdin.closed) await hangGuard(once(child.stdin, 'close'), 10_000, 'the close of the program\'s pipe')
  })
})

describe('ControlChannel over a transport that already closed', () => {
  it('rejects at once with ControlChannelError, not after the 15 s start bound', async () => {
    const child = spawn('sh', ['-c', 'exit 0'], { stdio: ['pipe', 'pipe', 'ignore'] })
    await once(child, 'close')
    expect(child.stdout.destroyed).toBe(true)
    const opening = ControlChannel.open({ stdin: child.stdin, stdout: child.stdout, close: () => { child.stdin.destroy() } }, 'local sh')
    expect(await settleState(opening, 1_000)).toBe('rejected')
    await expect(opening).rejects.toThrow(new ControlChannelError('the remote control program in local sh ended before it started'))
  })
})

describe('ControlChannel cgroup reads (control.sh over a local sh)', () => {
  it('readSmallFiles: each file\'s lines as read by the shell\'s builtins; unreadable, missing or empty is undefined', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dsh-counters-'))
    try {
      writeFileSync(join(dir, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n')
      writeFileSync(join(dir, 'memory.max'), 'max\n')
      writeFileSync(join(dir, 'no newline'), 'max 3')
      writeFileSync(join(dir, 'empty'), '')
      const { channel } = await localChannel()
      const texts = await channel.readSmallFiles([join(dir, 'memory.events'), join(dir, 'memory.max'), join(dir, 'no newline'), join(dir, 'empty'), join(dir, 'missing')])
      expect(texts).toEqual(['low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n', 'max\n', 'max 3\n', undefined, undefined])
      channel.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('findWorldTool: the first cache directory whose SHA/NAME copy hashes to SHA, is this user\'s, no symlink, writable by nobody else, and runs --version within 2 s; a planted copy never runs, a hung one is killed and skipped', async () => {
    const { channel } = await localChannel()
    const dir = mkdtempSync(join(tmpdir(), 'dsh-tool-'))
    try {
      const good = '#!/bin/sh\n[ "$1" = --version ] || exit 2\nread -r line && exit 3\nexit 0\n'
      const sha = createHash('sha256').update(good).digest('hex')
      const copy = (base: string, sum: string, script: string): void => {
        mkdirSync(join(base, sum), { recursive: true, mode: 0o700 })
        writeFileSync(join(base, sum, 'dsh-pty'), script, { mode: 0o700 })
      }
      // A planted copy under the build's name (it would leave a mark), the good one behind a
      // symlinked directory and in a directory others may write, then the good one.
      const mark = join(dir, 'planted-ran')
      copy(join(dir, 'planted'), sha, `#!/bin/sh\ntouch ${mark}\nexit 0\n`)
      copy(join(dir, 'real'), sha, good)
      symlinkSync(join(dir, 'real'), join(dir, 'link'))
      copy(join(dir, 'open'), sha, good)
      chmodSync(join(dir, 'open', sha), 0o777)
      copy(join(dir, 'good'), sha, good)
      const dirs = ['missing', 'planted', 'link', 'open', 'good', 'real'].map(name => join(dir, name))
      expect(await channel.findWorldTool('dsh-pty', sha, dirs)).toBe(4)
      expect(existsSync(mark)).toBe(false)
      expect(await channel.findWorldTool('dsh-pty', 'cd'.repeat(32), dirs)).toBeUndefined()
      expect(await channel.findWorldTool('dsh-fsd', sha, dirs)).toBeUndefined()
      // A copy whose --version never answers: it says its pid, then sleeps.
      const hung = `#!/bin/sh\necho $$ > ${join(dir, 'hung.pid')}\nexec sleep 300\n`
      const hungSha = createHash('sha256').update(hung).digest('hex')
      copy(join(dir, 'hung'), hungSha, hung)
      expect(await channel.findWorldTool('dsh-pty', hungSha, [join(dir, 'hung')])).toBeUndefined()
      const pid = Number(readFileSync(join(dir, 'hung.pid'), 'utf8'))
      // Ended: gone, or a zombie (timeout(1) of coreutils sends SIGKILL to its own process group,
      // itself included, so the copy's reaper is whoever adopts it). The kill is sent before the
      // answer; the copy's exit may still be under way then (state R on a loaded machine), so
      // its state is read until it settles, for at most 5 s.
      const stateOf = (): string => {
        try {
          return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0]!
        } catch {
          return 'gone'
        }
      }
      let state = stateOf()
      for (let tries = 0; tries < 100 && state !== 'gone' && state !== 'Z'; tries += 1) {
        await new Promise(resolve => setTimeout(resolve, 50))
        state = stateOf()
      }
      expect(['gone', 'Z']).toContain(state)
      // The channel still answers: the copy's --version read no request of it.
      expect(await channel.request('ping')).toEqual(['ok', 'pong'])
    } finally {
      channel.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('cgroupFacts: the program\'s own /proc/PID/cgroup and the cgroup lines of its mountinfo, byte for byte', async () => {
    const { channel, pid } = await localChannel()
    const facts = await channel.cgroupFacts()
    expect(facts.procCgroup).toBe(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))
    const cgroupLines = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n').filter(line => / - cgroup2? /.test(line))
    expect(facts.mountinfo).toBe(cgroupLines.map(line => `${line}\n`).join(''))
    channel.close()
  })
})

describe('ControlChannel with many requests at once (issue 21)', () => {
  it('answers pipelined requests, raw-line requests among them, each with its own reply', async () => {
    const { channel, pid } = await localChannel()
    try {
      const dir = mkdtempSync(join(tmpdir(), 'dsh-pipeline-'))
      try {
        // More requests than the pipeline's depth, of every shape: plain, raw lines, forks.
        const requests = Array.from({ length: 80 }, (_, index) => {
          switch (index % 4) {
            case 0: return channel.request('ping').then(reply => reply.join(' '))
            case 1: return channel.firstExecutable([join(dir, 'none'), '/bin/sh']).then(found => `which ${String(found)}`)
            case 2: return channel.stat(pid).then(stat => `stat ${stat?.state === undefined ? 'gone' : 'ok'}`)
            default: return channel.readSmallFiles([join(dir, 'missing')]).then(texts => `counters ${String(texts[0])}`)
          }
        })
        const replies = await Promise.all(requests)
        expect(replies).toEqual(Array.from({ length: 80 }, (_, index) => ['ok pong', 'which 1', 'stat ok', 'counters undefined'][index % 4]))
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    } finally {
      channel.close()
    }
  })

  it('freshSnapshot: callers during a scan share the next scan, which sees a process started after their call', async () => {
    const { channel } = await localChannel()
    const child = spawn('sleep', ['30'], { stdio: 'ignore' })
    try {
      const first = channel.freshSnapshot()
      // Asked while the first scan is in flight: all three get ONE later scan.
      const later = [channel.freshSnapshot(), channel.freshSnapshot(), channel.freshSnapshot()]
      const [a, b, c] = await Promise.all(later)
      expect(b).toBe(a)
      expect(c).toBe(a)
      expect(await first).not.toBe(a)
      expect(a!.table.some(row => row.pid === child.pid)).toBe(true)
    } finally {
      child.kill('SIGKILL')
      channel.close()
    }
  })

  it('kill: calls of one signal made at once are answered per caller, each process signalled', async () => {
    const { channel } = await localChannel()
    const children = Array.from({ length: 6 }, () => spawn('sleep', ['30'], { stdio: 'ignore' }))
    try {
      const table = await channel.processTable()
      const identities = children.map(child => table.find(row => row.pid === child.pid)!)
      const exits = children.map(child => once(child, 'exit'))
      // Six callers at once, one process each, plus one asking for a process that is gone.
      const results = await Promise.all([...identities.map(identity => channel.kill('TERM', [identity])), channel.kill('TERM', [{ pid: identities[0]!.pid, starttime: identities[0]!.starttime + 1 }])])
      for (const [index, identity] of identities.entries()) expect([...results[index]!]).toEqual([[identity.pid, 'signalled']])
      expect([...results[6]!]).toEqual([[identities[0]!.pid, 'gone']])
      const signals = (await Promise.all(exits)).map(([, signal]) => signal)
      expect(signals).toEqual(children.map(() => 'SIGTERM'))
    } finally {
      for (const child of children) child.kill('SIGKILL')
      channel.close()
    }
  })
})
