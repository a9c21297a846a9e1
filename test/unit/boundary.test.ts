/**
 * The start wrapper and its boundary marker (boundary.ts), and the pure membership rule of the
 * teardown ladder (teardown.ts `sessionMembers`). The wrapper is also run for real by a local
 * `sh -c`, and its output fed through the scanner, so the marker the scanner expects is the
 * marker the script prints.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BoundaryScanner, type BoundaryEvent, WRAPPER_EXIT, buildStartWrapper } from '../../src/providers/remote/boundary.ts'
import type { RemoteProcess } from '../../src/providers/remote/control-channel.ts'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'
import { sessionMembers } from '../../src/providers/remote/teardown.ts'

const NONCE = '0123456789abcdef0123456789abcdef'
const OTHER_NONCE = 'fedcba9876543210fedcba9876543210'

/** The marker bytes exactly as the wrapper's printf writes them through a PTY (onlcr: \r\n). */
function marker(kind: 'pid' | 'cwd' | 'exe', tail: string, nonce = NONCE, eol = '\r\n'): string {
  return `${eol}DSHB${nonce}:${kind}:${tail}${eol}`
}

function pushAll(scanner: BoundaryScanner, chunks: readonly Buffer[]): BoundaryEvent[] {
  return chunks.map(chunk => scanner.push(chunk))
}

describe('BoundaryScanner', () => {
  it('finds a marker split byte by byte: pending until its final newline, then the pid and no rest', () => {
    const scanner = new BoundaryScanner(NONCE)
    const bytes = Buffer.from(marker('pid', '4711'), 'latin1')
    const events = pushAll(scanner, [...bytes].map(byte => Buffer.from([byte])))
    expect(events.slice(0, -1).every(event => event.kind === 'pending')).toBe(true)
    expect(events.at(-1)).toEqual({ kind: 'started', pid: 4711, rest: Buffer.alloc(0) })
  })

  it('drops junk before the marker and hands on every byte after it, exactly', () => {
    const scanner = new BoundaryScanner(NONCE)
    const after = Buffer.from([0x64, 0x73, 0x68, 0x3e, 0x20, 0xe4, 0xb8, 0xff, 0x00, 0x0a])
    const junk = Buffer.from('Last login: never\r\nmotd \u00e9\u4e16 \x1b[1mbold\x1b[0m', 'utf8')
    const all = Buffer.concat([junk, Buffer.from(marker('pid', '12'), 'latin1'), after])
    // Split at every possible position: the result never depends on chunking.
    for (let cut = 0; cut <= all.length; cut++) {
      const s = new BoundaryScanner(NONCE)
      const first = s.push(all.subarray(0, cut))
      const event = first.kind === 'started' ? { ...first, rest: Buffer.concat([first.rest, all.subarray(cut)]) } : s.push(all.subarray(cut))
      expect(event).toEqual({ kind: 'started', pid: 12, rest: after })
    }
    expect(scanner.push(all)).toEqual({ kind: 'started', pid: 12, rest: after })
  })

  it('accepts a marker ending in a bare \\n (a transport without onlcr)', () => {
    expect(new BoundaryScanner(NONCE).push(Buffer.from(marker('pid', '7', NONCE, '\n') + 'x'))).toEqual({ kind: 'started', pid: 7, rest: Buffer.from('x') })
  })

  it('reports a cwd failure with the trimmed preamble, also when split byte by byte', () => {
    const bytes = Buffer.from(`  junk line\r\n${marker('cwd', '-')}`, 'latin1')
    const events = pushAll(new BoundaryScanner(NONCE), [...bytes].map(byte => Buffer.from([byte])))
    expect(events.slice(0, -1).every(event => event.kind === 'pending')).toBe(true)
    expect(events.at(-1)).toEqual({ kind: 'failed', reason: 'cwd', preamble: 'junk line' })
  })

  it('reports an executable failure with an empty preamble', () => {
    expect(new BoundaryScanner(NONCE).push(Buffer.from(marker('exe', '-')))).toEqual({ kind: 'failed', reason: 'exe', preamble: '' })
  })

  it('keeps a forged marker with the wrong nonce pending, then finds the real one after it', () => {
    const scanner = new BoundaryScanner(NONCE)
    expect(scanner.push(Buffer.from(marker('pid', '666', OTHER_NONCE)))).toEqual({ kind: 'pending' })
    expect(scanner.push(Buffer.from(marker('exe', '-', OTHER_NONCE)))).toEqual({ kind: 'pending' })
    // A truncated nonce, a nonce with a suffix glued on the kind, a missing newline: all pending.
    expect(scanner.push(Buffer.from(`\r\nDSHB${NONCE.slice(0, -1)}:pid:1\r\n`))).toEqual({ kind: 'pending' })
    expect(scanner.push(Buffer.from(`\r\nDSHB${NONCE}:pidx:1\r\n`))).toEqual({ kind: 'pending' })
    expect(scanner.push(Buffer.from(`\r\nDSHB${NONCE}:pid:1`))).toEqual({ kind: 'pending' })
    expect(scanner.push(Buffer.from(' \r\n'))).toEqual({ kind: 'pending' })
    expect(scanner.seen).toContain(`DSHB${OTHER_NONCE}:pid:666`)
    expect(scanner.push(Buffer.from(marker('pid', '42') + 'ok'))).toEqual({ kind: 'started', pid: 42, rest: Buffer.from('ok') })
  })

  it('holds at most maxBytes without a marker, then throws RangeError', () => {
    const scanner = new BoundaryScanner(NONCE, 16)
    expect(scanner.push(Buffer.alloc(10, 0x61))).toEqual({ kind: 'pending' })
    expect(scanner.push(Buffer.alloc(6, 0x61))).toEqual({ kind: 'pending' })
    expect(() => scanner.push(Buffer.alloc(1, 0x61))).toThrow(RangeError)
    expect(() => new BoundaryScanner(NONCE, 16).push(Buffer.alloc(17))).toThrow('no start marker within 16 bytes of terminal output')
  })

  it('finds a marker that completes the chunk that crosses maxBytes (the bound applies only without a marker)', () => {
    const scanner = new BoundaryScanner(NONCE, 16)
    expect(scanner.push(Buffer.alloc(10, 0x61))).toEqual({ kind: 'pending' })
    expect(scanner.push(Buffer.from(marker('pid', '5')))).toEqual({ kind: 'started', pid: 5, rest: Buffer.alloc(0) })
  })
})

describe('buildStartWrapper', () => {
  it('rejects a relative cwd, an empty argv, an empty program and NUL anywhere with InvalidArgumentError', () => {
    const cases: [readonly string[], string, Record<string, string>][] = [
      [['/bin/sh'], 'relative/dir', {}],
      [['/bin/sh'], '', {}],
      [['/bin/sh'], '~/x', {}],
      [[], '/', {}],
      [[''], '/', {}],
      [['/bin/sh', 'a\0b'], '/', {}],
      [['/bin/s\0h'], '/', {}],
      [['/bin/sh'], '/tmp\0', {}],
      [['/bin/sh'], '/', { A: 'x\0' }],
      [['/bin/sh'], '/', { 'A\0': 'x' }],
      [['/bin/sh'], '/', { 'A=B': 'x' }],
      [['/bin/sh'], '/', { '': 'x' }],
    ]
    for (const [argv, cwd, env] of cases) {
      expect(() => buildStartWrapper(argv, cwd, env), JSON.stringify([argv, cwd, env])).toThrow(InvalidArgumentError)
    }
    expect(() => buildStartWrapper([], '/', {})).toThrow('invalid argv: expected a non-empty program name at argv[0]')
    expect(() => buildStartWrapper(['/bin/sh'], 'rel', {})).toThrow('cwd must be an absolute path in the remote world: "rel"')
  })

  it('uses a fresh 128-bit nonce each time and never writes it as one run of bytes', () => {
    const a = buildStartWrapper(['/bin/sh'], '/', {})
    const b = buildStartWrapper(['/bin/sh'], '/', {})
    expect(a.nonce).toMatch(/^[0-9a-f]{32}$/)
    expect(b.nonce).not.toBe(a.nonce)
    expect(a.script).not.toContain(`DSHB${a.nonce}`)
  })

  it('applies a valid window size with stty before the pid marker (so no SIGWINCH reaches the program later), with a saved state in $1 restored by the same stty, and omits an invalid size', () => {
    const sized = buildStartWrapper(['/bin/sh'], '/', {}, { rows: 40, cols: 160 })
    const line = 'stty ${1:+"$1"} rows 40 cols 160 2>/dev/null || { stty "$1"; stty rows 40 cols 160; } 2>/dev/null'
    const stty = sized.script.indexOf(line)
    expect(stty).toBeGreaterThan(0)
    expect(stty).toBeLessThan(sized.script.indexOf(':pid:'))
    for (const size of [{ rows: 0, cols: 160 }, { rows: 40, cols: -1 }, { rows: 1.5, cols: 80 }, { rows: 40, cols: 0x10000 }, { rows: Number.NaN, cols: 80 }]) {
      const script = buildStartWrapper(['/bin/sh'], '/', {}, size).script
      expect(script, JSON.stringify(size)).not.toContain('rows')
      expect(script).toContain('[ -z "$1" ] || stty "$1" 2>/dev/null')
    }
    expect(buildStartWrapper(['/bin/sh'], '/', {}).script).not.toContain('rows')
  })

  describe('run by a real local sh (no PTY: the marker ends in a bare \\n)', () => {
    let dir: string
    beforeAll(() => { dir = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-wrapper-'))) })
    afterAll(() => rmSync(dir, { recursive: true, force: true }))

    /** Run the script, scan its stdout, return the event, the process's pid and exit code. */
    async function run(argv: readonly string[], cwd: string, env: Record<string, string>, shell = 'sh', size?: { rows: number; cols: number }): Promise<{ event: BoundaryEvent; rest: Buffer; pid: number; code: number | null }> {
      const wrapper = buildStartWrapper(argv, cwd, env, size)
      const child = spawn(shell, ['-c', wrapper.script], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH, LEAK_ME: 'harness-only' } })
      const scanner = new BoundaryScanner(wrapper.nonce)
      let event: BoundaryEvent = { kind: 'pending' }
      const after: Buffer[] = []
      child.stdout.on('data', (chunk: Buffer) => {
        if (event.kind === 'pending') {
          event = scanner.push(chunk)
          if (event.kind === 'started') after.push(event.rest)
        } else after.push(chunk)
      })
      child.stderr.resume()
      const code = await new Promise<number | null>(resolve => child.once('close', resolve))
      return { event, rest: Buffer.concat(after), pid: child.pid!, code }
    }

    it('publishes the pid that then runs the program, in the cwd, with exactly the given environment', async () => {
      const env = { A: "it's $HOME", B: 'line1\nline2', EMPTY: '', PATH: '/usr/bin:/bin' }
      const result = await run(['sh', '-c', 'printf "%s\\0" "$$" "$PWD" "$@"; env -0', 'sh', '-n', 'héllo-世界', ''], dir, env)
      expect(result.code).toBe(0)
      expect(result.event.kind).toBe('started')
      const words = result.rest.toString('utf8').split('\0')
      expect(words.pop()).toBe('')
      const [pid, cwd, ...rest] = words
      expect(Number(pid)).toBe(result.pid)
      expect((result.event as { pid: number }).pid).toBe(result.pid)
      expect(cwd).toBe(dir)
      // The three arguments, then the environment: exactly the given entries, plus the PWD
      // that the program's own sh exports (nothing of the harness's environment, no LEAK_ME).
      expect(rest.slice(0, 3)).toEqual(['-n', 'héllo-世界', ''])
      expect(rest.slice(3).sort()).toEqual([...Object.entries(env).map(([name, value]) => `${name}=${value}`), `PWD=${dir}`].sort())
    })

    it('publishes the program\'s start time with its pid (exec keeps it), so an instantly exiting program keeps an identity', async () => {
      // The program prints field 22 of its own /proc stat line (comm is `sh`: no spaces).
      const result = await run(['sh', '-c', 'read -r l < /proc/$$/stat; set -- $l; printf "%s" "${22}"'], dir, { PATH: '/usr/bin:/bin' })
      expect(result.code).toBe(0)
      const event = result.event as Extract<BoundaryEvent, { kind: 'started' }>
      expect(event.kind).toBe('started')
      expect(event.pid).toBe(result.pid)
      expect(event.extra).toHaveLength(1)
      expect(event.extra![0]).toBeGreaterThan(0)
      expect(event.extra![0]).toBe(Number(result.rest.toString()))
    })

    it('starts normally when stty cannot apply the size (stdin is not a terminal here)', async () => {
      const result = await run(['/bin/echo', 'ran'], dir, {}, 'sh', { rows: 40, cols: 160 })
      expect(result.event.kind).toBe('started')
      expect(result.rest.toString()).toBe('ran\n')
      expect(result.code).toBe(0)
    })

    it('reports a missing cwd as a cwd failure with ENOENT (2) and exits 97 before running anything; a file as cwd is ENOTDIR (20)', async () => {
      const result = await run(['/bin/echo', 'ran'], join(dir, 'missing'), {})
      expect(result.event).toEqual({ kind: 'failed', reason: 'cwd', preamble: '', errno: 2 })
      expect(result.code).toBe(WRAPPER_EXIT.cwd)
      expect(result.rest.length).toBe(0)
      writeFileSync(join(dir, 'a-file'), '')
      const file = await run(['/bin/echo', 'ran'], join(dir, 'a-file'), {})
      expect(file.event).toEqual({ kind: 'failed', reason: 'cwd', preamble: '', errno: 20 })
    })

    it('reports a missing absolute program and a program not in PATH as exe failures (exit 127)', async () => {
      const absolute = await run(['/bin/nonexistent-shell'], dir, {})
      expect(absolute.event).toEqual({ kind: 'failed', reason: 'exe', preamble: '', errno: 2 })
      expect(absolute.code).toBe(WRAPPER_EXIT.executable)
      const bare = await run(['nonexistent-shell-xyz'], dir, { PATH: '/usr/bin:/bin' })
      expect(bare.event).toEqual({ kind: 'failed', reason: 'exe', preamble: '', errno: 2 })
      expect(bare.code).toBe(WRAPPER_EXIT.executable)
      // A directory is not an executable program: EACCES (13), as execve(2) says.
      const directory = await run([dir], dir, {})
      expect(directory.event).toEqual({ kind: 'failed', reason: 'exe', preamble: '', errno: 13 })
    })

    // `echo` is also a shell builtin: only an executable file in PATH counts, as for env(1).
    it.each(['sh', 'bash'])('resolves a bare program name through the given PATH only (wrapper run by %s)', async shell => {
      const found = await run(['echo', 'found'], '/', { PATH: `${dir}::/usr/bin:/bin` }, shell)
      expect(found.event.kind).toBe('started')
      expect(found.rest.toString()).toBe('found\n')
      expect(found.code).toBe(0)
      const notFound = await run(['echo', 'x'], '/', { PATH: dir }, shell)
      expect(notFound.event).toEqual({ kind: 'failed', reason: 'exe', preamble: '', errno: 2 })
      expect(notFound.code).toBe(WRAPPER_EXIT.executable)
      const emptyPath = await run(['echo', 'x'], '/', { PATH: '' }, shell)
      expect(emptyPath.event).toEqual({ kind: 'failed', reason: 'exe', preamble: '', errno: 2 })
    })
  })
})

describe('sessionMembers (teardown membership on a synthetic process table)', () => {
  const SHELL = { pid: 100, starttime: 5000 }
  const row = (pid: number, ppid: number, pgrp: number, session: number, state: string, starttime: number, tagged = false): RemoteProcess => ({ pid, ppid, pgrp, session, state, starttime, tagged })

  const table: RemoteProcess[] = [
    row(1, 0, 1, 1, 'S', 1), // init
    row(50, 1, 50, 50, 'S', 4000), // control program, own session
    row(100, 50, 100, 100, 'S', 5000), // the shell: session leader
    row(101, 100, 101, 100, 'S', 5001), // foreground job
    row(102, 101, 101, 100, 'R', 5002), // its child, same group
    row(103, 100, 103, 100, 'T', 5003), // stopped background job
    row(104, 100, 104, 100, 'Z', 5004), // zombie: excluded
    row(105, 1, 105, 100, 'S', 5005), // disowned, reparented to init, still in the session
    row(106, 103, 106, 106, 'S', 5006), // setsid child of a member: own session, descendant by ppid
    row(107, 106, 106, 106, 'S', 5007), // its child: descendant of a descendant
    row(108, 1, 108, 108, 'S', 5008), // unrelated process started after the shell
    row(109, 108, 109, 108, 'S', 5009), // its child
    row(110, 1, 110, 100, 'S', 4500), // pid-reuse fence: session id 100 but started BEFORE the shell
    row(111, 110, 111, 111, 'S', 5011), // child of the fenced one: not a member either
    row(112, 104, 112, 112, 'S', 5012), // child of the zombie: still a descendant (zombie's pid is live in the table)
    row(113, 100, 113, 100, 'X', 5013), // dead: excluded
  ]

  it('takes session members, ppid descendants at any depth, and excludes zombies, outsiders and pid-reuse', () => {
    const members = sessionMembers(table, SHELL).map(member => member.pid).sort((a, b) => a - b)
    expect(members).toEqual([100, 101, 102, 103, 105, 106, 107, 112])
  })

  it('returns the full rows of members', () => {
    const members = sessionMembers(table, SHELL)
    expect(members.find(member => member.pid === 103)).toEqual(row(103, 100, 103, 100, 'T', 5003))
  })

  it('fences the shell itself: a reused shell pid with an earlier start time is no member', () => {
    const reused = [row(100, 1, 100, 100, 'S', 4999), row(120, 100, 120, 100, 'S', 6000)]
    // The row for pid 100 started before the identity we ask about: the shell we know is gone.
    // Its session members that started after our shell still share its session id, and are kept
    // (a newer process in session 100 can only exist if the session leader pid 100 existed).
    expect(sessionMembers(reused, SHELL).map(member => member.pid)).toEqual([120])
  })

  it('keeps session members after the shell exited (the shell row is gone or a zombie)', () => {
    const afterExit = [row(1, 0, 1, 1, 'S', 1), row(100, 1, 100, 100, 'Z', 5000), row(105, 1, 105, 100, 'S', 5005), row(130, 105, 105, 100, 'S', 5100)]
    expect(sessionMembers(afterExit, SHELL).map(member => member.pid)).toEqual([105, 130])
    expect(sessionMembers(afterExit.filter(entry => entry.pid !== 100), SHELL).map(member => member.pid)).toEqual([105, 130])
  })

  it('is empty for an empty table and for a table of zombies', () => {
    expect(sessionMembers([], SHELL)).toEqual([])
    expect(sessionMembers([row(100, 1, 100, 100, 'Z', 5000), row(101, 100, 101, 100, 'Z', 5001)], SHELL)).toEqual([])
  })

  it('keeps known identities and their descendants as members after they left the tree and the session', () => {
    // 140 was a setsid grandchild; its parent died, so it now belongs to init and to session 140.
    const orphaned = [row(1, 0, 1, 1, 'S', 1), row(100, 1, 100, 100, 'S', 5000), row(140, 1, 140, 140, 'S', 5040), row(141, 140, 140, 140, 'S', 5041), row(150, 1, 150, 150, 'S', 5050)]
    expect(sessionMembers(orphaned, SHELL).map(member => member.pid)).toEqual([100])
    expect(sessionMembers(orphaned, SHELL, [{ pid: 140, starttime: 5040 }]).map(member => member.pid)).toEqual([100, 140, 141])
    // The identity fence holds: the same pid with another start time is not the known process.
    expect(sessionMembers(orphaned, SHELL, [{ pid: 140, starttime: 5039 }]).map(member => member.pid)).toEqual([100])
    // A known identity that is now a zombie is not returned.
    expect(sessionMembers([row(140, 1, 140, 140, 'Z', 5040)], SHELL, [{ pid: 140, starttime: 5040 }])).toEqual([])
  })

  it('takes a process carrying the session tag as a member with its descendants, however it left', () => {
    // 160: a `setsid cmd &` escapee of an interactive shell (its forking parent exited at once):
    // init's child, its own session; only the tag in its environment links it to the shell.
    const escaped = [row(1, 0, 1, 1, 'S', 1), row(100, 1, 100, 100, 'S', 5000), row(160, 1, 160, 160, 'S', 5060, true), row(161, 160, 160, 160, 'S', 5061), row(170, 1, 170, 170, 'S', 5070)]
    expect(sessionMembers(escaped, SHELL).map(member => member.pid)).toEqual([100, 160, 161])
    // The start-time fence holds for tagged rows too: a tagged process older than the shell is not its member.
    expect(sessionMembers([row(100, 1, 100, 100, 'S', 5000), row(180, 1, 180, 180, 'S', 4000, true)], SHELL).map(member => member.pid)).toEqual([100])
  })

  it('terminates on a ppid cycle', () => {
    const cycle = [row(100, 1, 100, 100, 'S', 5000), row(200, 201, 200, 200, 'S', 6000), row(201, 200, 200, 200, 'S', 6001)]
    expect(sessionMembers(cycle, SHELL).map(member => member.pid)).toEqual([100])
  })
})
