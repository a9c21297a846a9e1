/**
 * Background jobs that live in a Docker world (issue 35): the cases of test/helpers/job-cases.ts
 * in a container attached as a dev container would be, as its `agent` user.
 */
import type { Context } from '@deepseek-ai/cordis'
import { afterAll, beforeAll } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { containerProcesses, startTestContainer } from '../docker/helpers.ts'
import { jobCases } from '../helpers/job-cases.ts'

let containerId = ''
let remove: (() => Promise<void>) | undefined

beforeAll(async () => {
  const container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'jobs' } })
  containerId = container.id
  remove = async () => { await container.remove({ force: true }) }
})

afterAll(async () => { await remove?.() })

jobCases({
  name: 'docker',
  runtime: persistence => async (ctx: Context) => { await ctx.plugin(DockerSubprocessRuntime, { container: containerId, user: 'agent', persistence }) },
  plan: persistence => ({ runtime: 'docker', config: { container: containerId, user: 'agent', persistence } }),
  processes: () => containerProcesses(containerId),
})
