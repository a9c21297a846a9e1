/**
 * The `doctor` checks of the filesystem half (`ctx.fs`, src/files) and of search (ripgrep): what
 * the world's file server can do there, proven by using it, and why not where it cannot.
 * @module dsh-remote-worlds/cli/doctor-files
 */
import { posix } from 'node:path'
import { FsError } from '@deepseek-ai/dsh-fs'
import type { RemoteWorld } from '../backend/world.ts'
import { worldOwnerOf } from '../providers/remote/world-owner.ts'
import { installWorldTool } from '../providers/remote/world-tools/install.ts'
import { ripgrepArgv, worldRipgrep } from '../providers/remote/world-tools/ripgrep.ts'

/** One finding (the shape of doctor.ts `DoctorCheck`). */
export interface FilesCheck {
  name: string
  ok: boolean
  detail: string
}

function reason(error: unknown): string {
  return error instanceof FsError ? `${error.code}: ${error.message}` : (error as Error).message
}

/**
 * The checks: `files` (the server runs: where it is, its round trip, a listing of `cwd`),
 * `file writes` (a probe file written, read back and removed in `cwd`, under the world's
 * standing sandbox mode: a refusal there is the mode's, and says so), and `search` (which
 * ripgrep dsh-tool-fs-search's glob and grep run in this world, and its version).
 * @returns the findings; a world without `ctx.fs` (opened with `fs: false`) gets one not-ok finding.
 */
export async function filesChecks(world: RemoteWorld, cwd: string): Promise<FilesCheck[]> {
  const fs = world.fs
  const owner = worldOwnerOf(world.runtime)
  if (fs === undefined || owner === undefined) return [{ name: 'files', ok: false, detail: 'this world has no filesystem half (ctx.fs): file tools would not act in it' }]
  const checks: FilesCheck[] = []
  try {
    const directory = await fs.resolve(cwd)
    const server = await installWorldTool(owner, 'dsh-fsd')
    const samples: number[] = []
    for (let index = 0; index < 20; index += 1) {
      const started = performance.now()
      await fs.stat(directory)
      samples.push(performance.now() - started)
    }
    samples.sort((a, b) => a - b)
    const entries = await fs.listDir(directory)
    checks.push({ name: 'files', ok: true, detail: `file server ${server.path}${server.copied ? ' (copied in now)' : ''}; median stat round trip ${samples[10]!.toFixed(2)} ms; ${cwd} lists ${entries.length} entries` })
  } catch (error) {
    checks.push({ name: 'files', ok: false, detail: `file tools cannot act in this world: ${reason(error)}` })
    return checks
  }
  const mode = fs.sandboxMode ?? 'danger-full-access'
  const probe = posix.join(cwd, `.dsh-remote-doctor-${process.pid}.tmp`)
  try {
    const target = await fs.resolve(probe)
    await fs.writeText(target, 'probe\n')
    const back = await fs.readText(target)
    checks.push({ name: 'file writes', ok: back === 'probe\n', detail: `a file written atomically in ${cwd} under ${mode} reads back ${back === 'probe\n' ? 'exactly' : JSON.stringify(back)}` })
  } catch (error) {
    const refused = error instanceof FsError && error.code === 'FS_SANDBOX_DENIED'
    checks.push({ name: 'file writes', ok: refused && mode === 'read-only', detail: refused ? `refused in ${cwd} by the sandbox (${mode}): ${reason(error)}` : `cannot write in ${cwd}: ${reason(error)}` })
  } finally {
    await (await owner.control()).removePaths([probe]).catch(() => undefined)
  }
  try {
    const rg = await worldRipgrep(owner, await owner.control(), (await owner.userEnvironment()).ambient.PATH)
    const path = 'system' in rg ? rg.system : rg.copy.path
    const handle = world.runtime.spawn({ argv: ripgrepArgv(rg, ['--version']), cwd, stdio: { stdin: 'ignore', stdout: { maxBytes: 4096 }, stderr: { maxBytes: 4096 } }, graceMs: 1_000 })
    const outcome = await handle.done
    const version = handle.collected.stdout?.readFrom(0).text.split('\n')[0] ?? ''
    checks.push({ name: 'search', ok: outcome.exitCode === 0, detail: outcome.exitCode === 0 ? `glob and grep run ${path} in the world (${version})` : `ripgrep at ${path} did not run (exit ${outcome.exitCode}): ${handle.collected.stderr?.readFrom(0).text.trim() ?? ''}` })
  } catch (error) {
    checks.push({ name: 'search', ok: false, detail: `glob and grep cannot run in this world: ${reason(error)}` })
  }
  return checks
}
