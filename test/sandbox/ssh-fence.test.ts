/**
 * Nothing a confined agent can write runs outside its fence (issue 32, A and A2), over SSH with
 * the workspace at HOME (what dsh does when started in HOME), on a real sshd whose bubblewrap
 * works. The agent's shell attacks from inside workspace-write: it swaps the world-tool cache
 * another client uses (HOME's), appends to `~/.bashrc` and to what it sources
 * (`~/.cargo/env`, `~/.bashrc.d/`), creates `~/.bash_login` and `~/.ssh/rc`, and plants
 * programs on the login PATH (`~/.local/bin`, which the host's `~/.bashrc` puts first) and on
 * a login's (`~/.cargo/bin`), and into what only an interactive shell runs or sources (conda's
 * hook, gcloud's path.bash.inc, read from `~/.bashrc` itself), and connects to a service of the
 * user outside the fence (a stand-in for systemd's and D-Bus's sockets in /run/user). Each planted program would leave a mark in /var/tmp, which is
 * read-only inside the fence: a mark proves it ran outside. New clients then open terminals,
 * file servers and searches, confined and unconfined, and no mark appears.
 */
import { rgPath } from '@vscode/ripgrep'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { worldTool } from '../../src/providers/remote/world-tools/manifest.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { sandboxReportOf } from '../../src/sandbox/companion.ts'
import { BWRAP_CAPABLE, type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'
import { run } from './helpers.ts'

const HOME = '/home/agent'
const EROFS = 'Read-only file system'

let host: SshdWorld

function sshWorld(mode: 'workspace-write' | 'danger-full-access', workspaceRoot = HOME): Promise<RemoteWorld> {
  return openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${host.ports[0]}`, identity: host.clientKeyFile, knownHosts: host.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot,
    mode,
  })
}

/** As root on the host, outside any fence. */
async function onHost(script: string): Promise<string> {
  const result = await host.exec(['sh', '-c', script])
  expect(result.exitCode).toBe(0)
  return result.stdout
}

/** The marks planted programs left (none, when nothing planted ran). */
const marks = (): Promise<string> => onHost('ls /var/tmp | grep "^escaped-" || true')

/** A program that leaves the mark `escaped-NAME` and answers like a world tool. */
const planted = (name: string): string => `printf '#!/bin/sh\\necho ran >> /var/tmp/escaped-${name}\\necho ok\\n'`

/** The confined shell's transcript of `command`, which must have failed with EROFS. */
async function refused(terminal: Awaited<ReturnType<RemoteWorld['open']>>, command: string): Promise<void> {
  expect(await run(terminal, command)).toContain(EROFS)
}

beforeAll(async () => {
  host = await startSshdWorld([{}], { hostConfig: BWRAP_CAPABLE })
  // The user's own set-up: ~/.local/bin first on every login's PATH and rustup's env sourced
  // (both prepended, so the non-interactive return of Debian's ~/.bashrc does not skip them), a
  // ~/.bashrc.d, a project directory and a note in HOME itself.
  await onHost([
    `sed -i '1i export PATH="/opt/tools/bin:$HOME/.local/bin:$PATH"; . "$HOME/.cargo/env"' ${HOME}/.bashrc`,
    // A PATH directory outside HOME by its name, inside it by where it resolves.
    `mkdir -p ${HOME}/.local/bin ${HOME}/.cargo/bin ${HOME}/.bashrc.d ${HOME}/src ${HOME}/tools/bin ${HOME}/go/bin && ln -s ${HOME}/tools /opt/tools`,
    // A PATH directory only a login shell adds (~/.profile: Go's install docs).
    `echo 'export PATH="$HOME/go/bin:$PATH"' >> ${HOME}/.profile`,
    `echo 'export PATH="$HOME/.cargo/bin:$PATH"' > ${HOME}/.cargo/env && echo note > ${HOME}/notes.txt`,
    // What only an interactive shell reads, appended after Debian's non-interactive return as
    // their installers do: conda's hook (its program, its PATH directory, its conda.sh) and
    // gcloud's path.bash.inc. Neither lies in a dot-entry of HOME.
    `mkdir -p ${HOME}/miniconda3/bin ${HOME}/miniconda3/lib ${HOME}/miniconda3/etc/profile.d ${HOME}/google-cloud-sdk/bin`,
    `printf '#!/bin/sh\n' > ${HOME}/miniconda3/bin/conda && chmod 755 ${HOME}/miniconda3/bin/conda && : > ${HOME}/miniconda3/lib/site.py`,
    `: > ${HOME}/miniconda3/etc/profile.d/conda.sh && echo 'PATH=$PATH:$(dirname $0)/bin' > ${HOME}/google-cloud-sdk/path.bash.inc`,
    `printf '%s\n' "__conda_setup=\"\$('${HOME}/miniconda3/bin/conda' 'shell.bash' 'hook' 2> /dev/null)\"" \
      'if [ -f "${HOME}/miniconda3/etc/profile.d/conda.sh" ]; then . "${HOME}/miniconda3/etc/profile.d/conda.sh"; fi' \
      'export PATH="${HOME}/miniconda3/bin:$PATH"' \
      "if [ -f '${HOME}/google-cloud-sdk/path.bash.inc' ]; then . '${HOME}/google-cloud-sdk/path.bash.inc'; fi" >> ${HOME}/.bashrc`,
    `chown -R agent:agent ${HOME}/.local ${HOME}/.cargo ${HOME}/.bashrc.d ${HOME}/src ${HOME}/tools ${HOME}/go ${HOME}/notes.txt ${HOME}/miniconda3 ${HOME}/google-cloud-sdk`,
  ].join(' && '))
  // The user's runtime directory with a service of the user listening in it, as systemd's user
  // manager and D-Bus do (`systemd-run --user` runs anything sent there): a stand-in that leaves
  // a mark when anything connects.
  const listen = `import socket; s = socket.socket(socket.AF_UNIX); s.bind('/run/user/1000/bus'); s.listen(); s.accept(); open('/var/tmp/escaped-bus', 'w')`
  await onHost(`mkdir -p /run/user/1000 && chown agent:agent /run/user/1000 && chmod 700 /run/user/1000 && (runuser -u agent -- python3 -c "${listen}" >/dev/null 2>&1 &) && for i in $(seq 100); do [ -S /run/user/1000/bus ] && break; sleep 0.05; done; [ -S /run/user/1000/bus ]`)
  // A client before any fence (its workspace elsewhere) copied the world tools into HOME's cache.
  const before = await sshWorld('danger-full-access', '/var/tmp')
  try {
    expect(await run(await before.open(), 'echo before')).toBe('before')
    await before.fs!.writeText(await before.fs!.resolve('/var/tmp/seed.txt'), 'seed\n')
  } finally {
    await before.dispose()
  }
  expect(await onHost(`ls ${HOME}/.cache/dsh-remote-worlds/tools/*/ | grep -c "^dsh-"`)).toBe('2\n')
}, 180_000)

afterAll(async () => {
  await host?.stop()
})

describe('workspace-write at HOME over SSH: the agent attacks what runs outside its fence', () => {
  const pty = worldTool('dsh-pty', 'x86_64').sha256
  const fsd = worldTool('dsh-fsd', 'x86_64').sha256

  it('what runs outside stays fixed (startup files, ~/.ssh, the PATH, the cache in use), the rest of HOME is the agent\'s, and nothing it planted ever runs: not in a new confined client, not in an unconfined one', async () => {
    const world = await sshWorld('workspace-write')
    try {
      const shell = await world.open()
      // Work in the workspace goes on.
      expect(await run(shell, 'echo work > ~/src/a.txt && cat ~/src/a.txt')).toBe('work')
      // The cache another client uses, in the workspace (~/.cache, a dot-entry of HOME), and the
      // one in use, outside it: read-only, so no copy can be changed between a client's check
      // and its run. (Commands stay under the terminal's 160 columns: the names are long.)
      expect(await run(shell, `${planted('pty')} > ~/src/p && chmod 700 ~/src/p && echo planted`)).toBe('planted')
      await refused(shell, 'cd ~/.cache/dsh-remote-worlds/tools && mv -f ~/src/p */dsh-pty; cd ~')
      await refused(shell, 'cp ~/src/p ~/.cache/dsh-remote-worlds/tools/*/dsh-fsd')
      await refused(shell, 'mv ~/.cache ~/src/cache')
      await refused(shell, 'cp ~/.bashrc /var/tmp/dsh-remote-tools-1000/*/dsh-pty')
      // Startup files, existing and not, and sshd's.
      await refused(shell, 'echo "touch /var/tmp/escaped-bashrc" >> ~/.bashrc')
      await refused(shell, 'mv ~/.bashrc ~/src/bashrc')
      await refused(shell, 'echo "touch /var/tmp/escaped-login" > ~/.bash_login')
      await refused(shell, 'mkdir -p ~/.ssh && echo "touch /var/tmp/escaped-rc" > ~/.ssh/rc')
      // What the startup files source, and a login's PATH.
      await refused(shell, 'echo "touch /var/tmp/escaped-cargo-env" >> ~/.cargo/env')
      await refused(shell, 'echo "touch /var/tmp/escaped-bashrc-d" > ~/.bashrc.d/zz.sh')
      await refused(shell, `${planted('cargo')} > ~/.cargo/bin/cargo`)
      await refused(shell, `${planted('od')} > ~/tools/bin/od`)
      await refused(shell, `${planted('git')} > ~/go/bin/git`)
      // What only an interactive shell runs or sources, with the installation it belongs to.
      await refused(shell, `${planted('conda')} > ~/miniconda3/bin/conda`)
      await refused(shell, 'echo "open(\'/var/tmp/escaped-site\', \'w\')" >> ~/miniconda3/lib/site.py')
      await refused(shell, 'echo "touch /var/tmp/escaped-gcloud" >> ~/google-cloud-sdk/path.bash.inc')
      await refused(shell, `${planted('gcloud')} > ~/google-cloud-sdk/bin/gcloud`)
      // A socket of a service outside the fence: its directory is not there to connect to.
      const connect = `python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect("/run/user/1000/bus")' 2>&1 | tail -n 1; ls -A /run | wc -l`
      expect(await run(shell, connect)).toBe("FileNotFoundError: [Errno 2] No such file or directory\n0")
      // The login PATH's directory in HOME, and one ~/.profile would add.
      await refused(shell, `${planted('rg')} > ~/.local/bin/rg`)
      await refused(shell, 'mkdir ~/bin')
      // The price, as the sandbox report says: no new name directly in HOME, and a file there
      // changes in place only (the file tools' atomic replace needs its directory: refused as
      // the sandbox's).
      await refused(shell, 'touch ~/new-file')
      expect(await run(shell, 'echo more >> ~/notes.txt && cat ~/notes.txt')).toBe('note\nmore')
      const note = world.fs!.writeText(await world.fs!.resolve(`${HOME}/notes.txt`), 'replaced\n')
      await expect(note).rejects.toMatchObject({ code: 'FS_SANDBOX_DENIED' })
      await expect(note).rejects.toThrow(`cannot write "${HOME}/notes.txt": file access denied under workspace-write mode: its directory is read-only inside the sandbox`)
      expect(sandboxReportOf(world.ctx, HOME)?.modes.find(mode => mode.mode === 'workspace-write')?.facts).toContain("the host's and the user's service sockets hidden (--tmpfs /run): the services outside the fence (databases, the container engine, systemd, D-Bus, an ssh ControlMaster) are out of reach there")
      expect(sandboxReportOf(world.ctx, HOME)?.modes.find(mode => mode.mode === 'workspace-write')?.facts).toContain(`kept fixed inside the workspace: what programs outside the fence run or read (every dot-entry of ${HOME}, ${['.bashrc', '.bash_profile', '.bash_login', '.profile', '.bash_logout', '.zshenv', '.zprofile', '.zshrc', '.zlogin', '.zlogout', '.ssh', 'bin', '.local/bin', '.cache/dsh-remote-worlds/tools', '.cargo/bin', 'go/bin', '.cargo/env', '.bash_aliases', 'miniconda3', 'google-cloud-sdk', 'go', 'tools/bin'].map(name => `${HOME}/${name}`).join(', ')}); no new name can be made directly in ${HOME}, ${HOME}/go, ${HOME}/tools`)
    } finally {
      await world.dispose()
    }
    // A program in ~/.local/bin that the user's own PATH finds first (put there as the user,
    // outside the fence: the fence kept the agent from it, this is the worst case beyond it).
    await onHost(`${planted('path-rg')} > ${HOME}/.local/bin/rg && chmod 755 ${HOME}/.local/bin/rg && chown agent:agent ${HOME}/.local/bin/rg`)

    for (const mode of ['workspace-write', 'danger-full-access'] as const) {
      // danger-full-access with the workspace elsewhere: a client that may use HOME's cache.
      const next = await sshWorld(mode, mode === 'workspace-write' ? HOME : '/var/tmp')
      try {
        expect(await run(await next.open(), 'echo fresh')).toBe('fresh')
        expect(await next.fs!.readText(await next.fs!.resolve(`${HOME}/src/a.txt`))).toBe('work\n')
        const search = next.runtime.spawn({ argv: [rgPath, '--version'], cwd: '/var/tmp', stdio: { stdin: 'ignore', stdout: { maxBytes: 4096 }, stderr: { maxBytes: 4096 } }, graceMs: 500 })
        expect(await search.done).toEqual({ exitCode: 0, signal: null })
        expect(search.collected.stdout?.readFrom(0).text).toMatch(/^ripgrep \d+/)
      } finally {
        await next.dispose()
      }
    }
    expect(await marks()).toBe('')
    // HOME's cache holds the builds, which the unconfined clients ran.
    expect(await onHost(`sha256sum ${HOME}/.cache/dsh-remote-worlds/tools/${pty}/dsh-pty ${HOME}/.cache/dsh-remote-worlds/tools/${fsd}/dsh-fsd | cut -d' ' -f1`)).toBe(`${pty}\n${fsd}\n`)
    expect(await onHost(`head -c 2 ${HOME}/.bashrc; echo; cat ${HOME}/.cargo/env; ls ${HOME}/.ssh/rc ${HOME}/.bash_login ${HOME}/bin ${HOME}/new-file ${HOME}/.bashrc.d/zz.sh ${HOME}/.cargo/bin/cargo ${HOME}/tools/bin/od ${HOME}/go/bin/git ${HOME}/google-cloud-sdk/bin/gcloud 2>&1 | grep -c "No such file"`)).toBe('ex\nexport PATH="$HOME/.cargo/bin:$PATH"\n9\n')
    expect(await onHost(`cat ${HOME}/miniconda3/bin/conda ${HOME}/miniconda3/lib/site.py ${HOME}/google-cloud-sdk/path.bash.inc`)).toBe('#!/bin/sh\nPATH=$PATH:$(dirname $0)/bin\n')
  }, 180_000)

  it('a workspace the fence cannot keep fixed is refused, naming the path and why', async () => {
    const world = await sshWorld('workspace-write', `${HOME}/.ssh`)
    try {
      expect(() => world.ctx.sandbox.confine(['/bin/true'], { mode: 'workspace-write', workspaceRoot: `${HOME}/.ssh` })).toThrow(`the workspace ${HOME}/.ssh is ${HOME}/.ssh, which programs outside the fence run or read (login shell startup, sshd, the PATH); choose a workspace that is not`)
      // A root nobody probed that holds a protected path.
      expect(() => world.ctx.sandbox.confine(['/bin/true'], { mode: 'workspace-write', workspaceRoot: '/home' })).toThrow(`the workspace /home holds ${HOME}/.bashrc`)
    } finally {
      await world.dispose()
    }
    // A startup file with a second name, which may lie in the workspace (~/src/bashrc-link here).
    await onHost(`ln ${HOME}/.bashrc ${HOME}/src/bashrc-link`)
    const linked = await sshWorld('workspace-write')
    try {
      expect(() => linked.ctx.sandbox.confine(['/bin/true'], { mode: 'workspace-write', workspaceRoot: HOME })).toThrow(`${HOME}/.bashrc, which programs outside the fence run or read, has 2 hard links: another of its names may lie in the workspace ${HOME}, where the fence cannot keep it fixed; choose another workspace, or give ${HOME}/.bashrc a single link`)
    } finally {
      await linked.dispose()
      await onHost(`rm ${HOME}/src/bashrc-link`)
    }
  }, 60_000)
})
