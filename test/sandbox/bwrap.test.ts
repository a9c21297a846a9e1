/**
 * The world-neutral bubblewrap pieces: the profile argv (exact), and the probe script run by a
 * REAL shell with a REAL bubblewrap: in a container of the project image (which installs
 * bubblewrap), never on the test machine, whose tools the project does not install.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bwrapProfileArgs, parseBwrapProbe, probeBwrap, type RemoteRun } from '../../src/sandbox/bwrap.ts'
import { afterNsenter, nsenterPrefix } from '../../src/sandbox/shared-network.ts'
import { execIn } from '../docker/helpers.ts'
import { BWRAP_CAPABLE } from '../helpers/sshd-world.ts'
import { startContainer } from './helpers.ts'

const BASE = ['--ro-bind', '/', '/', '--dev', '/dev', '--unshare-pid', '--unshare-net', '--proc', '/proc', '--die-with-parent', '--tmpfs', '/tmp']

let container: { id: string; remove(): Promise<void> }

beforeAll(async () => {
  // Where bubblewrap can make its namespaces (seccomp and /proc masking relaxed, as on a host).
  container = await startContainer({ HostConfig: { Init: true, NetworkMode: 'none', ...BWRAP_CAPABLE } })
})

afterAll(async () => {
  await container?.remove()
})

/** Run a script with the container's sh as agent, optionally with another PATH. */
function containerRun(path?: string): RemoteRun {
  return async script => execIn(container.id, path === undefined ? ['sh', '-c', script] : ['env', `PATH=${path}`, '/bin/sh', '-c', script], 'agent')
}

describe('bwrapProfileArgs', () => {
  it('read-only: everything read-only, fresh /dev, own pid namespace and /proc, private /tmp', () => {
    expect(bwrapProfileArgs({ mode: 'read-only', workspaceRoot: '/srv/ws' })).toEqual(BASE)
  })

  it('workspace-write: the same plus the workspace bound read-write, after the /tmp tmpfs', () => {
    expect(bwrapProfileArgs({ mode: 'workspace-write', workspaceRoot: '/srv/my ws' })).toEqual([...BASE, '--bind', '/srv/my ws', '/srv/my ws'])
    expect(bwrapProfileArgs({ mode: 'workspace-write', workspaceRoot: '/tmp/ws' })).toEqual([...BASE, '--bind', '/tmp/ws', '/tmp/ws'])
  })

  it('read-only keeps a workspace below /tmp visible (read-only) over the private tmpfs', () => {
    expect(bwrapProfileArgs({ mode: 'read-only', workspaceRoot: '/tmp/ws' })).toEqual([...BASE, '--ro-bind', '/tmp/ws', '/tmp/ws'])
    expect(bwrapProfileArgs({ mode: 'read-only', workspaceRoot: '/tmpx' })).toEqual(BASE)
  })

  it('leaves out --die-with-parent when asked (a Docker world, where bwrap\'s parent is the short-lived runc exec)', () => {
    expect(bwrapProfileArgs({ mode: 'read-only', workspaceRoot: '/srv/ws' }, { dieWithParent: false })).toEqual(BASE.filter(arg => arg !== '--die-with-parent'))
  })

  it('hides each socket directory of the user\'s services it is given under its own empty tmpfs, after /tmp\'s and before the workspace', () => {
    expect(bwrapProfileArgs({ mode: 'workspace-write', workspaceRoot: '/srv/ws' }, {}, [], ['/run/user'])).toEqual([...BASE, '--bind', '/srv/ws', '/srv/ws', '--tmpfs', '/run/user'])
  })

  it('refuses a relative workspace root', () => {
    expect(() => bwrapProfileArgs({ mode: 'workspace-write', workspaceRoot: 'ws' })).toThrow('bwrap profile: the workspace root must be absolute, got "ws"')
  })
})

describe('probeBwrap (real shell, real bwrap, in the project image)', () => {
  it('finds and runs bwrap; probes each workspace root', async () => {
    const probe = await probeBwrap(containerRun(), ['/tmp', '/nonexistent-dsh-ws'])
    expect(probe).toEqual({
      usable: true,
      path: '/usr/bin/bwrap',
      version: 'bubblewrap 0.8.0',
      workspaces: {
        '/tmp': { ok: true },
        '/nonexistent-dsh-ws': { ok: false, error: 'bwrap: Can\'t find source path /nonexistent-dsh-ws: No such file or directory' },
      },
      // No HOME or PATH given: what is kept fixed is the PATH a login shell gets there
      // (Debian's /etc/profile for a user; /bin resolves to /usr/bin, already kept), and none of
      // it lies in these roots.
      fences: {
        '/tmp': { refused: 'the workspace /tmp contains /tmp, where this package keeps what its programs outside the fence trust (held shells, state); choose a workspace below it' },
        '/nonexistent-dsh-ws': { args: [], frozen: [] },
      },
      protected: ['/usr/local/bin', '/usr/bin', '/bin', '/usr/local/games', '/usr/games'],
      // The image has /run (and /var/run, a link to it) and no HOME given here: /run is hidden.
      masked: ['/run'],
      // util-linux's, which joins a shared network namespace (shared-network.ts).
      nsenter: '/usr/bin/nsenter',
    })
  })

  it('bwrap not on the PATH: unusable, said so', async () => {
    expect(await probeBwrap(containerRun('/nonexistent-bin'))).toEqual({ usable: false, reason: 'bubblewrap (bwrap) is not installed on the remote host (not found in the login PATH)' })
  })

  it('a failing script run is an unusable verdict naming it', async () => {
    // A world whose shell runs something else than the script (e.g. a broken login shell).
    const broken: RemoteRun = () => containerRun()('echo "sh: cannot fork" >&2; exit 127')
    expect(await probeBwrap(broken)).toEqual({ usable: false, reason: 'the bubblewrap probe failed (exit 127): sh: cannot fork' })
  })
})

describe('parseBwrapProbe', () => {
  it('a bwrap that cannot create its namespaces is unusable, with its own message', () => {
    const stdout = 'path /usr/bin/bwrap\nversion bubblewrap 0.8.0 \nro 1 bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.\n'
    expect(parseBwrapProbe(stdout, [])).toEqual({ usable: false, reason: 'bubblewrap at /usr/bin/bwrap does not work here: bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' })
  })

  it('garbage is not a verdict of usability', () => {
    expect(parseBwrapProbe('path /usr/bin/bwrap\n', [])).toEqual({ usable: false, reason: 'the bubblewrap probe did not report (output: "path /usr/bin/bwrap\\n")' })
  })
})

describe('a shared network namespace (shared-network.ts)', () => {
  it('the profile of a program that joined one has no --unshare-net, all else the same', () => {
    expect(bwrapProfileArgs({ mode: 'read-only', workspaceRoot: '/srv/ws' }, {}, [], [], 'joined')).toEqual(BASE.filter(arg => arg !== '--unshare-net'))
  })

  it('joins through nsenter by a positive pid only (never 0 or -1)', () => {
    expect(nsenterPrefix('/usr/bin/nsenter', 4242)).toEqual(['/usr/bin/nsenter', '--preserve-credentials', '--user', '--net', '--target=4242', '--'])
    for (const pid of [0, -1, 1.5, Number.NaN]) expect(() => nsenterPrefix('/usr/bin/nsenter', pid)).toThrow(`a network namespace is joined through a positive pid, got ${pid}`)
  })

  it('finds the program behind the nsenter prefix and the profile', () => {
    const argv = [...nsenterPrefix('/usr/bin/nsenter', 7), '/usr/bin/bwrap', '--ro-bind', '/', '/', '--', '/bin/bash', '-i']
    expect(afterNsenter('/usr/bin/nsenter', argv)).toEqual(['/usr/bin/bwrap', '--ro-bind', '/', '/', '--', '/bin/bash', '-i'])
    expect(afterNsenter('/usr/bin/nsenter', ['/bin/bash', '-i'])).toBeUndefined()
    expect(afterNsenter(undefined, argv)).toBeUndefined()
  })
})
