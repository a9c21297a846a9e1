/**
 * A real DSH composition of the swarm world: the UPSTREAM loader (`@deepseek-ai/dsh-app-boot`'s
 * boot) reads a `cordis.patch.yml` written as a user would, mounting the terminal service,
 * terminal-bash, the sandbox policy and our swarm world (`dsh-remote-worlds/swarm` +
 * `dsh-remote-worlds/swarm/sandbox`) by their package names, from the package as built for a
 * user. A terminal opened through the tree runs in the task on the node the placement names,
 * confined by the policy; disposing the tree removes the service and its container.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { bootedTerminal, useLoaderProfile } from '../helpers/booted.ts'
import { worldLayer } from '../helpers/built-package.ts'
import { hangGuard } from '../docker/helpers.ts'
import { SWARM_IMAGE, SWARM_MANAGER, SWARM_NODES, madeSince, nodeEngine, swarmInventory, useSwarmCluster } from '../helpers/swarm.ts'

const tmp = mkdtempSync(join(tmpdir(), 'dsh-remote-swarm-loader-'))
const workspace = join(tmp, 'workspace')

/** The user's patch file: the stack, with the swarm world placed on dsh-swarm-3. */
function patchFile(): string {
  return worldLayer({
    comment: 'A DSH profile layer mounting a persistent shell in a swarm world.',
    mode: 'workspace-write',
    workspaceRoot: '/workspace',
    world: `    - id: subprocess
      name: dsh-remote-worlds/swarm
      config:
        manager:
          host: ${SWARM_MANAGER}
        nodes:
${SWARM_NODES.slice(1).map(node => `          - host: ${node.endpoint}`).join('\n')}
        image: ${SWARM_IMAGE}
        user: agent
        workspace:
          bind: ${workspace}
        placement:
          constraints:
            - node.labels.dsh-remote-worlds.node==dsh-swarm-3
    - id: sandbox
      name: dsh-remote-worlds/swarm/sandbox`,
  })
}

const before = useSwarmCluster()
const profile = useLoaderProfile(tmp, patchFile)

describe('the upstream loader composes our swarm world from cordis.patch.yml', () => {
  it('opens a terminal in the task on the node asked for, confined by the policy, and disposal removes the service and its container', async () => {
    const ctx = await profile.boot()
    // The built package's runtime (another module instance than src/'s): read by shape.
    const runtime = ctx.get('subprocess') as unknown as { constructor: { name: string }; swarm?: { service: { name: string }; task: { containerId: string }; node: { identity: { name: string } } } }
    expect(runtime.constructor.name).toBe('SwarmSubprocessRuntime')
    const created = await bootedTerminal(ctx, 'swarm-loader-test')
    const swarm = runtime.swarm!
    expect(swarm.node.identity.name).toBe('dsh-swarm-3')
    const facts = await created.send('printf "host=%s uid=%s pwd=%s\\n" "$(hostname)" "$(id -u)" "$PWD"; touch /workspace/ok && echo ws-ok; touch /etc/denied 2>&1')
    expect(facts).toContain('host=dsh-swarm-3 uid=1000 pwd=/workspace\n')
    expect(facts).toContain('ws-ok\n')
    expect(facts).toContain("touch: cannot touch '/etc/denied': Read-only file system")
    expect(madeSince(before(), await swarmInventory()).services).toEqual([swarm.service.name])

    await created.kill()
    await hangGuard(ctx.fiber.dispose(), 60_000, 'dispose')
    profile.disposed()
    expect(madeSince(before(), await swarmInventory())).toEqual({ services: [], containers: [], volumes: [] })
    await expect(nodeEngine(3).getContainer(swarm.task.containerId).inspect()).rejects.toMatchObject({ statusCode: 404 })
  }, 180_000)
})
