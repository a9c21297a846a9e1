/**
 * The upstream file tools (dsh-tool-fs, dsh-fs-observation-policy, dsh-tool-fs-search,
 * dsh-tool-str-replace-editor) in the SSH world (the shared cases,
 * test/helpers/fs-tool-cases.ts) against a real OpenSSH sshd (project image, 127.0.0.1, keys
 * generated per run), logged in as `agent`; the read-only case on a second sshd host where
 * bubblewrap works (BWRAP_CAPABLE), so the file server and the shells run confined by it.
 */
import type { Context } from '@deepseek-ai/cordis'
import { afterAll, beforeAll, expect } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { READ_ONLY_HELLO, WORKSPACE, fsToolCases } from '../helpers/fs-tool-cases.ts'
import { BWRAP_CAPABLE, type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await sshd?.stop()
})

/** A world logged in to `host` as agent, workspace {@link WORKSPACE}. */
function agentWorld(host: SshdWorld, plugins: readonly ((ctx: Context) => Promise<unknown>)[], mode?: 'read-only'): Promise<RemoteWorld> {
  return openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${host.ports[0]}`, identity: host.clientKeyFile, knownHosts: host.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: WORKSPACE,
    plugins,
    ...(mode !== undefined ? { mode } : {}),
  })
}

fsToolCases({
  name: 'ssh',
  containerId: () => sshd.containerId,
  open: plugins => agentWorld(sshd, plugins),
  openReadOnly: async plugins => {
    const host = await startSshdWorld([{}], { hostConfig: BWRAP_CAPABLE })
    let world: RemoteWorld
    try {
      const made = await host.exec(['sh', '-c', `mkdir -p ${WORKSPACE} && printf '${READ_ONLY_HELLO.replace('\n', '\\n')}' > ${WORKSPACE}/hello.txt && chown -R agent:agent ${WORKSPACE}`])
      expect(made.exitCode).toBe(0)
      world = await agentWorld(host, plugins, 'read-only')
    } catch (error) {
      await host.stop()
      throw error
    }
    return {
      world,
      containerId: host.containerId,
      dispose: async () => {
        try {
          await world.dispose()
        } finally {
          await host.stop()
        }
      },
    }
  },
})
