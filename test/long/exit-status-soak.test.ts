/**
 * No exit status is lost, under soak (moved out of `npm test`'s budget by issue 33, item 3): 1000
 * spawns of `exit 7` per stdio mode, 8 in flight, in the Docker world (a container of the
 * project image, as `agent`) and the SSH world (a real OpenSSH sshd, as `agent`), with the
 * assertions of test/helpers/exit-status-cases.ts; npm test runs the same cases with 200.
 */
import type Docker from 'dockerode'
import { afterAll, beforeAll } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { startTestContainer } from '../docker/helpers.ts'
import { exitStatusCases } from '../helpers/exit-status-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let container: Docker.Container
let sshd: SshdWorld

beforeAll(async () => {
  container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'exit-status-soak' } })
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await container?.remove({ force: true })
  await sshd?.stop()
})

exitStatusCases({
  name: 'docker',
  plugin: async ctx => { await ctx.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent' }) },
}, { spawns: 1000, parallel: 8, spawnsOnly: true })

exitStatusCases({
  name: 'ssh',
  plugin: async ctx => {
    await ctx.plugin(SshSubprocessRuntime, { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false })
  },
}, { spawns: 1000, parallel: 8, spawnsOnly: true })
