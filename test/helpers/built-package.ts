/**
 * The package as a user installs it, for loader tests: `tsc` output plus control.sh and the
 * world tools (what the `build` script makes) with the package.json, installed into a DSH profile's node_modules,
 * where the upstream loader resolves plugin names from the profile's `cordis.yml`.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'

export const ROOT = resolve(import.meta.dirname, '../..')

/**
 * A DSH profile layer as a user writes it (for `BuiltProfile.writePatch`): insert the session,
 * agent and terminal services and the sandbox policy (`mode`, `workspaceRoot`), then the world's
 * own rows (`world`: YAML list items, each line indented by four spaces), terminal-bash, and
 * `after` (more rows, indented the same).
 * @param comment - the layer's first line, after `# `.
 */
export function worldLayer(options: { comment: string; mode: string; workspaceRoot: string; world: string; after?: string }): string {
  return `# ${options.comment}
- insert:
    - id: session
      name: '@deepseek-ai/dsh-session'
    - id: agent
      name: '@deepseek-ai/dsh-agent'
    - id: terminal
      name: '@deepseek-ai/dsh-terminal'
    - id: sandbox-policy
      name: '@deepseek-ai/dsh-sandbox-policy'
      config:
        mode: ${options.mode}
        workspaceRoot: ${options.workspaceRoot}
${options.world.replace(/\n$/, '')}
    - id: terminal-bash
      name: '@deepseek-ai/dsh-terminal-bash'
${options.after === undefined ? '' : `${options.after.replace(/\n$/, '')}\n`}`
}

/** The tarball `npm pack` made of this checkout, and the files it holds (paths inside `package/`). */
export interface PackedTarball {
  /** Absolute path of `dsh-remote-worlds-VERSION.tgz`. */
  path: string
  /** File name (`dsh-remote-worlds-0.1.0.tgz`). */
  filename: string
  files: string[]
}

/**
 * `npm pack` of this checkout (its `prepack` builds dist/ and the world tools), made once per
 * content of the tree: the key is the SHA-256 of every file git tracks or would track (paths and
 * bytes), so two test files of one run share one build (~40 s each), and an edited file makes a
 * new one. The tarball lives in `os.tmpdir()/dsh-remote-worlds-packs/KEY/`; callers copy it if
 * they need it elsewhere. Test files run one at a time (vitest.config.ts), so no lock is needed.
 * @throws the `npm pack` failure (its stderr in the message).
 */
export async function packedTarball(): Promise<PackedTarball> {
  const { stdout } = await promisify(execFile)('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, maxBuffer: 64 << 20 })
  const hash = createHash('sha256')
  for (const file of stdout.split('\0').filter(name => name.length > 0).sort()) {
    const path = join(ROOT, file)
    if (!existsSync(path)) continue
    hash.update(`${file}\0`).update(readFileSync(path)).update('\0')
  }
  const dir = join(tmpdir(), 'dsh-remote-worlds-packs', hash.digest('hex').slice(0, 32))
  const report = join(dir, 'pack.json')
  if (!existsSync(report)) {
    const scratch = `${dir}.${process.pid}`
    mkdirSync(scratch, { recursive: true })
    const packed = await promisify(execFile)('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: ROOT, maxBuffer: 16 << 20 })
    writeFileSync(join(scratch, 'pack.json'), packed.stdout)
    // Published whole or not at all: a pack killed midway leaves only its scratch folder.
    renameSync(scratch, dir)
  }
  const [entry] = JSON.parse(readFileSync(report, 'utf8')) as { filename: string; files: { path: string }[] }[]
  return { path: join(dir, entry!.filename), filename: entry!.filename, files: entry!.files.map(file => file.path) }
}

/** A profile directory with `dsh-remote-worlds` and `@deepseek-ai/*` in its node_modules. */
export interface BuiltProfile {
  /** The profile directory (holds `cordis.yml`, an empty entry list). */
  profile: string
  /** The built package directory. */
  pkg: string
  /** Write the profile's `cordis.patch.yml`; returns its path. */
  writePatch(text: string): string
}

/**
 * Build the package into `tmp/pkg` and make `tmp/profile` with it installed.
 * @param tmp - a scratch directory (the caller removes it).
 */
export async function buildProfile(tmp: string): Promise<BuiltProfile> {
  const pkg = join(tmp, 'pkg')
  const profile = join(tmp, 'profile')
  await promisify(execFile)(join(ROOT, 'node_modules/.bin/tsc'), ['-p', join(ROOT, 'tsconfig.json'), '--outDir', join(pkg, 'dist')], { cwd: ROOT })
  mkdirSync(join(pkg, 'dist/world/control'), { recursive: true })
  copyFileSync(join(ROOT, 'world/control/control.sh'), join(pkg, 'dist/world/control/control.sh'))
  // The world tools (the file server, ripgrep), built by the pretest step as by `npm run build`.
  symlinkSync(join(ROOT, 'dist/world-tools'), join(pkg, 'dist/world-tools'))
  copyFileSync(join(ROOT, 'package.json'), join(pkg, 'package.json'))
  symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'))
  mkdirSync(join(profile, 'node_modules'), { recursive: true })
  symlinkSync(pkg, join(profile, 'node_modules', 'dsh-remote-worlds'))
  symlinkSync(join(ROOT, 'node_modules/@deepseek-ai'), join(profile, 'node_modules', '@deepseek-ai'))
  writeFileSync(join(profile, 'cordis.yml'), '[]\n')
  return {
    profile,
    pkg,
    writePatch: text => {
      const path = join(profile, 'cordis.patch.yml')
      writeFileSync(path, text)
      return path
    },
  }
}
