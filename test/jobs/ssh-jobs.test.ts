/**
 * Background jobs that live on an SSH host (issue 35): the cases of test/helpers/job-cases.ts
 * against a real OpenSSH sshd in a container on the host network (loopback only), as `agent`.
 */
import type { Context } from '@deepseek-ai/cordis'
import { afterAll, beforeAll } from 'vitest'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { containerProcesses } from '../docker/helpers.ts'
import { jobCases } from '../helpers/job-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => { sshd = await startSshdWorld() })
afterAll(async () => { await sshd?.stop() })

const config = (persistence: 'client' | 'off') => ({ target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false as const, agent: false as const, persistence })

jobCases({
  name: 'ssh',
  runtime: persistence => async (ctx: Context) => { await ctx.plugin(SshSubprocessRuntime, config(persistence)) },
  plan: persistence => ({ runtime: 'ssh', config: config(persistence) }),
  processes: () => containerProcesses(sshd.containerId),
})
