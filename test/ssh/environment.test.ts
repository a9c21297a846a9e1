/**
 * The environment of an SSH terminal: the remote login's own ambient variables (as sshd gives
 * them to a login: HOME, USER, LOGNAME, PATH, SHELL, ...), never the harness's, then the spec's
 * env exactly (terminal-bash's TERM, PS1, DSH_* ids).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

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
    const world = await openWorld({
      runtime: SshSubprocessRuntime,
      runtimeConfig: { target: `${user}@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
      workspaceRoot: '/tmp',
    })
    try {
      const terminal = await world.open()
      const result = await terminal.send('env | LC_ALL=C sort | grep -v "^_="')
      expect(result.waitReason).toBe('stdin_read')
      const names = result.viewport.split('\n').flatMap(line => /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(line)?.[1] ?? [])
      const value = (name: string): string | undefined => result.viewport.split('\n').find(line => line.startsWith(`${name}=`))?.slice(name.length + 1)
      expect({ HOME: value('HOME'), USER: value('USER'), LOGNAME: value('LOGNAME'), SHELL: value('SHELL'), PATH: value('PATH'), TERM: value('TERM') })
        .toEqual({ HOME: home, USER: user, LOGNAME: user, SHELL: '/bin/bash', PATH: path, TERM: 'dumb' })
      // Exactly the login's variables (sshd's SSH_CLIENT/SSH_CONNECTION and MAIL included), the
      // spec's and what bash itself sets; the harness's DSH_REMOTE_HARNESS_ONLY never crosses.
      expect(names.filter(name => !name.startsWith('DSH_'))).toEqual(['BASH_SILENCE_DEPRECATION_WARNING', 'GIT_PAGER', 'HOME', 'LOGNAME', 'MAIL', 'PAGER', 'PATH', 'PROMPT_COMMAND', 'PS1', 'PWD', 'SHELL', 'SHLVL', 'SSH_CLIENT', 'SSH_CONNECTION', 'TERM', 'USER'])
      expect(result.viewport).not.toContain('must-not-cross')
      await terminal.close()
    } finally {
      await world.dispose()
      if (previous === undefined) delete process.env.DSH_REMOTE_HARNESS_ONLY
      else process.env.DSH_REMOTE_HARNESS_ONLY = previous
    }
  }, 30_000)
})
