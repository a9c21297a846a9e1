/**
 * The Node.js check every entry point imports first (src/node-version.ts): which versions pass,
 * and what an old Node sees. The refusal is printed to stderr by the module itself, once per
 * process, and then thrown, because the dsh CLI's loader catches a plugin's import error and,
 * under Node 20, shows nothing of it.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { REQUIRED_NODE, nodeSupported, nodeVersionMessage } from '../../src/node-version.ts'
import { ROOT } from '../helpers/built-package.ts'

const tmp = mkdtempSync(join(tmpdir(), 'dsh-remote-node-version-'))
const MODULE = pathToFileURL(join(ROOT, 'src/node-version.ts')).href

afterAll(() => {
  rmSync(tmp, { recursive: true, force: true })
})

/**
 * Run `script` (an ES module) in a Node that reports itself as 20.20.2, with tsx for the
 * TypeScript source. Resolves with the exit code and both streams; never rejects.
 */
async function underOldNode(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  // A preload that makes this Node report an older version, as Node 20 would.
  const preload = join(tmp, 'old-node.mjs')
  writeFileSync(preload, "Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '20.20.2' } })\n")
  const main = join(tmp, `main-${Math.random().toString(36).slice(2)}.mjs`)
  writeFileSync(main, script)
  return promisify(execFile)(process.execPath, ['--import', 'tsx', '--import', pathToFileURL(preload).href, main], { cwd: ROOT }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  )
}

describe('nodeSupported', () => {
  it('accepts 22.19.0 and later, refuses earlier', () => {
    expect(REQUIRED_NODE).toBe('22.19.0')
    expect(['22.19.0', '22.23.3', '23.0.0', '24.1.0', '22.19'].map(nodeSupported)).toEqual([true, true, true, true, true])
    expect(['22.18.9', '22.0.0', '20.20.2', '18.20.8'].map(nodeSupported)).toEqual([false, false, false, false])
  })
})

describe('on a Node older than 22.19', () => {
  const message = nodeVersionMessage('20.20.2', process.execPath)

  it('prints the refusal to stderr itself, then throws it, when a caller catches the import error and prints nothing', async () => {
    // What the dsh CLI's loader does with a plugin's import error under Node 20: catch it.
    const result = await underOldNode(`
try { await import(${JSON.stringify(MODULE)}) } catch (error) { console.log('caught: ' + error.message) }
`)
    expect(message).toBe(`dsh-remote-worlds needs Node.js >= 22.19.0; this is Node.js 20.20.2 (${process.execPath}). Run it with Node 22.19 or later (the upstream DSH packages need it too).`)
    expect(result).toEqual({ code: 0, stdout: `caught: ${message}\n`, stderr: `${message}\n` })
  })

  it('prints it once per process, however many copies of the package are imported', async () => {
    // Two URLs, two module instances: as two installs of the package in one process would be.
    const result = await underOldNode(`
for (const copy of ['a', 'b']) {
  try { await import(${JSON.stringify(MODULE)} + '?copy=' + copy) } catch (error) { console.log(copy + ': ' + error.message) }
}
`)
    expect(result).toEqual({ code: 0, stdout: `a: ${message}\nb: ${message}\n`, stderr: `${message}\n` })
  })
})
