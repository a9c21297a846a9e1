/**
 * The package as a user installs it, for loader tests: `tsc` output plus control.sh and the
 * world tools (what the `build` script makes) with the package.json, installed into a DSH profile's node_modules,
 * where the upstream loader resolves plugin names from the profile's `cordis.yml`.
 */
import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'

export const ROOT = resolve(import.meta.dirname, '../..')

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
  copyFileSync(join(ROOT, 'src/providers/remote/control.sh'), join(pkg, 'dist/src/providers/remote/control.sh'))
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
