/**
 * The launch fragment of a world tool (src/providers/remote/world-tools/launch.ts), run by this
 * machine's own `sh` on a copy in a scratch cache laid out as install.ts lays one out
 * (CACHE/SHA256/NAME, directories 0700): a verified copy runs as the open file it hashed, and a
 * copy that fails one of its checks (its directory or cache opened to the group, its content not
 * the build's) is refused with exit 126 and the mark, and never runs.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { UNVERIFIED_TOOL_EXIT, UNVERIFIED_TOOL_MARK, type WorldToolCopy, worldToolCommand } from '../../src/providers/remote/world-tools/launch.ts'

const scratch = mkdtempSync(join(tmpdir(), 'dsh-world-tool-launch-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** The tool: a script that says it ran, with its arguments. */
const TOOL = '#!/bin/sh\necho "ran $*"\n'
const SHA = createHash('sha256').update(TOOL).digest('hex')

/** A fresh cache holding one copy of TOOL (or of `content`), laid out as install.ts does. */
function cacheWithCopy(name: string, content = TOOL): WorldToolCopy & { cache: string; directory: string } {
  const cache = join(scratch, name)
  const directory = join(cache, SHA)
  mkdirSync(directory, { recursive: true, mode: 0o700 })
  chmodSync(cache, 0o700)
  const path = join(directory, 'tool')
  writeFileSync(path, content, { mode: 0o700 })
  return { name: 'dsh-pty', path, sha256: SHA, cache, directory }
}

/** Run the fragment with `sh -c`; its exit code, stdout and stderr. */
function launch(copy: WorldToolCopy, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise(resolve => {
    execFile('sh', ['-c', worldToolCommand(copy, args)], (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr })
    })
  })
}

describe('a world tool\'s launch fragment', () => {
  it('runs a verified copy with its arguments', async () => {
    expect(await launch(cacheWithCopy('verified'), ['one', 'two'])).toEqual({ code: 0, stdout: 'ran one two\n', stderr: '' })
  })

  // find(1) and sha256sum run side by side: their lines come in either order.
  it.each([
    ['its directory writable by its group', 'directory', 0o770],
    ['its cache directory writable by others', 'cache', 0o702],
  ] as const)('refuses a copy with %s, and the copy never runs', async (_, which, mode) => {
    const copy = cacheWithCopy(`open-${which}`)
    chmodSync(copy[which], mode)
    const { code, stdout, stderr } = await launch(copy, [])
    expect([code, stdout]).toEqual([UNVERIFIED_TOOL_EXIT, ''])
    const head = `${UNVERIFIED_TOOL_MARK} ${copy.path}: it, its directory or its cache directory is writable by others, or its sha256 is not ${SHA} (the build this client shipped): `
    expect(stderr.startsWith(head)).toBe(true)
    expect(stderr.slice(head.length).split('\n').sort()).toEqual(['', copy[which], `${SHA}  -`])
  })

  it('refuses a copy whose content is not the build\'s, naming the hash it has', async () => {
    const planted = '#!/bin/sh\necho planted\n'
    const copy = cacheWithCopy('planted', planted)
    const { code, stdout, stderr } = await launch(copy, [])
    expect([code, stdout]).toEqual([UNVERIFIED_TOOL_EXIT, ''])
    expect(stderr).toBe(`${UNVERIFIED_TOOL_MARK} ${copy.path}: it, its directory or its cache directory is writable by others, or its sha256 is not ${SHA} (the build this client shipped): ${createHash('sha256').update(planted).digest('hex')}  -\n`)
  })
})
