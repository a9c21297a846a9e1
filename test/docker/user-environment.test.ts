/**
 * What the Docker world gives its user's programs (issue 10, items 2 and 3): a numeric user
 * without a passwd entry gets a private, writable HOME instead of the engine's `/`; programs get
 * a UTF-8 locale where the container names none; a container's own locale is kept.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { DockerWorld } from '../../src/providers/docker/docker-world.ts'
import { localeLines, spawnedOutput, withCallerLang } from '../helpers/user-environment-cases.ts'
import { IMAGE, docker, execIn } from './helpers.ts'

let shared: DockerWorld
let noLocale: DockerWorld

beforeAll(async () => {
  shared = await DockerWorld.open({ docker, image: IMAGE })
  // The image sets LANG=C.UTF-8; this container's Env empties it, as an image without a locale would.
  noLocale = await DockerWorld.open({ docker, image: IMAGE, create: { Env: ['LANG='] } })
})

afterAll(async () => {
  await Promise.all([shared?.dispose(), noLocale?.dispose()])
})

function attach(container: DockerWorld, user: string): Promise<RemoteWorld> {
  return withCallerLang(undefined, () => openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.containerId, user }, workspaceRoot: '/tmp' }))
}

describe('HOME of a user without a passwd entry (--user 4242:4242)', () => {
  it('is a private directory in /tmp the user can write dotfiles to, in terminals and spawned programs; the prompt still settles', async () => {
    const world = await attach(shared, '4242:4242')
    try {
      const terminal = await world.open({ cwd: '/tmp' })
      const result = await terminal.send('echo "$HOME"; touch ~/.p && echo touched; git config --global user.name agent-x && git config --global user.name; stat -c "%a %u" ~')
      expect(result.waitReason).toBe('stdin_read')
      expect(result.viewport.split('\n').slice(1, -1)).toEqual(['/tmp/dsh-remote-home-4242', 'touched', 'agent-x', '700 4242'])
      await terminal.close()
      expect(await spawnedOutput(world.runtime, 'echo "$HOME"; id -u')).toBe('/tmp/dsh-remote-home-4242\n4242\n')
      const environment = await (world.runtime as DockerSubprocessRuntime).userEnvironment()
      expect({ privateHome: environment.privateHome, HOME: environment.ambient.HOME }).toEqual({ privateHome: '/tmp/dsh-remote-home-4242', HOME: '/tmp/dsh-remote-home-4242' })
    } finally {
      await world.dispose()
    }
  }, 30_000)

  it('is never a path another user planted (a directory of theirs, a symlink), and a directory of its own is made private again', async () => {
    const planted = await execIn(shared.containerId, ['sh', '-c', [
      'mkdir -m 777 /tmp/dsh-remote-home-4243 && chown 1000 /tmp/dsh-remote-home-4243',
      'mkdir -m 700 /tmp/victim-4244 && ln -s /tmp/victim-4244 /tmp/dsh-remote-home-4244',
      'mkdir -m 777 /tmp/dsh-remote-home-4245 && chown 4245:4245 /tmp/dsh-remote-home-4245',
    ].join(' && ')])
    expect(planted.exitCode).toBe(0)
    for (const uid of [4243, 4244]) {
      const world = await attach(shared, `${uid}:${uid}`)
      try {
        const environment = await (world.runtime as DockerSubprocessRuntime).userEnvironment()
        expect({ HOME: environment.ambient.HOME, privateHome: environment.privateHome, refusedHome: environment.refusedHome }).toEqual({ HOME: '/', privateHome: undefined, refusedHome: `/tmp/dsh-remote-home-${uid}` })
      } finally {
        await world.dispose()
      }
    }
    const own = await attach(shared, '4245:4245')
    try {
      expect(await spawnedOutput(own.runtime, 'echo "$HOME"; stat -c %a "$HOME"')).toBe('/tmp/dsh-remote-home-4245\n700\n')
    } finally {
      await own.dispose()
    }
  }, 30_000)

  it('is left as the passwd entry says for a user that has one (agent: /home/agent)', async () => {
    const world = await attach(shared, 'agent')
    try {
      expect(await spawnedOutput(world.runtime, 'echo "$HOME"')).toBe('/home/agent\n')
      expect((await (world.runtime as DockerSubprocessRuntime).userEnvironment()).privateHome).toBeUndefined()
    } finally {
      await world.dispose()
    }
  }, 30_000)
})

describe('the locale of programs in a container', () => {
  it('is the container\'s own LANG=C.UTF-8 (the project image), unchanged', async () => {
    const world = await attach(shared, 'agent')
    try {
      expect(await localeLines(world)).toEqual(['中.txt', '1'])
      expect((await (world.runtime as DockerSubprocessRuntime).userEnvironment()).locale).toEqual({ lang: undefined, source: 'world', effective: true, reason: 'the world\'s own LANG=C.UTF-8' })
    } finally {
      await world.dispose()
    }
  }, 30_000)

  it('is C.UTF-8 where the container names no locale, for terminals and spawned programs', async () => {
    const world = await attach(noLocale, 'agent')
    try {
      expect(await localeLines(world)).toEqual(['中.txt', '1'])
      expect(await spawnedOutput(world.runtime, "printf 'é' | wc -m")).toBe('1\n')
    } finally {
      await world.dispose()
    }
  }, 30_000)
})
