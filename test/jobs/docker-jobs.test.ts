/**
 * Background jobs that live in a Docker world (issue 35): with persistence 'client', a job the
 * `bash` tool's producer starts is held by dsh-job in the container, runs on when its client
 * ends, and a later client of the same DSH session finds it by the same id, reads on from
 * where the model stopped, waits for it and kills it. Real engine, real upstream registry and
 * bash executor, a real container attached as a dev container would be.
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { Context } from '@deepseek-ai/cordis'
import { JobId } from '@deepseek-ai/dsh-jobs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { containerProcesses, startTestContainer } from '../docker/helpers.ts'
import { type JobClient, jobClient } from '../helpers/job-worlds.ts'

let containerId: string
let remove: () => Promise<void>
const open: JobClient[] = []

const runtime = (persistence: 'client' | 'off') => async (ctx: Context): Promise<void> => {
  await ctx.plugin(DockerSubprocessRuntime, { container: containerId, user: 'agent', persistence })
}

async function client(session: string, persistence: 'client' | 'off' = 'client'): Promise<JobClient> {
  const made = await jobClient(runtime(persistence), session)
  open.push(made)
  return made
}

/** The command lines of the container's live `sleep` processes whose command line holds `text`. */
async function running(text: string): Promise<string[]> {
  return (await containerProcesses(containerId)).filter(row => row.comm === 'sleep' && row.cmdline.includes(text) && row.state !== 'Z').map(row => row.cmdline.trim())
}

/** Read job `id` until its text so far contains `needle` (the job prints over time). */
async function readUntil(c: JobClient, id: JobId, needle: string, boundMs = 20_000): Promise<string> {
  let text = ''
  for (const deadline = Date.now() + boundMs; !text.includes(needle) && Date.now() < deadline;) {
    text += c.jobs.read(id, c.agent).text
    if (!text.includes(needle)) await delay(100)
  }
  return text
}

beforeAll(async () => {
  const container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'jobs' } })
  containerId = container.id
  remove = async () => { await container.remove({ force: true }) }
})

afterAll(async () => {
  for (const c of open.splice(0)) await c.close().catch(() => undefined)
  await remove?.()
})

describe('a held background job in a Docker world (persistence client)', () => {
  it('outlives its client: the next client of the session lists it by its id, reads on from the model\'s cursor (nothing twice, nothing lost), and gets its exit status', async () => {
    const first = await client('session-a')
    const id = first.background('for i in $(seq 1 40); do echo "line-$i"; sleep 0.1; done; echo "to-stderr" >&2; exit 3')
    expect(id).toBe('bash-1')
    const seen = await readUntil(first, id, 'line-5\n')
    await first.close()
    // The job runs on in the world, held by dsh-job.
    expect((await containerProcesses(containerId)).filter(row => row.comm === 'dsh-job').length).toBe(1)
    const second = await client('session-a')
    expect(second.jobs.list(second.agent).map(job => [job.id, job.label, job.ownerSession])).toEqual([[id, 'for i in $(seq 1 40); do echo "line-$i"; sleep 0.1; done; echo "to-stderr" >&2; exit 3', 'session-a']])
    const final = await second.jobs.wait(id, 30_000, second.agent)
    expect([final.status, final.detail]).toEqual(['completed', 'exit code: 3'])
    const rest = second.jobs.read(id, second.agent).text
    const lines = `${seen}${rest}`.split('\n').filter(line => line.startsWith('line-'))
    expect(lines).toEqual(Array.from({ length: 40 }, (_, index) => `line-${index + 1}`))
    expect(rest).toContain('[stderr]\nto-stderr')
    // Read to its end: the job's files leave the world.
    await delay(500)
    expect((await containerProcesses(containerId)).filter(row => row.comm === 'dsh-job')).toEqual([])
  }, 90_000)

  it('a job that ended while no client was attached reports its true exit, and a new job takes a new id', async () => {
    const first = await client('session-b')
    const id = first.background('sleep 1; echo done-here; exit 7')
    await first.close()
    await delay(2_500)
    const second = await client('session-b')
    expect(second.jobs.list(second.agent).map(job => job.id)).toEqual([id])
    const final = await second.jobs.wait(id, 10_000, second.agent)
    expect([final.status, final.detail]).toEqual(['completed', 'exit code: 7'])
    expect(second.jobs.read(id, second.agent).text).toBe('done-here\n')
    const next = second.background('true')
    expect(next).not.toBe(id)
    await second.jobs.wait(next, 10_000, second.agent)
  }, 60_000)

  it('kill from a later client ends the job\'s whole process group, orphans included', async () => {
    const first = await client('session-c')
    const id = first.background('sleep 1001 & sleep 1002 & echo started; wait')
    await readUntil(first, id, 'started')
    await first.close()
    expect((await running('sleep 100')).sort()).toEqual(['sleep 1001', 'sleep 1002'])
    const second = await client('session-c')
    expect(second.jobs.kill(id, second.agent)).toBe('requested')
    const final = await second.jobs.wait(id, 15_000, second.agent)
    expect(final.status).toBe('killed')
    for (let waited = 0; (await running('sleep 100')).length > 0 && waited < 10_000; waited += 200) await delay(200)
    expect(await running('sleep 100')).toEqual([])
  }, 60_000)

  it('another session sees none of them', async () => {
    const other = await client('session-z')
    expect(other.jobs.list(other.agent)).toEqual([])
  })

  it('with persistence off, a job ends with its client, as the upstream registry\'s do', async () => {
    const first = await client('session-d', 'off')
    const id = first.background('sleep 1003')
    for (let waited = 0; (await running('sleep 1003')).length === 0 && waited < 10_000; waited += 100) await delay(100)
    expect(await running('sleep 1003')).toEqual(['sleep 1003'])
    await first.close()
    expect(await running('sleep 1003')).toEqual([])
    const second = await client('session-d', 'off')
    expect(second.jobs.list(second.agent)).toEqual([])
    expect(() => second.jobs.get(JobId(id), second.agent)).toThrow(`unknown job ${id}`)
  }, 60_000)
})
