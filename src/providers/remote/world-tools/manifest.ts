/**
 * The programs this package carries for remote worlds, on the host: where their builds are
 * (`dist/world-tools/linux-ARCH/NAME`, made by world/build.sh) and their content hash,
 * which names their place in a world's cache (install.ts).
 * @module dsh-remote-worlds/providers/remote/world-tools/manifest
 */
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { WorldToolUnavailableError } from '../errors.ts'

/**
 * The tools: the file server of the filesystem half (world/fsd/), the terminal's
 * world-side parent (world/dsh-pty/), the network relay (world/relay-net/), the holder of
 * background jobs (world/dsh-job/), and ripgrep
 * (world/rg/ripgrep.txt).
 */
export type WorldToolName = 'dsh-fsd' | 'dsh-pty' | 'dsh-relay' | 'dsh-job' | 'rg'

/** Architectures there are builds for, by `uname -m` (control.sh reports them so). */
export type WorldArch = 'x86_64' | 'aarch64'

/** One build of a tool. */
export interface WorldToolBuild {
  name: WorldToolName
  arch: WorldArch
  /** Where the build is on the host. */
  hostPath: string
  /** Its bytes. */
  bytes: Buffer
  /** SHA-256 of the bytes, lower-case hex: the name of its directory in a world's cache. */
  sha256: string
}

/** The package's root: the nearest directory above this module holding its package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'dsh-remote-worlds') return dir
      } catch {
        // Not ours (or unreadable): keep looking upwards.
      }
    }
    const parent = dirname(dir)
    if (parent === dir) throw new WorldToolUnavailableError('cannot find the dsh-remote-worlds package root above its world-tools module')
    dir = parent
  }
}

/** The directory of the builds, `<package>/dist/world-tools`. */
export function worldToolsDirectory(): string {
  return join(packageRoot(), 'dist', 'world-tools')
}

const builds = new Map<string, WorldToolBuild>()

/**
 * The build of `name` for `arch` (read once, then kept).
 * @param arch - the world's `uname -m` as control.sh reports it (`x86_64`, `aarch64`, `unknown`).
 * @throws WorldToolUnavailableError for an architecture without builds, or a build missing from
 *   this installation (a checkout that did not run `npm run build:world-tools`).
 */
export function worldTool(name: WorldToolName, arch: string): WorldToolBuild {
  if (arch !== 'x86_64' && arch !== 'aarch64') throw new WorldToolUnavailableError(`this package carries ${name} for x86_64 and aarch64 worlds only; this world's architecture is ${arch}`)
  const key = `${arch}/${name}`
  let build = builds.get(key)
  if (build === undefined) {
    const hostPath = join(worldToolsDirectory(), `linux-${arch}`, name)
    let bytes: Buffer
    try {
      bytes = readFileSync(hostPath)
    } catch (error) {
      throw new WorldToolUnavailableError(`the ${arch} build of ${name} is missing at ${hostPath} (in a checkout, run \`npm run build:world-tools\`)`, { cause: error })
    }
    build = { name, arch, hostPath, bytes, sha256: createHash('sha256').update(bytes).digest('hex') }
    builds.set(key, build)
  }
  return build
}
