/**
 * Sandbox policy in the SSH world, end to end: the UNCHANGED terminal-bash asks
 * `ctx.sandbox.confine()` of our BubblewrapSandboxProvider, which wraps the shell in the remote
 * host's bubblewrap (probed once per world) or fails closed. Real OpenSSH sshd in a container
 * (loopback only), real bubblewrap, no mocks.
 *
 * Two hosts: one where bubblewrap works (seccomp and /proc masking relaxed, as on a normal
 * host), and one with Docker's defaults, where unprivileged user namespaces are refused.
 */
import { SandboxUnavailableError } from '@deepseek-ai/dsh-sandbox'
import { setSandboxMode } from '@deepseek-ai/dsh-sandbox-policy'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { SANDBOX_LOGGER, sandboxReportOf } from '../../src/sandbox/companion.ts'
import { BWRAP_CAPABLE, type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'
import { run } from './helpers.ts'

/** Workspace root on the SSH hosts (absent on the test machine, so no local realpath applies). */
const WORKSPACE = '/dsh-ws'

type Mode = 'read-only' | 'workspace-write' | 'danger-full-access'

let capable: SshdWorld
let refusing: SshdWorld

async function prepare(host: SshdWorld): Promise<void> {
  const made = await host.exec(['sh', '-c', `mkdir -p ${WORKSPACE} && echo 'hello from the host' > ${WORKSPACE}/hello.txt && chown -R agent:agent ${WORKSPACE}`])
  expect(made.exitCode).toBe(0)
}

function sshWorld(host: SshdWorld, mode?: Mode, workspaceRoot = WORKSPACE): Promise<RemoteWorld> {
  return openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${host.ports[0]}`, identity: host.clientKeyFile, knownHosts: host.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot,
    ...(mode !== undefined ? { mode } : {}),
  })
}

function logLines(world: RemoteWorld): string[] {
  return world.ctx.logger.buffer.filter(message => message.name === SANDBOX_LOGGER).map(message => `${message.type}: ${String(message.args[0])}`)
}

/** Run on the host OUTSIDE any sandbox (a plain docker exec as root). */
async function onHost(host: SshdWorld, script: string): Promise<string> {
  return (await host.exec(['sh', '-c', script])).stdout
}

beforeAll(async () => {
  ;[capable, refusing] = await Promise.all([startSshdWorld([{}], { hostConfig: BWRAP_CAPABLE }), startSshdWorld()])
  await Promise.all([prepare(capable), prepare(refusing)])
})

afterAll(async () => {
  await Promise.all([capable?.stop(), refusing?.stop()])
})

describe('read-only over SSH (bubblewrap on the host)', () => {
  let world: RemoteWorld
  beforeAll(async () => { world = await sshWorld(capable, 'read-only') })
  afterAll(async () => { await world?.dispose() })

  it('confine() wraps the shell in the probed bwrap with the read-only profile, full enforcement', () => {
    const argv = ['/bin/bash', '--noprofile', '--norc', '-i']
    expect(world.ctx.sandbox.confine(argv, { mode: 'read-only', workspaceRoot: WORKSPACE })).toEqual({
      argv: ['/usr/bin/bwrap', '--ro-bind', '/', '/', '--dev', '/dev', '--unshare-pid', '--unshare-net', '--proc', '/proc', '--die-with-parent', '--tmpfs', '/tmp', '--tmpfs', '/run', '--', ...argv],
      enforcement: 'full',
      denialSignatures: ['Read-only file system'],
      runnerFailureRules: [{ fatalSignatures: ['bwrap: '] }],
    })
    expect(logLines(world)).toEqual([`info: sandbox mode read-only: enforced (full) by bubblewrap on the remote host (bubblewrap 0.8.0 at /usr/bin/bwrap) in ssh agent@127.0.0.1:${capable.ports[0]}`])
  })

  it('reading the workspace works; writing in it, in $HOME or under / fails with EROFS; /tmp is private', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'pwd; id -u; cat hello.txt')).toBe(`${WORKSPACE}\n1000\nhello from the host`)
    expect(await run(terminal, 'echo changed > hello.txt')).toBe('bash: hello.txt: Read-only file system')
    expect(await run(terminal, 'echo x > ~/probe')).toBe('bash: /home/agent/probe: Read-only file system')
    expect(await run(terminal, 'echo x > /probe')).toBe('bash: /probe: Read-only file system')
    expect(await run(terminal, 'echo scratch > /tmp/dsh-private && cat /tmp/dsh-private')).toBe('scratch')
    await terminal.close()
    expect(await onHost(capable, `cat ${WORKSPACE}/hello.txt; test -e /tmp/dsh-private; echo "tmp-visible=$?"; test -e /home/agent/probe; echo "home=$?"`)).toBe('hello from the host\ntmp-visible=1\nhome=1\n')
  })
})

describe('workspace-write over SSH (bubblewrap on the host)', () => {
  let world: RemoteWorld
  beforeAll(async () => { world = await sshWorld(capable, 'workspace-write') })
  afterAll(async () => { await world?.dispose() })

  it('writing in the workspace works and is visible on the host outside the sandbox; writing elsewhere fails', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'echo written in the sandbox > out.txt && cat out.txt')).toBe('written in the sandbox')
    expect(await run(terminal, 'echo x > ~/probe')).toBe('bash: /home/agent/probe: Read-only file system')
    expect(await run(terminal, 'touch /var/tmp/probe')).toBe('touch: cannot touch \'/var/tmp/probe\': Read-only file system')
    expect(await run(terminal, 'echo scratch > /tmp/s && cat /tmp/s')).toBe('scratch')
    expect(await onHost(capable, `cat ${WORKSPACE}/out.txt; stat -c %U ${WORKSPACE}/out.txt; test -e /var/tmp/probe; echo "var-tmp=$?"`)).toBe('written in the sandbox\nagent\nvar-tmp=1\n')
    await terminal.close()
  })

  it('the upstream sandbox-mode fence holds over SSH too', async () => {
    const terminal = await world.open()
    expect(() => setSandboxMode(world.agent.session, 'read-only')).toThrow(
      'cannot change sandbox mode from "workspace-write" to "read-only" while persistent terminal sessions are open or being created; wait for creation to settle and close them first',
    )
    await terminal.close()
    setSandboxMode(world.agent.session, 'read-only')
    const reopened = await world.open()
    expect(await run(reopened, 'echo y > out.txt')).toBe('bash: out.txt: Read-only file system')
    await reopened.close()
    setSandboxMode(world.agent.session, 'workspace-write')
  })

  it('a workspace bubblewrap cannot bind fails closed before the shell starts', async () => {
    const missing = await sshWorld(capable, 'workspace-write', '/dsh-missing-ws')
    try {
      const failure = await missing.open().then(() => undefined, (error: unknown) => error)
      expect(failure).toBeInstanceOf(SandboxUnavailableError)
      expect((failure as Error).message.endsWith(`Runner failure: ssh agent@127.0.0.1:${capable.ports[0]}: bubblewrap cannot bind the workspace /dsh-missing-ws read-write: bwrap: Can't find source path /dsh-missing-ws: No such file or directory`)).toBe(true)
    } finally {
      await missing.dispose()
    }
  })
})

describe('a host where bubblewrap cannot run', () => {
  it('every confined mode fails closed with SandboxUnavailableError before the shell starts, and the report says why', async () => {
    const world = await sshWorld(refusing, 'read-only')
    try {
      const failure = await world.open().then(() => undefined, (error: unknown) => error)
      expect(failure).toBeInstanceOf(SandboxUnavailableError)
      expect((failure as SandboxUnavailableError).code).toBe('SANDBOX_UNAVAILABLE')
      const reason = 'bubblewrap at /usr/bin/bwrap does not work here: bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces. See <https://deb.li/bubblewrap> or <file:///usr/share/doc/bubblewrap/README.Debian.gz>.'
      expect((failure as Error).message.endsWith(`Runner failure: ssh agent@127.0.0.1:${refusing.ports[0]}: ${reason}`)).toBe(true)
      expect((failure as Error).message.startsWith(`sandbox mode "read-only" is requested but ssh agent@127.0.0.1:${refusing.ports[0]} cannot enforce it; refusing to run the command unconfined. Make bubblewrap work there for this workspace`)).toBe(true)
      expect(sandboxReportOf(world.ctx)!.modes.map(mode => [mode.mode, mode.available, mode.enforcement, mode.gaps])).toEqual([
        ['read-only', false, 'unavailable', [reason]],
        ['workspace-write', false, 'unavailable', [reason]],
        ['danger-full-access', true, 'none', []],
      ])
      expect(world.ctx.terminals.list(world.agent)).toEqual([])
      expect((await refusing.processes()).filter(row => row.args.includes('bash'))).toEqual([])
    } finally {
      await world.dispose()
    }
  })

  it('danger-full-access runs unconfined there and says so', async () => {
    const world = await sshWorld(refusing)
    try {
      expect(logLines(world)).toEqual([`info: WARNING: sandbox mode danger-full-access: terminals in ssh agent@127.0.0.1:${refusing.ports[0]} run UNCONFINED (no sandbox)`])
      const terminal = await world.open()
      expect(await run(terminal, 'echo unconfined > ~/danger && cat ~/danger')).toBe('unconfined')
      await terminal.close()
    } finally {
      await world.dispose()
    }
  })
})
