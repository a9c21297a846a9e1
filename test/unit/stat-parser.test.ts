/**
 * The control program's /proc stat parser, run for real: control.sh is sent over the stdin of a
 * LOCAL `sh -s` (dash here) exactly as a world sends it over a Docker exec or SSH channel, and
 * every parse goes through the line protocol. comm (field 2) is attacker-chosen (any process
 * can write /proc/self/comm), so the parser must take fields 3.. after the LAST ") " and must
 * survive spaces, parentheses, newlines and look-alike field runs inside comm.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ControlChannel, type RemoteProcStat } from '../../src/providers/remote/control-channel.ts'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'

let child: ChildProcessWithoutNullStreams
let channel: ControlChannel
let dir: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-stat-'))
  child = spawn('sh', ['-s'], { stdio: ['pipe', 'pipe', 'pipe'] })
  child.stderr.resume()
  channel = await ControlChannel.open({
    stdin: child.stdin,
    stdout: child.stdout,
    close: () => { child.stdin.destroy() },
  }, 'local sh')
})

afterAll(async () => {
  channel?.close()
  if (child !== undefined && child.exitCode === null) await new Promise(resolve => child.once('exit', resolve))
  rmSync(dir, { recursive: true, force: true })
})

/** A full 52-field stat line in the kernel's format with the given comm and fields. */
function statLine(pid: number, comm: string, f: RemoteProcStat): string {
  const fields: (string | number)[] = [
    f.state, f.ppid, f.pgrp, f.session, f.ttyNr, f.tpgid,
    4194560, 120, 0, 0, 0, 3, 1, 0, 0, 20, 0, 1, 0,
    f.starttime,
    2412544, 230, '18446744073709551615', 94560000000000, 94560000020000, 140730000000000,
    0, 0, 0, 0, 65536, 0, 0, 0, 0, 17, 1, 0, 0, 0, 0, 0,
    94560000030000, 94560000031000, 94560000040000, 140730000001000, 140730000001020, 140730000001020, 140730000002000, 0,
  ]
  expect(fields).toHaveLength(50)
  return `${pid} (${comm}) ${fields.join(' ')}\n`
}

/** Our own reference parser for a real /proc stat file (fields after the last ") "). */
function readProcStat(pid: number | 'self'): RemoteProcStat {
  const text = readFileSync(`/proc/${pid}/stat`, 'latin1')
  const fields = text.slice(text.lastIndexOf(') ') + 2).trim().split(' ')
  return {
    state: fields[0]!,
    ppid: Number(fields[1]),
    pgrp: Number(fields[2]),
    session: Number(fields[3]),
    ttyNr: Number(fields[4]),
    tpgid: Number(fields[5]),
    starttime: Number(fields[19]),
  }
}

const EXPECTED: RemoteProcStat = { state: 'S', ppid: 4242, pgrp: 4343, session: 4444, ttyNr: 34816, tpgid: 4545, starttime: 987654321 }

/** comm values a process can give itself (or that a synthetic file may hold). */
const HOSTILE_COMMS: readonly [string, string][] = [
  ['plain', 'bash'],
  ['a space', 'a b'],
  ['close-paren space inside', 'x) y'],
  ['")(" inside', ')('],
  ['only ") "', ') '],
  ['double open', '(('],
  ['double close', '))'],
  ['a newline', 'a\nb'],
  ['a trailing newline', 'x\n'],
  ['only a newline', '\n'],
  ['a ") S 1 2 3" look-alike', ') S 1 2 3'],
  ['a look-alike with a full numeric run', 'sh) R 7 7 7 7 7'],
  ['a look-alike after a newline', 'a\n) S 1 2 3 4'],
  ['a look-alike before a newline', 'a) Z 1 2\n3 4'],
  ['a glob', '*'],
  ['a tab', 'tab\there'],
  ['the empty comm', ''],
  ['backslashes', '\\n\\t\\'],
  ['a longer synthetic look-alike', 'very long) R 1 2 3 4 5 6 7 8 9 10 11'],
  ['UTF-8', 'héllo-世界'],
]

describe('statfile: the parser on synthetic stat lines', () => {
  it.each(HOSTILE_COMMS)('parses every field exactly when comm holds %s', async (_label, comm) => {
    const path = join(dir, `stat-${HOSTILE_COMMS.findIndex(entry => entry[1] === comm)}`)
    writeFileSync(path, statLine(1234, comm, EXPECTED), 'utf8')
    expect(await channel.statFile(path)).toEqual(EXPECTED)
  })

  it('reports every state letter and a tty-less process (tty 0, tpgid -1) exactly', async () => {
    for (const state of ['R', 'S', 'D', 'Z', 'T', 't', 'X', 'I']) {
      const fields: RemoteProcStat = { state, ppid: 1, pgrp: 77, session: 77, ttyNr: 0, tpgid: -1, starttime: 5 }
      const path = join(dir, `state-${state === 't' ? 'tl' : state}`)
      writeFileSync(path, statLine(77, ') S 1 2', fields))
      expect(await channel.statFile(path)).toEqual(fields)
    }
  })

  it('answers "gone" (undefined) for a missing file, an empty file and a truncated line', async () => {
    expect(await channel.statFile(join(dir, 'does-not-exist'))).toBeUndefined()
    writeFileSync(join(dir, 'empty'), '')
    expect(await channel.statFile(join(dir, 'empty'))).toBeUndefined()
    writeFileSync(join(dir, 'short'), '12 (x) S 1 2 3 4 5 6\n')
    expect(await channel.statFile(join(dir, 'short'))).toBeUndefined()
    writeFileSync(join(dir, 'short-newline'), '12 (x\ny) S 1 2 3\n')
    expect(await channel.statFile(join(dir, 'short-newline'))).toBeUndefined()
  })

  it('parses a line without a trailing newline', async () => {
    const path = join(dir, 'no-newline')
    writeFileSync(path, statLine(9, 'a) b', EXPECTED).trimEnd())
    expect(await channel.statFile(path)).toEqual(EXPECTED)
  })

  it('refuses a path the line protocol cannot carry before sending it', () => {
    expect(() => channel.request('statfile', [join(dir, 'with space')])).toThrow(InvalidArgumentError)
    expect(() => channel.request('statfile', ['/tmp/$(id)'])).toThrow(InvalidArgumentError)
    expect(() => channel.request('statfile', ['/tmp/a\nb'])).toThrow(InvalidArgumentError)
  })

  it('keeps answering in order after all of the above (the program never desynchronised)', async () => {
    expect(await channel.request('ping')).toEqual(['ok', 'pong'])
    const paths = HOSTILE_COMMS.map((_entry, index) => join(dir, `stat-${index}`))
    const results = await Promise.all(paths.map(path => channel.statFile(path)))
    expect(results).toEqual(paths.map(() => EXPECTED))
  })
})

describe('stat: the parser on real /proc entries', () => {
  it('reports the program\'s own facts at start', () => {
    expect(channel.info.pid).toBe(child.pid)
    expect(channel.info.uid).toBe(process.getuid!())
    expect(channel.info.arch).toBe(process.arch === 'x64' ? 'x86_64' : process.arch === 'arm64' ? 'aarch64' : 'unknown')
    expect(channel.info.home).toBe(process.env.HOME || undefined)
  })

  it('matches /proc/<this test process>/stat on every field but the (racy) run state', async () => {
    const mine = readProcStat(process.pid)
    const parsed = await channel.stat(process.pid)
    expect(parsed).toBeDefined()
    // Node itself is running or sleeping in epoll at the moment the program reads the file.
    expect(['R', 'S']).toContain(parsed!.state)
    expect({ ...parsed, state: 'any' }).toEqual({ ...mine, state: 'any' })
    expect(parsed!.ppid).toBe(process.ppid)
  })

  it('matches a stopped child exactly, state T included', async () => {
    const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' })
    try {
      sleeper.kill('SIGSTOP')
      // Wait until the kernel shows the stop (a hang-guarded poll, not a timing assertion).
      for (let i = 0; i < 500 && readProcStat(sleeper.pid!).state !== 'T'; i++) await new Promise(resolve => setTimeout(resolve, 10))
      const expected = readProcStat(sleeper.pid!)
      expect(expected.state).toBe('T')
      expect(expected.ppid).toBe(process.pid)
      expect(await channel.stat(sleeper.pid!)).toEqual(expected)
    } finally {
      sleeper.kill('SIGKILL')
    }
  })

  it.each([
    ['a ") S 1 2 3" look-alike', 'a) S 1 2 3'],
    ['a newline and a look-alike', 'x\n) R 9 9 9'],
    ['")(" and spaces', ')( ) ( )'],
    ['only a newline', '\n'],
  ])('parses a live process whose comm holds %s', async (_label, comm) => {
    // dash writes the hostile comm into its own /proc entry (the kernel keeps up to 15 bytes,
    // newlines included), then blocks reading stdin: state S, stable for the comparison.
    const victim = spawn('sh', ['-c', 'printf "%s" "$1" > /proc/$$/comm && echo set && read _line', 'sh', comm], { stdio: ['pipe', 'pipe', 'inherit'] })
    try {
      await new Promise<void>((resolve, reject) => {
        victim.stdout.once('data', () => resolve())
        victim.once('exit', code => reject(new Error(`victim exited early with ${code}`)))
      })
      const raw = readFileSync(`/proc/${victim.pid}/stat`, 'latin1')
      expect(raw.startsWith(`${victim.pid} (${comm.slice(0, 15)}) `)).toBe(true)
      for (let i = 0; i < 500 && readProcStat(victim.pid!).state !== 'S'; i++) await new Promise(resolve => setTimeout(resolve, 10))
      const expected = readProcStat(victim.pid!)
      expect(expected.state).toBe('S')
      expect(expected.ppid).toBe(process.pid)
      expect(await channel.stat(victim.pid!)).toEqual(expected)
    } finally {
      victim.kill('SIGKILL')
    }
  })

  it('answers undefined for a pid that does not exist', async () => {
    const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'))
    expect(await channel.stat(pidMax + 1)).toBeUndefined()
  })
})
