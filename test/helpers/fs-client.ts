/**
 * A second client of the filesystem half, in a process of its own (the tests of
 * test/docker/fs-clients.test.ts start it with `node --import tsx`): it attaches to a container
 * as `agent` and does one thing, given as argv, printing one JSON line per step on stdout.
 *
 *   edit-once CONTAINER FILE TAG   resolve and stat FILE, print {"ready": version}, wait for a
 *                                  line on stdin, then edit with that version (FILE's text
 *                                  `count: 0` becomes `count: TAG`) and print {"outcome": ...}.
 *   append CONTAINER FILE TAG N    N guarded edits, each appending the line `TAG-i` (re-reading
 *                                  and retrying on FS_STALE_VERSION); prints {"done", "stale"}.
 *   partial-write CONTAINER FILE   send a write of 8 MiB but only its first 1 MiB, print
 *                                  {"partial": true}, and wait to be killed.
 *   endless-read CONTAINER         read /proc/self/pagemap (size 0, 256 GiB of entries) with a
 *                                  bound of 64 GiB, print {"reading", "server"} at its first
 *                                  data, and wait to be killed.
 */
import { createInterface } from 'node:readline'
import { FsError } from '@deepseek-ai/dsh-fs'
import { openWorld } from '../../src/backend/world.ts'
import { FileServers } from '../../src/files/file-servers.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { worldOwnerOf } from '../../src/providers/remote/world-owner.ts'

const [command, container, file, tag, count] = process.argv.slice(2)
const say = (value: unknown): void => { process.stdout.write(`${JSON.stringify(value)}\n`) }
const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container!, user: 'agent' }, workspaceRoot: '/srv' })
const fs = world.fs!

if (command === 'edit-once') {
  const target = await fs.resolve(file!)
  const version = (await fs.stat(target))!.version
  say({ ready: version })
  const lines = createInterface({ input: process.stdin })
  await new Promise<void>(resolve => lines.once('line', () => resolve()))
  try {
    await fs.editText(target, { oldString: 'count: 0', newString: `count: ${tag}`, replaceAll: false }, { version })
    say({ outcome: 'edited' })
  } catch (error) {
    say({ outcome: error instanceof FsError ? error.code : String(error) })
  }
  lines.close()
} else if (command === 'append') {
  const target = await fs.resolve(file!)
  let stale = 0
  for (let i = 0; i < Number(count); i += 1) {
    for (;;) {
      // As the read tool: the version first, then the text (a text newer than its version makes
      // the guarded edit stale, never a match against the wrong content).
      const version = (await fs.stat(target))!.version
      const before = await fs.readText(target)
      try {
        await fs.editText(target, { oldString: before, newString: `${before}${tag}-${i}\n`, replaceAll: false }, { version })
        break
      } catch (error) {
        if (!(error instanceof FsError) || error.code !== 'FS_STALE_VERSION') throw error
        stale += 1
      }
    }
  }
  say({ done: Number(count), stale })
} else if (command === 'partial-write') {
  const servers = new FileServers(worldOwnerOf(world.runtime)!)
  const server = await servers.server(undefined)
  const content = Buffer.alloc(1024 * 1024, 0x6e)
  void server.request('w', [file!, 'n', '', '', '0', '0', String(8 * 1024 * 1024)], { content }).catch(() => undefined)
  say({ partial: true, server: server.info.pid })
  await new Promise(() => undefined)
} else if (command === 'endless-read') {
  const servers = new FileServers(worldOwnerOf(world.runtime)!)
  const server = await servers.server(undefined)
  let told = false
  void server.request('o', ['/proc/self/pagemap', String(64 * 1024 ** 3)], { onData: () => { if (!told) { told = true; say({ reading: true, server: server.info.pid }) } } }).catch(() => undefined)
  await new Promise(() => undefined)
}
await world.dispose()
