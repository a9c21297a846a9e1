/**
 * Background jobs that live in the world (issue 35), one set of cases for every world: with
 * persistence 'client' a job the `bash` tool's producer starts is held by dsh-job in the world,
 * runs on when its client ends cleanly or is killed with SIGKILL, and a later client of the same
 * DSH session finds it by the same id, reads on from where the model stopped, waits for it and
 * kills it; with persistence 'off' it ends with its client. Real worlds, the real upstream
 * registry and bash executor.
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import type { Context } from '@deepseek-ai/cordis'
import { JobId } from '@deepseek-ai/dsh-jobs'
import { afterAll, describe, expect, it } from 'vitest'
import { scanHeldJobs } from '../../src/cli/doctor-jobs.ts'
import { ROOT } from './built-package.ts'
import type { JobClientPlan } from './job-client.ts'
import { callTool, openToolWorld, shown } from './job-tools.ts'
import { type JobClient, jobClient } from './job-worlds.ts'

/** A process of the world, as the cases look at it. */
export interface WorldProcess {
  comm: string
  cmdline: string
  state: string
}

/** One world the cases run in. */
export interface JobWorld {
  name: string
  /** Mounts the world's runtime with `persistence`, as the world's user. */
  runtime(persistence: 'client' | 'off'): (ctx: Context) => Promise<void>
  /** The same, for a client in a process of its own (job-client.ts). */
  plan(persistence: 'client' | 'off'): JobClientPlan['world']
  /** The world's processes now. */
  processes(): Promise<WorldProcess[]>
}

/**
 * A client process (job-client.ts, or with `tools` job-tools-client.ts: DSH's own tools) that
 * started `command` and read until `until`; its job id, what it read, and a SIGKILL.
 */
async function startClientProcess(plan: JobClientPlan, tools = false): Promise<{ id: string; read: string; kill(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test', 'helpers', tools ? 'job-tools-client.ts' : 'job-client.ts'), JSON.stringify(plan)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { err += chunk.toString() })
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  for (const deadline = Date.now() + 60_000; !out.includes('READY\n') && !out.includes('FAILED') && Date.now() < deadline;) await delay(50)
  expect(out, err).toContain('READY\n')
  return {
    id: /^ID (\S+)$/m.exec(out)![1]!,
    read: JSON.parse(/^READ (.*)$/m.exec(out)![1]!) as string,
    kill: async () => {
      child.kill('SIGKILL')
      await exited
    },
  }
}

/** The suite; call at the top level of a test file. */
export function jobCases(world: JobWorld): void {
  const open: JobClient[] = []
  const client = async (session: string, persistence: 'client' | 'off' = 'client'): Promise<JobClient> => {
    const made = await jobClient(world.runtime(persistence), session)
    open.push(made)
    return made
  }
  /** The command lines of the world's live `sleep` processes whose command line holds `text`. */
  const sleeping = async (text: string): Promise<string[]> => (await world.processes()).filter(row => row.comm === 'sleep' && row.cmdline.includes(text) && row.state !== 'Z').map(row => row.cmdline.trim())
  const holders = async (): Promise<number> => (await world.processes()).filter(row => row.comm === 'dsh-job' && row.state !== 'Z').length
  /** Wait (at most `boundMs`) until no holder runs in the world and no `sleep` whose command line holds `text`. */
  const untilGone = async (text: string | undefined, boundMs = 10_000): Promise<void> => {
    const left = async (): Promise<boolean> => (await holders()) > 0 || (text !== undefined && (await sleeping(text)).length > 0)
    for (let waited = 0; (await left()) && waited < boundMs; waited += 200) await delay(200)
  }
  /** Read job `id` until the text so far holds `needle`. */
  const readUntil = async (c: JobClient, id: JobId, needle: string): Promise<string> => {
    let text = ''
    for (const deadline = Date.now() + 20_000; !text.includes(needle) && Date.now() < deadline;) {
      text += c.jobs.read(id, c.agent).text
      if (!text.includes(needle)) await delay(100)
    }
    return text
  }
  /**
   * Job `command` of `session`: its client reads until `needle` (if given) and ends, the job
   * ends too, then a new client of the session finds it again (`ready(agent)`).
   */
  const afterRestart = async (session: string, command: string, needle?: string): Promise<{ id: JobId; second: JobClient }> => {
    const first = await client(session)
    const id = first.background(command)
    if (needle !== undefined) await readUntil(first, id, needle)
    await first.close()
    await untilGone(undefined, 20_000)
    const second = await client(session)
    await second.jobs.ready(second.agent)
    return { id, second }
  }
  const lines = (text: string): string[] => text.split('\n').filter(line => line.startsWith('line-'))
  const LOOP = 'for i in $(seq 1 40); do echo "line-$i"; sleep 0.1; done; echo "to-stderr" >&2; exit 3'
  const ALL = Array.from({ length: 40 }, (_, index) => `line-${index + 1}`)

  afterAll(async () => {
    for (const c of open.splice(0)) await c.close().catch(() => undefined)
  })

  describe(`held background jobs in the ${world.name} world (persistence client)`, () => {
    it('outlive a client that ends: the next client of the session lists the job by its id, reads on from the model\'s cursor (nothing twice, nothing lost) and gets its exit status', async () => {
      const first = await client('session-a')
      const id = first.background(LOOP)
      expect(id).toBe('bash-1')
      const seen = await readUntil(first, id, 'line-5\n')
      await first.close()
      expect(await holders()).toBe(1)
      const second = await client('session-a')
      expect(second.jobs.list(second.agent).map(job => [job.id, job.label, job.ownerSession])).toEqual([[id, LOOP, 'session-a']])
      const final = await second.jobs.wait(id, 30_000, second.agent)
      expect([final.status, final.detail]).toEqual(['completed', 'exit code: 3'])
      const rest = second.jobs.read(id, second.agent).text
      expect(lines(`${seen}${rest}`)).toEqual(ALL)
      expect(rest).toContain('[stderr]\nto-stderr')
      // Read to its end: nothing of the job is left in the world.
      await second.jobs.settled()
      expect(await holders()).toBe(0)
    }, 90_000)

    it('outlive a client killed with SIGKILL: the next client reads on from what the killed one had read, exactly once', async () => {
      const killed = await startClientProcess({ world: world.plan('client'), session: 'session-k', command: LOOP, until: 'line-3\n' })
      await killed.kill()
      const second = await client('session-k')
      expect(second.jobs.list(second.agent).map(job => job.id)).toEqual([killed.id])
      const final = await second.jobs.wait(JobId(killed.id), 30_000, second.agent)
      expect([final.status, final.detail]).toEqual(['completed', 'exit code: 3'])
      expect(lines(`${killed.read}${second.jobs.read(JobId(killed.id), second.agent).text}`)).toEqual(ALL)
    }, 90_000)

    it('a job that ended while no client was attached reports its true exit, and a new job takes a new id', async () => {
      const first = await client('session-b')
      const id = first.background('sleep 1; echo done-here; exit 7')
      await first.close()
      await untilGone(undefined)
      const second = await client('session-b')
      // doctor says the job's own status (the wrapper's exit trailer), not its wrapper's.
      const listed = (await scanHeldJobs(second.ctx.get('subprocess'), { reap: false })).jobs.filter(job => job.session === 'session-b')
      expect(listed.map(job => job.state)).toEqual(['ended: exited 7'])
      expect(second.jobs.list(second.agent).map(job => job.id)).toEqual([id])
      const final = await second.jobs.wait(id, 10_000, second.agent)
      expect([final.status, final.detail]).toEqual(['completed', 'exit code: 7'])
      expect(second.jobs.read(id, second.agent).text).toBe('done-here\n')
      const next = second.background('true')
      expect(next).not.toBe(id)
      await second.jobs.wait(next, 10_000, second.agent)
    }, 60_000)

    it('a client that awaits ready(agent) reads at its first read all that came while no client was there, and the job says it ended', async () => {
      const { id, second } = await afterRestart('session-f', 'echo early; sleep 1; echo late; echo gone >&2; exit 5', 'early\n')
      const read = second.jobs.read(id, second.agent)
      expect([read.text, read.snapshot.status, read.snapshot.detail]).toEqual(['late\n[stderr]\ngone\n', 'completed', 'exit code: 5'])
    }, 60_000)

    it('output past the world\'s log while no client was there: the next client is told exactly how many of the program\'s bytes the log dropped, and reads the latest 64 000 bytes', async () => {
      // 9 MiB in all, 1 MiB over the log's 8 MiB (the default logBytes).
      const { id, second } = await afterRestart('session-o', 'head -c 9437184 /dev/zero | tr "\\0" a')
      const read = second.jobs.read(id, second.agent)
      expect(read.snapshot.status).toBe('completed')
      expect(read.text).toBe(`${'a'.repeat(64_000)}\n[1048576 bytes of output were dropped: the world keeps the latest part of each stream]\n[8324608 bytes of output were dropped from memory: a job found again keeps the latest 64000 bytes of each stream between reads]`)
    }, 60_000)

    // Each job prints `started` once its sleeps run; `kill` comes from a client that did not start it.
    const KILLED = [
      { what: 'the job\'s whole process group, orphans included', session: 'session-c', command: 'sleep 1001 & sleep 1002 & echo started; wait', sleeps: ['sleep 1001', 'sleep 1002'] },
      { what: 'a job whose processes ignore SIGTERM (its shell, a child, an orphan): SIGKILL 2 s later', session: 'session-t', command: 'trap "" TERM; (exec sleep 1008) & sleep 1009 & echo started; while :; do sleep 1; done', sleeps: ['sleep 1008', 'sleep 1009'] },
    ]
    for (const { what, session, command, sleeps } of KILLED) {
      it(`kill from a later client ends ${what}, and nothing of it is left`, async () => {
        const first = await client(session)
        const id = first.background(command)
        await readUntil(first, id, 'started')
        await first.close()
        expect((await sleeping('sleep 100')).sort()).toEqual(sleeps)
        const second = await client(session)
        expect(second.jobs.kill(id, second.agent)).toBe('requested')
        const final = await second.jobs.wait(id, 15_000, second.agent)
        expect(final.status).toBe('killed')
        await untilGone('sleep 100')
        expect(await sleeping('sleep 100')).toEqual([])
        expect(await holders()).toBe(0)
      }, 60_000)
    }

    it('what a job leaves running when it ends (a `cmd &` writing elsewhere) ends with it: the holder ends it and leaves', async () => {
      const first = await client('session-l')
      const id = first.background('sleep 1010 >/dev/null 2>&1 & echo bye; exit 3')
      const final = await first.jobs.wait(id, 15_000, first.agent)
      expect([final.status, final.detail]).toEqual(['completed', 'exit code: 3'])
      await untilGone('sleep 1010')
      expect(await sleeping('sleep 1010')).toEqual([])
      expect(await holders()).toBe(0)
    }, 60_000)

    it('a job that dies by a signal after its client ended cleanly (its state directory gone) reports the signal, not the wrapper\'s troubles', async () => {
      const { id, second } = await afterRestart('session-s', 'echo hi; sleep 1; kill -9 $$', 'hi\n')
      const read = second.jobs.read(id, second.agent)
      expect([read.text, read.snapshot.status, read.snapshot.detail]).toEqual(['', 'killed', 'signal: SIGKILL'])
    }, 60_000)

    it('job_kill of a job found again, by a client that ends at once, still ends it', async () => {
      const first = await client('session-q')
      const id = first.background('sleep 1011')
      for (let waited = 0; (await sleeping('sleep 1011')).length === 0 && waited < 10_000; waited += 100) await delay(100)
      await first.close()
      const second = await client('session-q')
      expect(second.jobs.kill(id, second.agent)).toBe('requested')
      await second.close()
      await untilGone('sleep 1011')
      expect(await sleeping('sleep 1011')).toEqual([])
      expect(await holders()).toBe(0)
    }, 60_000)

    it('two clients of one session at once: a later client shows every job of both under ids of their own, and can end each', async () => {
      const a = await client('session-2c')
      a.background('sleep 1024')
      const b = await client('session-2c')
      b.background('sleep 1023')
      // Issued from what a read at its start: it may repeat b's id.
      a.background('sleep 1025')
      for (let waited = 0; (await sleeping('sleep 102')).length < 3 && waited < 10_000; waited += 100) await delay(100)
      await a.close()
      await b.close()
      const c = await client('session-2c')
      await c.jobs.ready(c.agent)
      const listed = c.jobs.list(c.agent)
      expect(listed.map(job => job.label).sort()).toEqual(['sleep 1023', 'sleep 1024', 'sleep 1025'])
      expect(new Set(listed.map(job => job.id)).size).toBe(3)
      // An id asked for that this client never showed is unknown under that very id.
      const other = await client('session-2d')
      const shownFirst = other.background('true')
      expect(shownFirst).not.toBe('bash-1')
      expect(() => other.jobs.get(JobId('bash-1'), other.agent)).toThrow('unknown job bash-1')
      for (const job of listed) expect(c.jobs.kill(job.id, c.agent)).toBe('requested')
      for (const job of listed) expect((await c.jobs.wait(job.id, 15_000, c.agent)).status).toBe('killed')
      await untilGone('sleep 102')
      expect(await sleeping('sleep 102')).toEqual([])
    }, 90_000)

    it('doctor lists a held job with its session and state, and --reap --include-jobs ends it and removes its files', async () => {
      const first = await client('session-r')
      const id = first.background('sleep 1004')
      for (let waited = 0; (await sleeping('sleep 1004')).length === 0 && waited < 10_000; waited += 100) await delay(100)
      await first.close()
      const inspector = await client('session-doctor')
      const listed = (await scanHeldJobs(inspector.ctx.get('subprocess'), { reap: false })).jobs.filter(job => job.session === 'session-r')
      expect(listed.map(job => [job.id, job.label, job.state.startsWith('running (holder ')])).toEqual([[id, 'sleep 1004', true]])
      const reaped = await scanHeldJobs(inspector.ctx.get('subprocess'), { reap: true })
      expect(reaped.reaped).toBe(true)
      expect(await sleeping('sleep 1004')).toEqual([])
      expect((await scanHeldJobs(inspector.ctx.get('subprocess'), { reap: false })).jobs).toEqual([])
    }, 60_000)

    it('through DSH\'s own tools: bash with run_in_background starts it, its client is killed with SIGKILL, a new client of the session reads what came meanwhile with job_output, then job_kill leaves nothing of it', async () => {
      const killed = await startClientProcess({ world: world.plan('client'), session: 'session-tools', command: 'for i in $(seq 1 600); do echo "tick-$i"; sleep 0.1; done', until: 'tick-3\n' }, true)
      await killed.kill()
      const next = await openToolWorld(world.plan('client'), 'session-tools')
      try {
        const listed = shown(await callTool(next, 'job_list', {}))
        expect(listed).toContain(killed.id)
        await delay(1_000)
        const meanwhile = shown(await callTool(next, 'job_output', { job_id: killed.id }))
        const ticks = `${killed.read}\n${meanwhile}`.split('\n').filter(line => /^tick-\d+$/.test(line)).map(line => Number(line.slice(5)))
        // Every tick once, in order, from the first: none lost while no client was there, none twice.
        expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, index) => index + 1))
        expect(ticks.length).toBeGreaterThan(5)
        expect(shown(await callTool(next, 'job_kill', { job_id: killed.id }))).toContain(killed.id)
        const final = await (next.ctx.get('jobs') as unknown as JobClient['jobs']).wait(JobId(killed.id), 15_000, next.agent)
        expect(final.status).toBe('killed')
        for (let waited = 0; ((await world.processes()).some(row => row.cmdline.includes('tick-$i') && row.state !== 'Z')) && waited < 10_000; waited += 200) await delay(200)
        expect((await world.processes()).filter(row => row.cmdline.includes('tick-$i') && row.state !== 'Z').map(row => row.comm)).toEqual([])
      } finally {
        await next.dispose()
      }
    }, 90_000)

    it('another session sees none of them', async () => {
      const other = await client('session-z')
      expect(other.jobs.list(other.agent)).toEqual([])
    })
  })

  describe(`background jobs in the ${world.name} world with persistence off`, () => {
    it('end with their client, as the upstream registry\'s do', async () => {
      const first = await client('session-d', 'off')
      const id = first.background('sleep 1003')
      for (let waited = 0; (await sleeping('sleep 1003')).length === 0 && waited < 10_000; waited += 100) await delay(100)
      expect(await sleeping('sleep 1003')).toEqual(['sleep 1003'])
      await first.close()
      expect(await sleeping('sleep 1003')).toEqual([])
      const second = await client('session-d', 'off')
      expect(second.jobs.list(second.agent)).toEqual([])
      expect(() => second.jobs.get(JobId(id), second.agent)).toThrow(`unknown job ${id}`)
    }, 60_000)
  })
}
