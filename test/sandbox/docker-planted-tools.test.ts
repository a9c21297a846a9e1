/**
 * A world tool is run only as the build this client shipped (issue 32, A and A3), in a
 * container whose cache of world tools the agent's own shell can write (a read-only root with
 * a tmpfs /tmp, as a managed confined world has): the shell swaps the cached dsh-pty and
 * dsh-fsd for programs that leave a mark, then new terminals and file servers start, of the
 * same client and of a new one. None of the planted programs runs, and the builds are copied
 * in over them; copies made unusable instead (a mode, a directory at the name) are mended.
 */
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { worldTool } from '../../src/providers/remote/world-tools/manifest.ts'
import { inWorld } from '../helpers/fs-cases.ts'
import { startTestContainer, waitFor } from '../docker/helpers.ts'
import { run } from './helpers.ts'

const CACHE = '/tmp/dsh-remote-tools-1000'
let container: Docker.Container

const world = (): Promise<RemoteWorld> => openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id }, workspaceRoot: '/tmp' })
const agent = (script: string): Promise<string> => inWorld(container.id, script, '1000:1000')

beforeAll(async () => {
  container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'planted-tools' }, User: '1000:1000', HostConfig: { ReadonlyRootfs: true, Tmpfs: { '/tmp': 'rw,exec,mode=1777' } } })
})

afterAll(async () => {
  await container?.remove({ force: true })
})

describe('world tools swapped in the cache by the agent\'s shell', () => {
  it('a planted dsh-pty or dsh-fsd never runs: the next terminals and file servers, of this client and a new one, run the builds copied in over them', async () => {
    const pty = worldTool('dsh-pty', 'x86_64').sha256
    const fsd = worldTool('dsh-fsd', 'x86_64').sha256
    const first = await world()
    try {
      const shell = await first.open()
      await first.fs!.writeText(await first.fs!.resolve('/tmp/before.txt'), 'before\n')
      const builds = `sha256sum ${CACHE}/${pty}/dsh-pty ${CACHE}/${fsd}/dsh-fsd | cut -d' ' -f1`
      expect(await agent(builds)).toBe(`${pty}\n${fsd}\n`)
      // From the agent's shell: programs that answer --version and leave a mark, renamed over
      // the copies (a running copy cannot be written, but it can be replaced).
      // (Commands stay under the terminal's 160 columns.)
      for (const name of ['dsh-pty', 'dsh-fsd']) {
        expect(await run(shell, `printf '#!/bin/sh\\necho ran >> /tmp/planted-${name}\\necho ok\\n' > /tmp/p && chmod 700 /tmp/p && echo planted`)).toBe('planted')
        expect(await run(shell, `mv -f /tmp/p ${CACHE}/*/${name} && echo swapped`)).toBe('swapped')
      }
      // This client: a new terminal (past the standby the pool started before the swap) and,
      // once its file server is gone, a new one.
      for (let index = 0; index < 3; index += 1) expect(await run(await first.open(), `echo same-${index}`)).toBe(`same-${index}`)
      await agent('pkill -KILL -x dsh-fsd; true')
      // A call may still meet the killed server (FS_IO_ERROR: lost); the next one starts another.
      const read = (): Promise<string> => first.fs!.resolve('/tmp/before.txt').then(target => first.fs!.readText(target)).catch((error: Error) => error.message)
      expect(await waitFor(read, text => text === 'before\n', 20_000, 200)).toBe('before\n')
    } finally {
      await first.dispose()
    }
    const next = await world()
    try {
      expect(await run(await next.open(), 'echo next')).toBe('next')
      expect(await next.fs!.readText(await next.fs!.resolve('/tmp/before.txt'))).toBe('before\n')
    } finally {
      await next.dispose()
    }
    expect(await agent('ls /tmp | grep "^planted-" || true')).toBe('')
    expect(await agent(`sha256sum ${CACHE}/${pty}/dsh-pty ${CACHE}/${fsd}/dsh-fsd | cut -d' ' -f1`)).toBe(`${pty}\n${fsd}\n`)
  }, 120_000)

  it('a copy made unusable (its directory opened to others, a directory at its name) is mended, and the next terminal and file server run', async () => {
    const pty = worldTool('dsh-pty', 'x86_64').sha256
    const fsd = worldTool('dsh-fsd', 'x86_64').sha256
    await agent(`chmod 770 ${CACHE}/${pty} && rm -f ${CACHE}/${fsd}/dsh-fsd && mkdir ${CACHE}/${fsd}/dsh-fsd`)
    const next = await world()
    try {
      expect(await run(await next.open(), 'echo mended')).toBe('mended')
      expect(await next.fs!.readText(await next.fs!.resolve('/tmp/before.txt'))).toBe('before\n')
    } finally {
      await next.dispose()
    }
    expect(await agent(`stat -c %a ${CACHE}/${pty}; sha256sum ${CACHE}/${pty}/dsh-pty ${CACHE}/${fsd}/dsh-fsd | cut -d' ' -f1`)).toBe(`700\n${pty}\n${fsd}\n`)
  }, 120_000)
})
