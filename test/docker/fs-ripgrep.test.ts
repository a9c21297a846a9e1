/**
 * ripgrep for dsh-tool-fs-search in the world (providers/remote/world-tools/ripgrep.ts): a spawn
 * of the packaged `@vscode/ripgrep` binary's HOST path runs the world's own `rg` (the project
 * image has Debian's 13.0.0), and in a world without one, the package's copy of the packaged
 * Linux build (15.0.0, rev 3a612f88b8), copied into the user's cache once and reused after.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { rgPath } from '@vscode/ripgrep'
import type { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { installWorldTool } from '../../src/providers/remote/world-tools/install.ts'
import { worldTool } from '../../src/providers/remote/world-tools/manifest.ts'
import { worldOwnerOf } from '../../src/providers/remote/world-owner.ts'
import { inWorld } from '../helpers/fs-cases.ts'
import { startTestContainer } from './helpers.ts'

/** Run the host's packaged rg path with `args` through the runtime; its stdout. */
async function rg(runtime: SubprocessRuntime, args: string[], cwd = '/tmp'): Promise<string> {
  const handle = runtime.spawn({ argv: [rgPath, ...args], cwd, stdio: { stdin: 'ignore', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } }, graceMs: 500 })
  expect(await handle.done).toEqual({ exitCode: 0, signal: null })
  return handle.collected.stdout!.readFrom(0).text
}

const opened: RemoteWorld[] = []
const containers: Docker.Container[] = []

async function world(container: Docker.Container): Promise<RemoteWorld> {
  const made = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id, user: 'agent' }, workspaceRoot: '/tmp' })
  opened.push(made)
  return made
}

afterAll(async () => {
  await Promise.all(opened.map(made => made.dispose()))
  await Promise.all(containers.map(container => container.remove({ force: true })))
})

describe('a world with its own ripgrep', () => {
  let container: Docker.Container

  beforeAll(async () => {
    container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'fs-ripgrep' } })
    containers.push(container)
  })

  it('runs the world\'s rg for the host\'s packaged rg path, and searches the world\'s files', async () => {
    const made = await world(container)
    expect((await rg(made.runtime, ['--version'])).split('\n')[0]).toBe('ripgrep 13.0.0')
    await inWorld(container.id, 'mkdir -p /tmp/tree/a && echo "needle here" > /tmp/tree/a/one.txt && echo hay > /tmp/tree/two.txt', 'agent')
    expect(await rg(made.runtime, ['--no-config', '--files-with-matches', 'needle'], '/tmp/tree')).toBe('a/one.txt\n')
  })
})

describe('a world without ripgrep', () => {
  let container: Docker.Container

  beforeAll(async () => {
    container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'fs-ripgrep' } })
    containers.push(container)
    await inWorld(container.id, 'rm /usr/bin/rg && ! command -v rg')
  })

  it('copies the package\'s Linux ripgrep into the user\'s cache once, keyed by its hash, and runs it', async () => {
    const made = await world(container)
    expect((await rg(made.runtime, ['--version'])).split('\n')[0]).toBe('ripgrep 15.0.0 (rev 3a612f88b8)')
    const build = worldTool('rg', 'x86_64')
    expect(build.sha256).toBe(createHash('sha256').update(readFileSync(build.hostPath)).digest('hex'))
    const cached = `/home/agent/.cache/dsh-remote-worlds/tools/${build.sha256}/rg`
    expect(await inWorld(container.id, `stat -c '%a %U' ${cached}; sha256sum < ${cached} | cut -d' ' -f1`)).toBe(`700 agent\n${build.sha256}\n`)
  })

  it('a later client finds the copy and copies nothing', async () => {
    const made = await world(container)
    expect(await installWorldTool(worldOwnerOf(made.runtime)!, 'rg')).toEqual({ name: 'rg', sha256: worldTool('rg', 'x86_64').sha256, path: `/home/agent/.cache/dsh-remote-worlds/tools/${worldTool('rg', 'x86_64').sha256}/rg`, copied: false })
  })
})
