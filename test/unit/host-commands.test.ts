/**
 * The suite touches the host only through Node and the Docker engine that docker/ensure-world.sh
 * provides, plus the few commands .ci/host-commands.txt lists with what installs each. A test
 * that starts a host tool nothing here installs (bwrap, ssh-agent, python) passes on a
 * development machine and fails on the next: this finds every command a test, bench or source
 * file starts with child_process and checks it is declared.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/built-package.ts'

/** The declared commands (first word of each non-comment line). */
function declared(): Set<string> {
  return new Set(readFileSync(join(ROOT, '.ci/host-commands.txt'), 'utf8').split('\n').map(line => line.trim()).filter(line => line.length > 0 && !line.startsWith('#')).map(line => line.split(/\s+/)[0]!))
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap(name => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : []
  })
}

/**
 * Calls of child_process's `spawn`, `execFile`, their Sync forms and `promisify(execFile)`, with
 * the first argument's text (not a method such as `runtime.spawn(`: no `.` before the name).
 */
const CALL = /(?<![.\w])(?:spawn|spawnSync|execFile|execFileSync|execSync|promisify\(execFile\))\(\s*([^,)]+)/g
/** First arguments that are not a host command: this Node, a file of the project, or a shell from a list checked below. */
const NOT_HOST = [/^process\.execPath$/, /^join\(ROOT\b/, /^shell$/]

describe('host commands', () => {
  it('every command a test, bench or source file starts is declared in .ci/host-commands.txt', () => {
    const known = declared()
    const undeclared: string[] = []
    for (const file of ['src', 'test', 'bench'].flatMap(dir => sources(join(ROOT, dir)))) {
      const text = readFileSync(file, 'utf8')
      if (!text.includes("from 'node:child_process'")) continue
      // `const run = promisify(execFile)`: calls of the alias start commands too.
      const aliases = [...text.matchAll(/const (\w+) = promisify\(execFile\)/g)].map(alias => alias[1]!)
      const calls = [...text.matchAll(CALL), ...aliases.flatMap(alias => [...text.matchAll(new RegExp(`(?<![.\\w])${alias}\\(\\s*([^,)]+)`, 'g'))])]
      for (const match of calls) {
        const argument = match[1]!.trim()
        if (NOT_HOST.some(pattern => pattern.test(argument))) continue
        const literal = /^'([^']+)'$/.exec(argument)?.[1]
        if (literal === undefined || !known.has(literal)) undeclared.push(`${relative(ROOT, file)}: ${match[0]}`)
      }
    }
    expect(undeclared).toEqual([])
  })

  it('every declared command is installed by the README\'s path (npm ci, npm test\'s pretest, Debian, a test itself), not by .ci/run alone', () => {
    const lines = readFileSync(join(ROOT, '.ci/host-commands.txt'), 'utf8').split('\n').filter(line => line.trim().length > 0 && !line.startsWith('#'))
    const readmePath = /Debian \(essential|npm ci|devDependency|Node\.js|docker\/ensure-world\.sh|docker\/ensure-host-tools\.sh|world\/build\.sh|the clone of this checkout|itself/
    const onlyCi = lines.filter(line => !readmePath.test(line.replace(/^\S+\s+/, '')))
    expect(onlyCi).toEqual([])
    // And the pretest runs the installers it names.
    const pretest = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.pretest
    expect(pretest).toBe('bash docker/ensure-world.sh && bash docker/ensure-host-tools.sh && bash world/build.sh')
  })

  it('the shells the shell-quoting and wrapper tests iterate over are declared too', () => {
    const known = declared()
    for (const file of ['test/unit/quote.test.ts', 'test/unit/boundary.test.ts']) {
      const lists = [...readFileSync(join(ROOT, file), 'utf8').matchAll(/\[((?:'[a-z]+'(?:, )?)+)\] as const/g)].flatMap(match => [...match[1]!.matchAll(/'([a-z]+)'/g)].map(word => word[1]!))
      for (const shell of lists) expect(known.has(shell), `${file}: ${shell}`).toBe(true)
    }
  })
})
