/**
 * The bubblewrap fence's pure parts (src/sandbox/fence.ts): what it keeps fixed, the chain of
 * frozen directories, the listing script run by a real local /bin/sh over a real directory
 * tree, and the bubblewrap arguments and refusals made from it. The fence in a real world,
 * attacked from inside, is test/sandbox/ssh-fence.test.ts.
 */
import { spawnSync } from 'node:child_process'
import { linkSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { chainDirectories, fenceArgs, fenceListingScript, loginPathScript, parseFenceListing, parseLoginPath, parseRealPaths, protectedPaths, realPathsScript, rootRefusal } from '../../src/sandbox/fence.ts'

function mkfifo(path: string): void {
  const made = spawnSync('mkfifo', [path])
  expect(made.status).toBe(0)
}

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-fence-')))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('what a fence keeps fixed', () => {
  it('the login shells\' startup files, ~/.ssh, ~/bin, ~/.local/bin, every world-tool cache of the user and every absolute PATH directory, once each', () => {
    expect(protectedPaths({ HOME: '/home/a', XDG_CACHE_HOME: '/home/a/cache', PATH: '/usr/bin:/home/a/bin:relative:/opt/x/:/usr/bin' }, 1000)).toEqual([
      '/home/a/.bashrc', '/home/a/.bash_profile', '/home/a/.bash_login', '/home/a/.profile', '/home/a/.bash_logout',
      '/home/a/.zshenv', '/home/a/.zprofile', '/home/a/.zshrc', '/home/a/.zlogin', '/home/a/.zlogout',
      '/home/a/.ssh', '/home/a/bin', '/home/a/.local/bin',
      '/home/a/cache/dsh-remote-worlds/tools', '/var/tmp/dsh-remote-tools-1000', '/tmp/dsh-remote-tools-1000', '/dev/shm/dsh-remote-tools-1000',
      '/usr/bin', '/opt/x',
    ])
  })

  it('asks a login shell of the user for its PATH, bounded, and finds its answer among what the profile printed', () => {
    const profile = join(scratch, 'login-home')
    mkdirSync(profile, { recursive: true })
    writeFileSync(join(profile, '.profile'), 'echo a banner\nexport PATH="$HOME/go/bin:$PATH"\n')
    const run = spawnSync('sh', ['-c', loginPathScript()], { encoding: 'utf8', env: { HOME: profile, SHELL: '/bin/sh', PATH: '/usr/bin:/bin' } })
    // (/etc/profile sets the system's PATH first; the user's profile then puts go/bin before it.)
    expect(parseLoginPath(run.stdout).split(':')[0]).toBe(`${profile}/go/bin`)
  })

  it('resolves each path as the world does (every symlink followed; empty where a parent is missing)', () => {
    const tools = join(scratch, 'tools')
    mkdirSync(join(tools, 'bin'), { recursive: true })
    symlinkSync(tools, join(scratch, 'opt-tools'))
    const paths = [join(scratch, 'opt-tools', 'bin'), join(scratch, 'missing', 'x', 'y'), tools]
    const run = spawnSync('sh', ['-c', realPathsScript(paths)], { encoding: 'utf8' })
    expect(parseRealPaths(run.stdout, 3)).toEqual([join(tools, 'bin'), '', tools])
    expect(protectedPaths({ HOME: '/', PATH: '/bin' })).toEqual(['/bin'])
  })

  it('freezes each directory from the workspace root down to the parent of a protected path inside it, shallowest first', () => {
    expect(chainDirectories('/home/a', ['/home/a/.bashrc', '/home/a/.local/bin', '/home/a/x/y/z'])).toEqual(['/home/a', '/home/a/.local', '/home/a/x', '/home/a/x/y'])
    expect(chainDirectories('/home/a/src', ['/home/a/.bashrc'])).toEqual([])
  })

  it('refuses a workspace that contains /tmp, is protected itself, or lies inside a protected directory or a dot-entry of HOME', () => {
    const all = protectedPaths({ HOME: '/home/a', PATH: '/usr/bin' })
    expect(rootRefusal('/', all)).toBe('the workspace / contains /tmp, where this package keeps what its programs outside the fence trust (held shells, state); choose a workspace below it')
    expect(rootRefusal('/home/a/.ssh', all)).toBe('the workspace /home/a/.ssh is /home/a/.ssh, which programs outside the fence run or read (login shell startup, sshd, the PATH); choose a workspace that is not')
    expect(rootRefusal('/usr/bin/x', all)).toBe('the workspace /usr/bin/x is inside /usr/bin, which programs outside the fence run or read (login shell startup, sshd, the PATH); choose a workspace that is not')
    expect(rootRefusal('/home/a/.cargo/src', all, '/home/a')).toBe('the workspace /home/a/.cargo/src is in /home/a/.cargo, a dot-entry of HOME, which the user\'s shells and programs read outside the fence; choose a workspace that is not')
    expect(rootRefusal('/home/a', all, '/home/a')).toBeUndefined()
    expect(rootRefusal('/home/a/src', all, '/home/a')).toBeUndefined()
  })
})

describe('the listing and the plan made from it (a real /bin/sh over a real tree)', () => {
  const home = join(scratch, 'home')
  mkdirSync(join(home, '.ssh'), { recursive: true })
  mkdirSync(join(home, 'src'))
  mkdirSync(join(home, '.local', 'share'), { recursive: true })
  writeFileSync(join(home, '.bashrc'), 'echo hi\n')
  writeFileSync(join(home, 'notes with space.txt'), 'x')
  writeFileSync(join(home, 'new\nline'), 'x')
  symlinkSync('/etc/hostname', join(home, '.profile'))
  symlinkSync(join(home, 'src'), join(home, 'link-to-src'))
  mkfifo(join(home, 'fifo'))
  const all = protectedPaths({ HOME: home, PATH: '/usr/bin' })
  const inside = all.filter(path => path.startsWith(`${home}/`))
  const listed = spawnSync('sh', ['-c', fenceListingScript(home, inside)], { encoding: 'utf8' })

  it('lists each protected path\'s kind, a symlink\'s target, and each chain directory\'s entries by full path, any byte of a name intact', () => {
    expect(listed.status).toBe(0)
    const listing = parseFenceListing(listed.stdout)
    expect(listing.paths.get(join(home, '.bashrc'))).toEqual({ kind: 'file', links: 1 })
    expect(listing.paths.get(join(home, '.ssh'))).toEqual({ kind: 'dir' })
    expect(listing.paths.get(join(home, '.bash_login'))).toEqual({ kind: 'missing' })
    expect(listing.paths.get(join(home, '.profile'))).toEqual({ kind: 'link', real: '/etc/hostname' })
    expect([...listing.chain.keys()]).toEqual([home, join(home, '.local')])
    expect([...listing.chain.get(home)!.entries].sort()).toEqual([
      [join(home, '.bashrc'), 'file'], [join(home, '.local'), 'dir'], [join(home, '.profile'), 'link'], [join(home, '.ssh'), 'dir'],
      [join(home, 'fifo'), 'other'], [join(home, 'link-to-src'), 'link'], [join(home, 'new\nline'), 'file'], [join(home, 'notes with space.txt'), 'file'], [join(home, 'src'), 'dir'],
    ])
    expect([...listing.chain.get(join(home, '.local'))!.entries]).toEqual([[join(home, '.local', 'share'), 'dir']])
  })

  it('freezes HOME: a read-only bind, every other plain entry that is no dot-entry bound read-write again (dot-entries, symlinks and fifos left read-only)', () => {
    expect(fenceArgs(home, all, parseFenceListing(listed.stdout), home)).toEqual({
      frozen: [home],
      args: [
        '--ro-bind', home, home,
        '--bind', join(home, 'new\nline'), join(home, 'new\nline'),
        '--bind', join(home, 'notes with space.txt'), join(home, 'notes with space.txt'),
        '--bind', join(home, 'src'), join(home, 'src'),
      ],
    })
  })

  it('outside HOME, a frozen directory\'s entries are all bound again but the protected ones', () => {
    expect(fenceArgs(home, all, parseFenceListing(listed.stdout))).toEqual({
      frozen: [home, join(home, '.local')],
      args: [
        '--ro-bind', home, home,
        '--bind', join(home, 'new\nline'), join(home, 'new\nline'),
        '--bind', join(home, 'notes with space.txt'), join(home, 'notes with space.txt'),
        '--bind', join(home, 'src'), join(home, 'src'),
        '--ro-bind', join(home, '.local'), join(home, '.local'),
        '--bind', join(home, '.local', 'share'), join(home, '.local', 'share'),
      ],
    })
  })

  /** A HOME named `name` whose ~/.bashrc is `dotfiles/bashrc` by `link`, and the fence of it as the workspace. */
  function fenceOfDotfiles(name: string, link: (target: string, path: string) => void): ReturnType<typeof fenceArgs> {
    const dir = join(scratch, name)
    mkdirSync(join(dir, 'dotfiles'), { recursive: true })
    writeFileSync(join(dir, 'dotfiles', 'bashrc'), '')
    link(join(dir, 'dotfiles', 'bashrc'), join(dir, '.bashrc'))
    const paths = protectedPaths({ HOME: dir })
    const run = spawnSync('sh', ['-c', fenceListingScript(dir, paths)], { encoding: 'utf8' })
    return fenceArgs(dir, paths, parseFenceListing(run.stdout), dir)
  }

  it('refuses a protected file with a second hard link, naming it', () => {
    const linked = join(scratch, 'linked')
    expect(fenceOfDotfiles('linked', linkSync)).toEqual({
      refused: `${join(linked, '.bashrc')}, which programs outside the fence run or read, has 2 hard links: another of its names may lie in the workspace ${linked}, where the fence cannot keep it fixed; choose another workspace, or give ${join(linked, '.bashrc')} a single link`,
    })
  })

  it('refuses a protected path that is a symlink into the workspace, naming it', () => {
    const other = join(scratch, 'other')
    expect(fenceOfDotfiles('other', symlinkSync)).toEqual({
      refused: `${join(other, '.bashrc')}, which programs outside the fence run or read, is a symlink to ${join(other, 'dotfiles', 'bashrc')} inside the workspace ${other}, which the fence cannot keep fixed; choose another workspace, or make ${join(other, '.bashrc')} a file`,
    })
  })

  it('needs nothing for a workspace that holds no protected path', () => {
    expect(fenceArgs(join(home, 'src'), all, parseFenceListing(''))).toEqual({ args: [], frozen: [] })
  })
})
