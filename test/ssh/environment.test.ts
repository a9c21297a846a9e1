/**
 * The environment of an SSH terminal: the remote login's own ambient variables (as sshd gives
 * them to a login: HOME, USER, LOGNAME, PATH, SHELL, ...), never the harness's, then the spec's
 * env exactly (terminal-bash's TERM, PS1, DSH_* ids).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'
import { localeLines, spawnedOutput, withCallerLang } from '../helpers/user-environment-cases.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await sshd?.stop()
})

describe.each([
  // Debian's sshd default PATHs (openssh-server's configure --with-default-path / --with-superuser-path).
  { user: 'agent', home: '/home/agent', path: '/usr/local/bin:/usr/bin:/bin:/usr/games' },
  { user: 'root', home: '/root', path: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
])('the environment of a terminal over SSH as $user', ({ user, home, path }) => {
  it('is the login\'s ambient environment plus the spec\'s env, and nothing of the harness', async () => {
    const previous = process.env.DSH_REMOTE_HARNESS_ONLY
    process.env.DSH_REMOTE_HARNESS_ONLY = 'must-not-cross'
    const world = await withCallerLang(undefined, () => openWorld({
      runtime: SshSubprocessRuntime,
      runtimeConfig: { target: `${user}@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
      workspaceRoot: '/tmp',
    }))
    try {
      const terminal = await world.open()
      const result = await terminal.send('env | LC_ALL=C sort | grep -v "^_="')
      expect(result.waitReason).toBe('stdin_read')
      const names = result.viewport.split('\n').flatMap(line => /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(line)?.[1] ?? [])
      const value = (name: string): string | undefined => result.viewport.split('\n').find(line => line.startsWith(`${name}=`))?.slice(name.length + 1)
      expect({ HOME: value('HOME'), USER: value('USER'), LOGNAME: value('LOGNAME'), SHELL: value('SHELL'), PATH: value('PATH'), TERM: value('TERM'), LANG: value('LANG') })
        .toEqual({ HOME: home, USER: user, LOGNAME: user, SHELL: '/bin/bash', PATH: path, TERM: 'dumb', LANG: 'C.UTF-8' })
      // Exactly the login's variables (sshd's SSH_CLIENT/SSH_CONNECTION and MAIL included), the
      // locale the login lacked, the spec's and what bash itself sets; the harness's
      // DSH_REMOTE_HARNESS_ONLY never crosses.
      expect(names.filter(name => !name.startsWith('DSH_'))).toEqual(['BASH_SILENCE_DEPRECATION_WARNING', 'GIT_PAGER', 'HOME', 'LANG', 'LOGNAME', 'MAIL', 'PAGER', 'PATH', 'PROMPT_COMMAND', 'PS1', 'PWD', 'SHELL', 'SHLVL', 'SSH_CLIENT', 'SSH_CONNECTION', 'TERM', 'USER'])
      expect(result.viewport).not.toContain('must-not-cross')
      await terminal.close()
    } finally {
      await world.dispose()
      if (previous === undefined) delete process.env.DSH_REMOTE_HARNESS_ONLY
      else process.env.DSH_REMOTE_HARNESS_ONLY = previous
    }
  }, 30_000)
})

describe('the locale of programs over SSH (the login names none; sshd accepts no environment)', () => {
  const open = (locale?: string | false): Promise<RemoteWorld> => openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false, ...(locale !== undefined ? { locale } : {}) },
    workspaceRoot: '/tmp',
  })

  it('is C.UTF-8 by default, for terminals and spawned programs: a UTF-8 name is listed as itself and é is one character', async () => {
    const world = await withCallerLang(undefined, () => open())
    try {
      expect(await localeLines(world)).toEqual(['中.txt', '1'])
      expect(await spawnedOutput(world.runtime, "printf 'é' | wc -m; echo \"$LANG\"")).toBe('1\nC.UTF-8\n')
      expect((await (world.runtime as SshSubprocessRuntime).userEnvironment()).locale).toEqual({ lang: 'C.UTF-8', source: 'c-utf8', effective: true, reason: 'LANG=C.UTF-8: the world names no locale' })
    } finally {
      await world.dispose()
    }
  }, 30_000)

  it('is the caller\'s LANG when the host has it, and C.UTF-8 when it lacks it', async () => {
    const has = await withCallerLang('C.utf8', () => open())
    try {
      expect(await spawnedOutput(has.runtime, 'echo "$LANG"')).toBe('C.utf8\n')
    } finally {
      await has.dispose()
    }
    const lacks = await withCallerLang('en_US.UTF-8', () => open())
    try {
      expect((await (lacks.runtime as SshSubprocessRuntime).userEnvironment()).locale).toEqual({ lang: 'C.UTF-8', source: 'c-utf8', effective: true, reason: 'LANG=C.UTF-8: the world names no locale and lacks the caller\'s en_US.UTF-8' })
    } finally {
      await lacks.dispose()
    }
  }, 30_000)

  it('is the login\'s own POSIX locale with locale: false (the old bytes: an escaped name and 2 characters)', async () => {
    const world = await open(false)
    try {
      expect(await localeLines(world)).toEqual(["''$'\\344\\270\\255''.txt'", '2'])
    } finally {
      await world.dispose()
    }
  }, 30_000)
})
