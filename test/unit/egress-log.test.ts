/**
 * The egress log (src/network/egress-log.ts), on a real file in a temporary directory: one JSON
 * line per record with keys in a fixed order, appended after what the file held (never
 * truncated), created with mode 0600, lines whole and in order under a burst; totals over
 * every record; and a failing file reported once through onError while record() never throws.
 */
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { EgressLog, type EgressRecord } from '../../src/network/egress-log.ts'

let directory: string
beforeEach(async () => { directory = await mkdtemp(join(tmpdir(), 'egress-log-')) })
afterEach(async () => { await rm(directory, { recursive: true, force: true }) })

const allowed: EgressRecord = {
  time: '2026-12-04T01:02:03.456Z', world: 'docker:dev', process: { pid: 42, command: 'curl' }, host: 'example.com', address: '93.184.215.14',
  port: 443, via: 'connect', verdict: 'allow', rule: '*.example.com', reason: 'allowed by rule *.example.com', bytesUp: 517, bytesDown: 4096,
}
const denied: EgressRecord = {
  time: '2026-12-04T01:02:04.000Z', world: 'docker:dev', host: 'example.org', port: 80, via: 'http', verdict: 'deny', reason: 'no --allow rule matches example.org:80', bytesUp: 0, bytesDown: 0,
}

describe('EgressLog', () => {
  it('one JSON line per record, keys in a fixed order, absent ones left out; file mode 0600', async () => {
    const file = join(directory, 'egress.jsonl')
    const log = new EgressLog(file)
    log.record(allowed)
    // Keys given in another order, an explicit undefined, a process without command.
    log.record({ bytesDown: 0, bytesUp: 3, reason: 'failed', verdict: 'allow', via: 'forward', port: 5432, host: 'db.test', world: 'ssh:box', time: '2026-12-04T01:02:05.000Z', process: { pid: 7 }, rule: undefined, error: 'connect ECONNREFUSED 10.0.0.5:5432' })
    await log.close()
    expect(await readFile(file, 'utf8')).toBe(
      '{"time":"2026-12-04T01:02:03.456Z","world":"docker:dev","process":{"pid":42,"command":"curl"},"host":"example.com","address":"93.184.215.14","port":443,"via":"connect","verdict":"allow","rule":"*.example.com","reason":"allowed by rule *.example.com","bytesUp":517,"bytesDown":4096}\n'
      + '{"time":"2026-12-04T01:02:05.000Z","world":"ssh:box","process":{"pid":7},"host":"db.test","port":5432,"via":"forward","verdict":"allow","reason":"failed","bytesUp":3,"bytesDown":0,"error":"connect ECONNREFUSED 10.0.0.5:5432"}\n',
    )
    expect((await stat(file)).mode & 0o777).toBe(0o600)
  })

  it('appends after what the file held, never truncating it', async () => {
    const file = join(directory, 'egress.jsonl')
    await writeFile(file, 'earlier line\n')
    const first = new EgressLog(file)
    first.record(denied)
    await first.close()
    const second = new EgressLog(file)
    second.record(denied)
    await second.close()
    const line = `${JSON.stringify(denied)}\n`
    expect(await readFile(file, 'utf8')).toBe(`earlier line\n${line}${line}`)
  })

  it('a burst of records is written whole and in order', async () => {
    const file = join(directory, 'egress.jsonl')
    const log = new EgressLog(file)
    for (let i = 0; i < 2000; i++) log.record({ ...denied, port: i + 1, reason: `r${i}`.padEnd(300, 'x') })
    await log.close()
    const lines = (await readFile(file, 'utf8')).split('\n')
    expect(lines.pop()).toBe('')
    expect(lines.map(line => (JSON.parse(line) as EgressRecord).port)).toEqual(Array.from({ length: 2000 }, (_, i) => i + 1))
  })

  it('counts every record: verdicts and bytes', async () => {
    const log = new EgressLog()
    expect(log.counts()).toEqual({ allowed: 0, denied: 0, bytesUp: 0, bytesDown: 0 })
    log.record(allowed)
    log.record(allowed)
    log.record(denied)
    expect(log.counts()).toEqual({ allowed: 2, denied: 1, bytesUp: 1034, bytesDown: 8192 })
    await log.close()
  })

  it('a file that cannot be opened is reported once; record never throws and counting goes on', async () => {
    const errors: Error[] = []
    const log = new EgressLog(join(directory, 'missing', 'egress.jsonl'), { onError: error => errors.push(error) })
    log.record(allowed)
    log.record(denied)
    await new Promise(resolve => setTimeout(resolve, 50))
    log.record(denied)
    await log.close()
    expect(errors.length).toBe(1)
    expect((errors[0] as NodeJS.ErrnoException).code).toBe('ENOENT')
    expect(log.error).toBe(errors[0])
    expect(log.counts()).toEqual({ allowed: 1, denied: 2, bytesUp: 517, bytesDown: 4096 })
  })

  it('a throwing onError does not reach the caller', async () => {
    const log = new EgressLog(directory, { onError: () => { throw new Error('handler broke') } }) // a directory: open fails (EISDIR)
    log.record(denied)
    await expect(log.close()).resolves.toBeUndefined()
    expect((log.error as NodeJS.ErrnoException).code).toBe('EISDIR')
  })

  it('after close, records are counted and not written', async () => {
    const file = join(directory, 'egress.jsonl')
    const log = new EgressLog(file)
    log.record(denied)
    await log.close()
    log.record(denied)
    await log.close()
    expect(await readFile(file, 'utf8')).toBe(`${JSON.stringify(denied)}\n`)
    expect(log.counts().denied).toBe(2)
  })
})
