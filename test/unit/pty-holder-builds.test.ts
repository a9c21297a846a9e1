/**
 * Both builds of the terminal's world-side parent (dist/world-tools/linux-{x86_64,aarch64}/dsh-pty)
 * keep its promises, driven by the package's own client (src/providers/remote/pty-holder/): the
 * x86_64 build run directly, the aarch64 one under `qemu-aarch64-static` (user-mode emulation;
 * .ci/run installs it), each as a child of this test on a plain pipe, as a world runs it.
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { describe, expect, it } from 'vitest'
import { MAX_WINDOW_BYTES } from '../../src/providers/remote/pty-holder/flow-budget.ts'
import { HOLDER_CREDIT_BYTES, openHeldTerminal } from '../../src/providers/remote/pty-holder/held-terminal.ts'
import { HolderFrameReader, creditFrame, inputFrames, spawnFrame } from '../../src/providers/remote/pty-holder/protocol.ts'
import type { ProcessTransport } from '../../src/providers/remote/process.ts'
import type { TerminalTransport } from '../../src/providers/remote/terminal.ts'
import { worldTool } from '../../src/providers/remote/world-tools/manifest.ts'
import { ROOT } from '../helpers/built-package.ts'

type Arch = 'x86_64' | 'aarch64'

function holderProcess(arch: Arch): ProcessTransport {
  expect(worldTool('dsh-pty', arch).hostPath).toBe(join(ROOT, 'dist', 'world-tools', `linux-${arch}`, 'dsh-pty'))
  const child = arch === 'x86_64'
    ? spawn(join(ROOT, 'dist', 'world-tools', 'linux-x86_64', 'dsh-pty'), [], { stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn('qemu-aarch64-static', [join(ROOT, 'dist', 'world-tools', 'linux-aarch64', 'dsh-pty')], { stdio: ['pipe', 'pipe', 'pipe'] })
  const exited = new Promise<SubprocessOutcome>(resolve => child.once('exit', (exitCode, signal) => resolve({ exitCode, signal })))
  child.stdin.on('error', () => undefined)
  return { stdout: child.stdout, stderr: child.stderr, stdin: child.stdin, exit: () => exited, close: () => child.kill('SIGKILL') }
}

function open(arch: Arch, script: string, size = { rows: 24, cols: 80 }): Promise<TerminalTransport> {
  return openHeldTerminal(holderProcess(arch), { script, ...size, where: `the ${arch} build` })
}

/** Whether pid (a process of this machine) runs: /proc has it, and not as a zombie. */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

/** The start time of pid (a process of this machine), stat field 22 in clock ticks. */
function startTime(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[19])
}

/** The children of pid (a process of this machine), from /proc/PID/task/PID/children. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(word => word.length > 0).map(Number)
  } catch {
    return []
  }
}

/** The command name of pid (a process of this machine), '' once it is gone. */
function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return ''
  }
}

async function everything(terminal: TerminalTransport): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of terminal.output) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

for (const arch of ['x86_64', 'aarch64'] as const) {
  describe(`dsh-pty, the ${arch} build`, () => {
    it('answers --version with its protocol and architecture', async () => {
      const child = arch === 'x86_64'
        ? spawn(join(ROOT, 'dist', 'world-tools', 'linux-x86_64', 'dsh-pty'), ['--version'])
        : spawn('qemu-aarch64-static', [join(ROOT, 'dist', 'world-tools', 'linux-aarch64', 'dsh-pty'), '--version'])
      let out = ''
      child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
      await new Promise(resolve => child.once('close', resolve))
      expect(out).toBe(`dsh-pty 4 ${arch}\n`)
    })

    it('runs the script as the leader of a new session whose controlling tty is the PTY, at the spawn size', async () => {
      const terminal = await open(arch, 'read -r _ _ _ _ _ sid _ tpgid _ </proc/$$/stat; echo "sid=$((sid == $$)) fg=$((tpgid == $$)) tty=$(tty) size=$(stty size)"', { rows: 33, cols: 101 })
      const text = (await everything(terminal)).toString()
      expect(text).toMatch(/^sid=1 fg=1 tty=\/dev\/pts\/\d+ size=33 101\r\n$/)
      expect(await terminal.exit()).toEqual({ exitCode: 0, signal: null })
    })

    it('reports a signal death and an exit code of 128+N apart: kill -9 $$ is SIGKILL, exit 137 is 137', async () => {
      const killed = await open(arch, 'kill -9 $$')
      await everything(killed)
      expect(await killed.exit()).toEqual({ exitCode: null, signal: 'SIGKILL' })
      const exited = await open(arch, 'exit 137')
      await everything(exited)
      expect(await exited.exit()).toEqual({ exitCode: 137, signal: null })
    })

    it('delivers 8 MiB of output byte for byte, and a resize reaches the program as SIGWINCH with the new size', async () => {
      const terminal = await open(arch, 'stty raw -echo; trap \'echo; echo "winch $(stty size)"; exit 0\' WINCH; head -c 8388608 /dev/zero | tr "\\0" x; while :; do sleep 0.05; done')
      const chunks: Buffer[] = []
      let total = 0
      const done = (async () => {
        for await (const chunk of terminal.output) {
          chunks.push(chunk as Buffer)
          total += (chunk as Buffer).length
          if (total === 8388608) await terminal.resize(40, 120)
        }
      })()
      await done
      const all = Buffer.concat(chunks)
      expect(createHash('sha256').update(all.subarray(0, 8388608)).digest('hex')).toBe(createHash('sha256').update(Buffer.alloc(8388608, 'x')).digest('hex'))
      // Raw mode: no output processing (OPOST off), so newlines stay bare.
      expect(all.subarray(8388608).toString()).toBe('\nwinch 40 120\n')
      expect(await terminal.exit()).toEqual({ exitCode: 0, signal: null })
    })

    it('reads the PTY only as far as the reader takes: a paused reader holds at most the largest credit window', async () => {
      const terminal = await open(arch, 'head -c 16777216 /dev/zero; echo end')
      terminal.output.pause()
      // The window fills, then nothing more arrives while the reader is paused.
      await expect.poll(() => terminal.output.readableLength, { timeout: 20_000 }).toBeGreaterThanOrEqual(HOLDER_CREDIT_BYTES * 3 / 4)
      await new Promise(resolve => setTimeout(resolve, 300))
      const held = terminal.output.readableLength
      await new Promise(resolve => setTimeout(resolve, 300))
      expect(terminal.output.readableLength).toBe(held)
      expect(held).toBeLessThanOrEqual(MAX_WINDOW_BYTES)
      const rest = await everything(terminal)
      expect(rest.length).toBe(16777216 + 'end\r\n'.length)
      expect(await terminal.exit()).toEqual({ exitCode: 0, signal: null })
    }, 60_000)

    it('signals the PTY\'s foreground group on request, and refuses SIGKILL to the program\'s own group', async () => {
      const terminal = await open(arch, 'echo "pid=$$"; trap "echo int; exit 4" INT; while :; do sleep 0.05; done')
      let seen = ''
      terminal.output.on('data', (chunk: Buffer) => { seen += chunk.toString() })
      // Listened to from the start: the end may come in the same read as the signal's answer.
      const ended = new Promise<void>(resolve => terminal.output.once('end', resolve))
      await expect.poll(() => /pid=(\d+)\r\n/.exec(seen)?.[1]).toBeDefined()
      const pid = Number(/pid=(\d+)\r\n/.exec(seen)![1])
      const program = { pid, starttime: 0 }
      // Not interactive: no job control, so the foreground group is the shell's own (its pid).
      expect(await terminal.signalForeground!(program, 'KILL')).toEqual({ kind: 'refused', pgid: pid })
      expect(await terminal.signalForeground!(program, 'INT')).toEqual({ kind: 'signalled', pgid: pid })
      await ended
      expect(seen).toMatch(/\r\nint\r\n$/)
      expect(await terminal.exit()).toEqual({ exitCode: 4, signal: null })
      expect(await terminal.signalForeground!(program, 'INT')).toEqual({ kind: 'gone' })
    })

    it('probes the PTY\'s foreground: the group, whether a member is proven reading the terminal, and gone for another identity', async () => {
      const terminal = await open(arch, 'trap : INT; echo "pid=$$"; while read -r line; do case $line in cat) cat ;; tty) bash -c "read -r -u 3 x" 3</dev/tty ;; pipe) sleep 1000 | cat ;; sleep) sleep 1000 ;; esac; echo "done-$line"; done')
      let seen = ''
      terminal.output.on('data', (chunk: Buffer) => { seen += chunk.toString() })
      await expect.poll(() => /pid=(\d+)\r\n/.exec(seen)?.[1]).toBeDefined()
      const pid = Number(/pid=(\d+)\r\n/.exec(seen)![1])
      const program = { pid, starttime: startTime(pid) }
      // Not interactive: no job control, so every command runs in the shell's own group (its pid).
      const waiting = (facts: unknown): boolean => (facts as { inputWaiting: boolean }).inputWaiting
      // The aarch64 build runs under qemu, but the shell it forks is a native x86_64 process,
      // whose system call numbers are not aarch64's: there only the group facts are checked.
      const native = arch === 'x86_64'
      const probe = async (): Promise<Awaited<ReturnType<NonNullable<TerminalTransport['foreground']>>>> => terminal.foreground!(program)
      const call = /^\d+:\d+:0x[0-9a-f]+:0x[0-9a-f]+:\d+$/
      // The shell's own read of the terminal (fd 0).
      if (native) await expect.poll(async () => waiting(await probe())).toBe(true)
      const atRead = await probe()
      expect(atRead).toMatchObject({ tpgid: pid, shellPgrp: pid })
      if (native) expect(atRead!.waitingCall).toMatch(call)
      for (const [line, reads] of [['cat', true], ['tty', true], ['pipe', false], ['sleep', false]] as const) {
        await terminal.write(Buffer.from(`${line}\r`))
        // Until the command runs, the shell's own read may still be seen: wait for the command's
        // children, exec'd (a forked child keeps the shell's INT trap until it execs).
        await expect.poll(() => { const children = childrenOf(pid); return children.length > 0 && children.every(child => commOf(child) !== 'sh') }, { timeout: 10_000 }).toBe(true)
        if (native && reads) await expect.poll(async () => waiting(await probe()), { timeout: 10_000 }).toBe(true)
        if (native && !reads) {
          // Settled: the command's processes are blocked in their own calls (sleep in nanosleep, a pipe's cat reading the pipe).
          await expect.poll(() => childrenOf(pid).every(child => /^\d+ \(.*\) S /.test(readFileSync(`/proc/${child}/stat`, 'utf8'))), { timeout: 10_000 }).toBe(true)
          expect(await probe()).toEqual({ tpgid: pid, shellPgrp: pid, inputWaiting: false, waitingCall: undefined })
        }
        expect(await probe()).toMatchObject({ tpgid: pid, shellPgrp: pid })
        await terminal.signalForeground!(program, 'INT')
        await expect.poll(() => seen.includes(`done-${line}`), { timeout: 10_000 }).toBe(true)
        await expect.poll(() => childrenOf(pid).length, { timeout: 10_000 }).toBe(0)
      }
      expect(await terminal.foreground!({ pid, starttime: program.starttime + 1 })).toBeUndefined()
      // End of input (^D): the loop ends, and so does the shell.
      await terminal.write(Buffer.from('\x04'))
      await everything(terminal)
      expect(await terminal.exit()).toEqual({ exitCode: 0, signal: null })
      expect(await terminal.foreground!(program)).toBeUndefined()
    }, 60_000)

    it('input reaches the program through the PTY line discipline (echo on, ICRNL)', async () => {
      const terminal = await open(arch, 'read -r line; echo "got=$line"')
      await terminal.write(Buffer.from('hello\r'))
      expect((await everything(terminal)).toString()).toBe('hello\r\ngot=hello\r\n')
      expect(await terminal.exit()).toEqual({ exitCode: 0, signal: null })
    })

    it('hangs the terminal up when its stdin ends (the client went away): the shell gets SIGHUP and the holder exits 0', async () => {
      const holder = holderProcess(arch)
      const reader = new HolderFrameReader()
      const frames: string[] = []
      let shell = 0
      holder.stdout.on('data', (chunk: Buffer) => {
        for (const frame of reader.push(chunk)) {
          frames.push(frame.type)
          if (frame.type === 'started') shell = frame.pid
        }
      })
      holder.stdin!.write(spawnFrame(24, 80, 65536, 'trap "" INT; sleep 1000'))
      await expect.poll(() => frames.includes('started')).toBe(true)
      holder.stdin!.write(creditFrame(1024))
      holder.stdin!.end()
      expect(await holder.exit()).toEqual({ exitCode: 0, signal: null })
      expect(frames).toEqual(['hello', 'started'])
      // The shell (a child of the holder on this machine) ended of the hangup.
      expect(shell).toBeGreaterThan(1)
      await expect.poll(() => running(shell), { timeout: 10_000 }).toBe(false)
    })

    it('counts the input it accepted in `i` frames, which a write waits for', async () => {
      const holder = holderProcess(arch)
      const reader = new HolderFrameReader()
      const accepted: number[] = []
      holder.stdout.on('data', (chunk: Buffer) => {
        for (const frame of reader.push(chunk)) if (frame.type === 'accepted') accepted.push(frame.total)
      })
      holder.stdin!.write(spawnFrame(24, 80, 65536, 'stty -echo; cat >/dev/null'))
      holder.stdin!.write(Buffer.concat([inputFrames(Buffer.from('hello')), inputFrames(Buffer.from(', world'))]))
      await expect.poll(() => accepted.at(-1)).toBe(12)
      holder.stdin!.write(inputFrames(Buffer.alloc(100_000, 'x')))
      await expect.poll(() => accepted.at(-1)).toBe(100_012)
      // Non-decreasing: a count, never a per-frame size.
      expect(accepted).toEqual([...accepted].sort((a, b) => a - b))
      holder.stdin!.end()
      expect(await holder.exit()).toEqual({ exitCode: 0, signal: null })
    })

    it('a script that execs a missing program ends with the shell\'s 127 and its message', async () => {
      const terminal = await open(arch, 'exec /nonexistent/program')
      const text = (await everything(terminal)).toString()
      expect(text).toContain('/nonexistent/program')
      expect(await terminal.exit()).toEqual({ exitCode: 127, signal: null })
    })
  })
}
