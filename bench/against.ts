/**
 * `npm run bench -- --against [COMMIT] ...`: the same bench run on this tree and on an earlier
 * commit, interleaved (pinned, this, pinned, this: load on the machine hits both sides alike),
 * then each row's median beside the pinned commit's and the ratio this / pinned. A regression
 * shows up in the run of the commit that causes it, not in a comparison with figures of another
 * day on another load (issue 33, item 6: SSH rows read as slower on a loaded machine, and only
 * a side-by-side run could tell which were).
 *
 * COMMIT defaults to the one pinned in bench/baseline-commit.txt (its first word). The pinned
 * commit is checked out once as a detached git worktree under node_modules/.cache/ (git-ignored),
 * with this tree's node_modules linked in when both lockfiles are the same, else `npm ci`; its
 * world tools are built when it has them. Flags the pinned commit's bench does not know (it
 * parses strictly) are left off its runs and named on stderr; rows only one side has are listed
 * with `-`. Each side's runs write their own JSON; the comparison goes to `--out` (default
 * bench/results/against.json).
 * @module bench/against
 */
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
const ROOT = dirname(HERE)
/** Where pinned commits are checked out (node_modules/ is git-ignored). */
const CACHE = join(ROOT, 'node_modules', '.cache', 'dsh-bench-against')
/** Pinned and this tree alternate this many times each (A, B, A, B). */
export const AGAINST_ROUNDS = 2

/** The commit bench/baseline-commit.txt pins (its first word). */
export function pinnedCommit(): string {
  const word = readFileSync(join(HERE, 'baseline-commit.txt'), 'utf8').trim().split(/\s+/)[0]
  if (word === undefined || word === '') throw new Error('bench/baseline-commit.txt names no commit')
  return word
}

function git(args: readonly string[], cwd = ROOT): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim()
}

/** Check `commit` out under the cache, with node_modules and world tools; its directory. */
function prepare(commit: string): string {
  const sha = git(['rev-parse', '--verify', `${commit}^{commit}`])
  const dir = join(CACHE, sha.slice(0, 12))
  if (!existsSync(join(dir, '.git'))) {
    mkdirSync(CACHE, { recursive: true })
    git(['worktree', 'add', '--detach', dir, sha])
  }
  if (!existsSync(join(dir, 'node_modules'))) {
    if (sameLock(sha)) symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'))
    else execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: ['ignore', 2, 'inherit'] })
  }
  if (existsSync(join(dir, 'world', 'build.sh'))) execFileSync('bash', ['world/build.sh'], { cwd: dir, stdio: ['ignore', 2, 'inherit'] })
  else if (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).scripts?.['build:world-tools'] !== undefined) {
    execFileSync('npm', ['run', 'build:world-tools'], { cwd: dir, stdio: ['ignore', 2, 'inherit'] })
  }
  return dir
}

/** The pinned commit's lockfile is this tree's (working copy included). */
function sameLock(sha: string): boolean {
  try {
    return execFileSync('git', ['show', `${sha}:package-lock.json`], { cwd: ROOT, maxBuffer: 1 << 28 }).equals(readFileSync(join(ROOT, 'package-lock.json')))
  } catch {
    return false
  }
}

/** `argv` without the flags (and their values) that `dir`'s bench/run.ts does not declare. */
function flagsFor(dir: string, argv: readonly string[]): { kept: string[]; dropped: string[] } {
  const source = readFileSync(join(dir, 'bench', 'run.ts'), 'utf8')
  const kept: string[] = []
  const dropped: string[] = []
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!
    const name = arg.replace(/^--(no-)?/, '').split('=')[0]!
    const takesValue = !arg.includes('=') && argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('--') && !arg.startsWith('--no-')
    const word = takesValue ? [arg, argv[i + 1]!] : [arg]
    if (takesValue) i += 1
    if (source.includes(`'${name}'`) || source.includes(`${name}: {`)) kept.push(...word)
    else dropped.push(...word)
  }
  return { kept, dropped }
}

interface Row { metric: string; world: string; median_ms?: number; mb_per_s?: number; section?: string }

function runBench(dir: string, argv: readonly string[], out: string): Promise<Row[]> {
  // This Node (the `node` devDependency under npm scripts) runs both sides.
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', 'bench/run.ts', ...argv, '--out', out], { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] })
    child.once('error', reject)
    child.once('exit', code => {
      if (code !== 0) reject(new Error(`the bench in ${dir} exited ${code}`))
      else resolve((JSON.parse(readFileSync(out, 'utf8')) as Row[]).filter(row => row.median_ms !== undefined))
    })
  })
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * Run the comparison. `argv` is the bench's own arguments without `--against` and `--out`.
 * @throws Error when the commit cannot be checked out or a side's bench fails.
 */
export async function runAgainst(commit: string | undefined, argv: readonly string[], out: string): Promise<void> {
  const against = commit === undefined || commit === '' || commit === 'pinned' ? pinnedCommit() : commit
  const pinnedDir = prepare(against)
  const sha = git(['rev-parse', 'HEAD'], pinnedDir).slice(0, 12)
  const here = git(['rev-parse', '--short=12', 'HEAD'])
  const { kept, dropped } = flagsFor(pinnedDir, argv)
  if (dropped.length > 0) console.error(`[bench] --against ${sha}: its bench does not know ${dropped.join(' ')}; left off its runs`)
  mkdirSync(join(HERE, 'results'), { recursive: true })
  const sides: { pinned: Row[][]; current: Row[][] } = { pinned: [], current: [] }
  for (let round = 0; round < AGAINST_ROUNDS; round += 1) {
    console.error(`[bench] --against ${sha}: round ${round + 1}/${AGAINST_ROUNDS}, pinned`)
    sides.pinned.push(await runBench(pinnedDir, kept, join(HERE, 'results', `against-pinned-${round}.json`)))
    console.error(`[bench] --against ${sha}: round ${round + 1}/${AGAINST_ROUNDS}, this tree (${here})`)
    sides.current.push(await runBench(ROOT, argv, join(HERE, 'results', `against-current-${round}.json`)))
  }
  const key = (row: Row): string => `${row.world}\u0000${row.metric}`
  const pool = (runs: Row[][]): Map<string, { ms: number[]; mbs: number[]; row: Row }> => {
    const map = new Map<string, { ms: number[]; mbs: number[]; row: Row }>()
    for (const rows of runs) {
      for (const row of rows) {
        const entry = map.get(key(row)) ?? { ms: [], mbs: [], row }
        entry.ms.push(row.median_ms!)
        if (row.mb_per_s !== undefined) entry.mbs.push(row.mb_per_s)
        map.set(key(row), entry)
      }
    }
    return map
  }
  const pinned = pool(sides.pinned)
  const current = pool(sides.current)
  const keys = [...new Set([...current.keys(), ...pinned.keys()])]
  const records = keys.map(k => {
    const a = pinned.get(k)
    const b = current.get(k)
    const row = (b ?? a)!.row
    const pinnedMs = a === undefined ? undefined : median(a.ms)
    const currentMs = b === undefined ? undefined : median(b.ms)
    return {
      section: 'against', metric: row.metric, world: row.world, pinned_commit: sha, current_commit: here, rounds: AGAINST_ROUNDS,
      pinned_median_ms: pinnedMs, current_median_ms: currentMs,
      pinned_run_medians_ms: a?.ms, current_run_medians_ms: b?.ms,
      ratio: pinnedMs !== undefined && currentMs !== undefined && pinnedMs > 0 ? currentMs / pinnedMs : undefined,
    }
  })
  const fmt = (ms: number | undefined): string => ms === undefined ? '-' : ms >= 100 ? String(Math.round(ms)) : ms.toPrecision(3)
  console.log(`\nthis tree (${here}) against ${sha}: median of ${AGAINST_ROUNDS} interleaved runs' medians each, ratio this / pinned (> 1: slower now)\n`)
  console.log('| metric | world | pinned ms | this ms | ratio |')
  console.log('|---|---|--:|--:|--:|')
  for (const r of records) console.log(`| ${r.metric} | ${r.world} | ${fmt(r.pinned_median_ms)} | ${fmt(r.current_median_ms)} | ${r.ratio === undefined ? '-' : `${r.ratio.toFixed(2)}x`} |`)
  writeFileSync(out, `${JSON.stringify(records, null, 2)}\n`)
  console.log(`\nwrote ${out}`)
}
