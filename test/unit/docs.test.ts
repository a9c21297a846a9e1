/**
 * The README and the docs pages, checked against the real CLI and packages where a check can
 * be made without running a world: every `dsh-remote-worlds` command line names a command and
 * options the CLI has (from its own `--help`), every `npm run` script exists, every file a
 * command or a link names exists, and every package a code block imports resolves (this
 * package's exports, or an installed upstream package). The examples that run a world are run
 * by their own tests (test/package/packed.test.ts, test/testcontainers/readme.test.ts).
 */
import { execFile } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/built-package.ts'

const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter(name => name.endsWith('.md')).map(name => `docs/${name}`)]
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; exports: Record<string, unknown> }

/** The fenced code blocks of a page: language and lines. */
function blocks(page: string): { lang: string; lines: string[] }[] {
  const text = readFileSync(join(ROOT, page), 'utf8')
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map(match => ({ lang: match[1]!, lines: match[2]!.split('\n') }))
}

/** The words of a shell line (quotes joined, a trailing `# comment` dropped). */
function words(line: string): string[] {
  const out: string[] = []
  for (const match of line.matchAll(/"([^"]*)"|'([^']*)'|(#.*$)|(\S+)/g)) {
    if (match[3] !== undefined) break
    out.push(match[1] ?? match[2] ?? match[4]!)
  }
  return out
}

/** `dsh-remote-worlds COMMAND ARGS` in any of its documented spellings: [command, args]. */
function cliInvocation(argv: readonly string[]): { command: string; args: string[] } | undefined {
  const at = (prefix: readonly string[]): number => {
    for (let index = 0; index + prefix.length <= argv.length; index += 1) {
      if (prefix.every((word, offset) => argv[index + offset] === word)) return index + prefix.length
    }
    return -1
  }
  for (const prefix of [['npm', 'run', 'dsh-remote-worlds', '--'], ['npm', 'run', 'dsh-remote', '--'], ['npx', 'dsh-remote-worlds'], ['npx', 'tsx', 'src/cli/main.ts'], ['node_modules/.bin/dsh-remote-worlds']]) {
    const start = at(prefix)
    if (start >= 0 && argv[start] !== undefined && !argv[start]!.startsWith('-') && argv[start] !== '<command>') return { command: argv[start]!, args: argv.slice(start + 1) }
  }
  return undefined
}

const helpCache = new Map<string, Promise<Set<string>>>()

/** The long options of a CLI command, from its own `--help`. */
function optionsOf(command: string): Promise<Set<string>> {
  let pending = helpCache.get(command)
  if (pending === undefined) {
    pending = promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', command, '--help'], { cwd: ROOT }).then(({ stdout }) => new Set([...stdout.matchAll(/--[a-z][a-z-]*/g)].map(match => match[0])))
    helpCache.set(command, pending)
  }
  return pending
}

describe.each(PAGES)('%s', page => {
  it('names only dsh-remote-worlds commands and options the CLI has, npm scripts that exist, and files that exist', async () => {
    const problems: string[] = []
    for (const block of blocks(page).filter(candidate => candidate.lang === 'sh' || candidate.lang === 'bash')) {
      for (const line of block.lines) {
        const argv = words(line)
        const run = argv.indexOf('run')
        if (argv[0] === 'npm' && run === 1 && argv[2] !== undefined && pkg.scripts[argv[2]] === undefined) problems.push(`no npm script ${argv[2]}: ${line}`)
        const cli = cliInvocation(argv)
        if (cli !== undefined) {
          const options = await optionsOf(cli.command)
          if (options.size === 0) problems.push(`no CLI command ${cli.command}: ${line}`)
          for (const option of cli.args.filter(arg => arg.startsWith('--'))) {
            if (!options.has(option.split('=')[0]!)) problems.push(`${cli.command} has no option ${option}: ${line}`)
          }
          for (const file of cli.args.filter(arg => /^(test|src|docker|bench)\//.test(arg))) {
            if (!existsSync(join(ROOT, file))) problems.push(`no file ${file}: ${line}`)
          }
        }
      }
    }
    expect(problems).toEqual([])
  }, 60_000)

  it('imports only packages that resolve: this package\'s exports, or installed ones', () => {
    const problems: string[] = []
    for (const block of blocks(page).filter(candidate => ['js', 'ts', 'mjs'].includes(candidate.lang))) {
      for (const match of block.lines.join('\n').matchAll(/from '([^']+)'|import\('([^']+)'\)/g)) {
        const name = match[1] ?? match[2]!
        if (name.startsWith('.') || name.startsWith('node:')) continue
        if (name === 'dsh-remote-worlds' || name.startsWith('dsh-remote-worlds/')) {
          const sub = name === 'dsh-remote-worlds' ? '.' : `./${name.slice('dsh-remote-worlds/'.length)}`
          if (pkg.exports[sub] === undefined) problems.push(`${name} is not an export of the package`)
          continue
        }
        const base = name.startsWith('@') ? name.split('/').slice(0, 2).join('/') : name.split('/')[0]!
        if (!existsSync(join(ROOT, 'node_modules', base, 'package.json'))) problems.push(`${name} is not installed`)
      }
    }
    expect(problems).toEqual([])
  })

  it('links only to files that exist', () => {
    const text = readFileSync(join(ROOT, page), 'utf8')
    const missing = [...text.matchAll(/\]\(([^)\s#]+)(#[^)]*)?\)/g)]
      .map(match => match[1]!)
      .filter(target => !/^[a-z]+:/.test(target))
      .filter(target => !existsSync(join(ROOT, dirname(page), target)))
    expect(missing).toEqual([])
  })
})
