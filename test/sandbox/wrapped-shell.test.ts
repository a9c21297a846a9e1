/**
 * Under a wrapper, `handle.pid` is still the shell: a terminal whose argv is bubblewrap's
 * confinement of bash (`bwrap PROFILE -- /bin/bash --noprofile --norc -i`, as terminal-bash gets
 * it from ctx.sandbox.confine) publishes bash's pid in the world's pid namespace, not bwrap's;
 * the idle prompt's foreground group is that pid, and a SIGKILL to it is refused as a SIGKILL to
 * the shell, exactly as without the wrapper. In both worlds: over SSH (the SSH sandbox
 * companion) and in a Docker container with the bubblewrap provider as its ctx.sandbox. Both
 * worlds run where bubblewrap can make its namespaces (seccomp and /proc masking relaxed).
 */
import { Context } from '@deepseek-ai/cordis'
import type { SubprocessRuntime, SubprocessTerminalHandle } from '@deepseek-ai/dsh-subprocess'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import type { RemoteTerminalHandle } from '../../src/providers/remote/terminal.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { BubblewrapSandboxProvider, probeBwrap } from '../../src/sandbox/bwrap.ts'
import { applySshSandbox } from '../../src/sandbox/ssh-companion.ts'
import { containerProcesses, execIn, terminalLeftovers, waitFor } from '../docker/helpers.ts'
import { BWRAP_CAPABLE, type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'
import { startContainer } from './helpers.ts'

const WORKSPACE = '/dsh-ws'
const BASH = ['/bin/bash', '--noprofile', '--norc', '-i']
const POLICY = { mode: 'workspace-write', workspaceRoot: WORKSPACE } as const

/** One world under test: its composed context (ctx.subprocess and a bwrap ctx.sandbox) and container. */
interface WrappedWorld {
  ctx: Context
  containerId: string
  close(): Promise<void>
}

async function prepare(containerId: string): Promise<void> {
  const made = await execIn(containerId, ['sh', '-c', `mkdir -p ${WORKSPACE} && chown agent:agent ${WORKSPACE}`])
  expect(made.exitCode).toBe(0)
}

const worlds: Record<string, () => Promise<WrappedWorld>> = {
  ssh: async () => {
    const sshd: SshdWorld = await startSshdWorld([{}], { hostConfig: BWRAP_CAPABLE })
    await prepare(sshd.containerId)
    const ctx = new Context()
    await ctx.plugin((await import('@deepseek-ai/dsh-sandbox-policy')).default, { mode: 'workspace-write', workspaceRoot: WORKSPACE })
    await ctx.plugin(SshSubprocessRuntime, { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false })
    await applySshSandbox(ctx)
    return { ctx, containerId: sshd.containerId, close: async () => { await ctx.fiber.dispose(); await sshd.stop() } }
  },
  docker: async () => {
    const container = await startContainer({ HostConfig: { Init: true, NetworkMode: 'none', ...BWRAP_CAPABLE } })
    await prepare(container.id)
    const ctx = new Context()
    await ctx.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent' })
    const probe = await probeBwrap(async script => execIn(container.id, ['sh', '-c', script], 'agent'), [WORKSPACE])
    expect(probe.usable).toBe(true)
    // In a Docker world bwrap's parent is the short-lived `runc exec` (see BwrapLifetime).
    await ctx.plugin(BubblewrapSandboxProvider, { where: `docker container ${container.id.slice(0, 12)}`, probe, workspaceRoot: WORKSPACE, dieWithParent: false })
    return { ctx, containerId: container.id, close: async () => { await ctx.fiber.dispose(); await container.remove() } }
  },
}

describe.each(Object.keys(worlds))('a bash wrapped by bubblewrap in the %s world', name => {
  let world: WrappedWorld
  let runtime: SubprocessRuntime

  beforeAll(async () => {
    world = await worlds[name]!()
    runtime = world.ctx.subprocess
  })

  afterAll(async () => {
    await world?.close()
  })

  async function open(argv: readonly string[]): Promise<SubprocessTerminalHandle> {
    const terminal = await runtime.spawnTerminal({ argv, cwd: WORKSPACE, env: { TERM: 'dumb', PS1: 'dsh> ' }, rows: 24, cols: 80, graceMs: 1_000 })
    terminal.output.resume()
    return terminal
  }

  /** The foreground facts once the shell's job control took the terminal. */
  async function idleFacts(terminal: SubprocessTerminalHandle): Promise<unknown> {
    return waitFor(() => terminal.inspectForeground(), facts => facts?.processGroupId === terminal.pid && facts.inputWaiting, 5_000)
  }

  it('publishes the shell\'s pid, whose idle prompt is the foreground group, as without the wrapper', async () => {
    const argv = world.ctx.sandbox.confine(BASH, POLICY).argv
    expect(argv.slice(0, 1)).toEqual(['/usr/bin/bwrap'])
    const wrapped = await open(argv)
    const plain = await open(BASH)
    try {
      const table = await containerProcesses(world.containerId)
      expect(table.find(row => row.pid === wrapped.pid)?.cmdline).toBe(BASH.join(' '))
      // The session is the wrapper's: bwrap leads it, the shell runs inside.
      const session = (wrapped as RemoteTerminalHandle).session
      expect(table.find(row => row.pid === session.pid)?.cmdline.startsWith('/usr/bin/bwrap ')).toBe(true)
      expect(session.pid).not.toBe(wrapped.pid)
      expect(await idleFacts(plain)).toEqual({ processGroupId: plain.pid, inputWaiting: true })
      expect(await idleFacts(wrapped)).toEqual({ processGroupId: wrapped.pid, inputWaiting: true })
    } finally {
      await Promise.all([wrapped.terminate(), plain.terminate()])
    }
  })

  it('refuses a SIGKILL to the wrapped shell\'s group, signals a foreground job, and closes leaving nothing', async () => {
    const terminal = await open(world.ctx.sandbox.confine(BASH, POLICY).argv)
    const session = (terminal as RemoteTerminalHandle).session
    await idleFacts(terminal)
    await expect(terminal.signalForeground('SIGKILL')).rejects.toThrow('refusing to SIGKILL the terminal shell; terminate the terminal session instead')
    await terminal.write('sleep 9301\r')
    const job = await waitFor(() => terminal.inspectForeground(), facts => facts !== undefined && facts.processGroupId !== terminal.pid, 5_000)
    const target = await terminal.signalForeground('SIGINT')
    expect(target).toBe(job!.processGroupId)
    expect(await idleFacts(terminal)).toEqual({ processGroupId: terminal.pid, inputWaiting: true })
    await terminal.write('sleep 9302 &\r')
    await waitFor(async () => (await containerProcesses(world.containerId)).some(row => row.cmdline === 'sleep 9302'), found => found, 5_000)
    await terminal.terminate()
    expect(await terminalLeftovers(world.containerId, session.pid)).toEqual([])
    expect((await containerProcesses(world.containerId)).filter(row => row.cmdline.startsWith('sleep 930'))).toEqual([])
  })
})
