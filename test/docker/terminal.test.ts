/**
 * Upstream terminal-bash's real-shell suite (packages/terminal/terminal-bash/tests/local.spec.ts)
 * as a peer suite of the Docker world: the UNCHANGED @deepseek-ai/dsh-terminal-bash over
 * DockerSubprocessRuntime, composed by openWorld, with upstream's harness tuning. Each case runs
 * as root AND as the image's unprivileged user `agent`. The cases are shared with the SSH world
 * (test/helpers/real-shell-cases.ts); pid checks that upstream does with the host's process.kill
 * are done inside the container's pid namespace through a separate `docker exec` (helpers.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, type TerminalTuning, openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { DockerWorld, MANAGED_LABEL } from '../../src/providers/docker/docker-world.ts'
import { manyTerminalCases } from '../helpers/many-terminal-cases.ts'
import { AMBIENT_FOR_SCRUB_TEST, realShellCases } from '../helpers/real-shell-cases.ts'
import { IMAGE, UPSTREAM_TUNING, USERS, containerProcesses, docker, execIn } from './helpers.ts'

/** Workspace root inside the container (absent on the host, so no local realpath applies). */
const WORKSPACE = '/dsh-ws'

/** The shared managed container: its ambient env carries credentials that must be scrubbed. */
let shared: DockerWorld
const worlds: RemoteWorld[] = []

beforeAll(async () => {
  shared = await DockerWorld.open({
    docker,
    image: IMAGE,
    create: { Env: Object.entries(AMBIENT_FOR_SCRUB_TEST).map(([name, value]) => `${name}=${value}`) },
  })
  const made = await execIn(shared.containerId, ['sh', '-c', `mkdir -p ${WORKSPACE} && chmod 1777 ${WORKSPACE}`])
  expect(made.exitCode).toBe(0)
})

afterAll(async () => {
  await shared?.dispose()
})

afterEach(async () => {
  for (const world of worlds.splice(0)) await world.dispose()
})

/** upstream's harness(): a fresh composition per test, attached to the shared container. */
async function harness(user: string, timing: Pick<TerminalTuning, 'idleSilenceMs' | 'handoffGraceMs' | 'timeoutMs'> = {}): Promise<RemoteWorld> {
  const world = await openWorld({
    runtime: DockerSubprocessRuntime,
    runtimeConfig: { container: shared.containerId, user },
    workspaceRoot: WORKSPACE,
    terminal: { ...UPSTREAM_TUNING, ...timing },
  })
  worlds.push(world)
  return world
}

describe.each(USERS)('terminal-bash real shell in a Docker container as $label', ({ user, uid }) => {
  realShellCases({ containerId: () => shared.containerId, workspace: WORKSPACE, harness }, user, uid)
})

// Issue 21: many terminals at once, floods under flow control (one user: the cases are about
// the control channel and the transports, not about who runs the shell).
describe('many terminals and output floods in a Docker container as agent', () => {
  manyTerminalCases({ containerId: () => shared.containerId, workspace: WORKSPACE, harness }, 'agent')
})

describe('a managed world composed by openWorld', () => {
  it('creates a labelled container from the image, runs the shell in it, and removes it at dispose', async () => {
    const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE }, workspaceRoot: '/tmp', terminal: UPSTREAM_TUNING })
    let containerId: string | undefined
    try {
      const terminal = await world.open()
      const runtime = world.runtime as DockerSubprocessRuntime
      const dockerWorld = await runtime.world()
      containerId = dockerWorld.containerId
      expect(dockerWorld.managed).toBe(true)
      const info = await docker.getContainer(containerId).inspect()
      expect(info.Config.Labels[MANAGED_LABEL]).toBe('true')
      expect(info.State.Running).toBe(true)
      expect(info.HostConfig.NetworkMode).toBe('none')
      const result = await terminal.send('printf "user=%s cwd=%s\\n" "$(id -un)" "$PWD"')
      expect(result.waitReason).toBe('stdin_read')
      expect(result.viewport).toContain('user=root cwd=/tmp')
      // The shell is a session leader on the engine's PTY, in the container's pid namespace.
      const shell = (await containerProcesses(containerId)).find(row => row.pid === terminal.pid)
      expect(shell).toMatchObject({ pid: terminal.pid, session: terminal.pid, pgrp: terminal.pid, comm: 'bash' })
    } finally {
      await world.dispose()
    }
    const gone = await docker.getContainer(containerId!).inspect().then(() => 'exists', (error: { statusCode?: number }) => error.statusCode)
    expect(gone).toBe(404)
  }, 30_000)
})
