/**
 * The upstream file tools (dsh-tool-fs, dsh-fs-observation-policy, dsh-tool-fs-search,
 * dsh-tool-str-replace-editor) in the Docker world (the shared cases,
 * test/helpers/fs-tool-cases.ts): attached to a container this file starts, as the image's
 * `agent`; the read-only case in a MANAGED container created from the policy (ReadonlyRootfs,
 * the workspace a host folder bound read-only).
 */
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type Docker from 'dockerode'
import { afterAll, beforeAll } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import type { DockerSandboxProvider } from '../../src/sandbox/docker-provider.ts'
import { READ_ONLY_HELLO, WORKSPACE, fsToolCases } from '../helpers/fs-tool-cases.ts'
import { IMAGE, startTestContainer } from './helpers.ts'

let container: Docker.Container

beforeAll(async () => {
  container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'fs-tools' } })
})

afterAll(async () => {
  await container?.remove({ force: true })
})

/** The managed container's id, as the world's sandbox reports it (`docker container ID as USER`). */
function managedContainerOf(world: RemoteWorld): string {
  return (world.ctx.sandbox as DockerSandboxProvider).report().world.split(' ')[2]!
}

fsToolCases({
  name: 'docker',
  containerId: () => container.id,
  open: plugins => openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id, user: 'agent' }, workspaceRoot: WORKSPACE, plugins }),
  openReadOnly: async plugins => {
    // A host folder of the image's agent (uid 1000): the managed container runs as its owner.
    // 0755: root's check exec in the container has no CAP_DAC_OVERRIDE (CapDrop ALL).
    const host = mkdtempSync(join(tmpdir(), 'dsh-fs-tools-ro-'))
    writeFileSync(join(host, 'hello.txt'), READ_ONLY_HELLO)
    chmodSync(host, 0o755)
    chownSync(host, 1000, 1000)
    chownSync(join(host, 'hello.txt'), 1000, 1000)
    let world: RemoteWorld
    try {
      world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE, workspace: { bind: host } }, workspaceRoot: WORKSPACE, mode: 'read-only', plugins })
    } catch (error) {
      rmSync(host, { recursive: true, force: true })
      throw error
    }
    return {
      world,
      containerId: managedContainerOf(world),
      dispose: async () => {
        try {
          await world.dispose()
        } finally {
          rmSync(host, { recursive: true, force: true })
        }
      },
    }
  },
})
