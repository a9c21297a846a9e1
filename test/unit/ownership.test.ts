/**
 * Session ownership's judgement, on synthetic registry and process facts (the real registry and
 * tags are exercised against real worlds in test/{docker,ssh}/client-death.test.ts).
 */
import { describe, expect, it } from 'vitest'
import { markTagged } from '../../src/providers/remote/control-channel.ts'
import { findOrphans, parseSessionTag, stateDirectoryName } from '../../src/providers/remote/ownership.ts'

const A = 'a'.repeat(32)
const B = 'b'.repeat(32)
const C = 'c'.repeat(32)
const SESSION = '0123456789abcdef'

describe('findOrphans', () => {
  const registrations = [
    { client: A, pid: 10, starttime: 100, live: false }, // gone: its only program ended
    { client: B, pid: 20, starttime: 200, live: false }, // alive: one of its programs still runs
    { client: B, pid: 21, starttime: 210, live: true },
    { client: C, pid: 30, starttime: 300, live: false }, // gone, and left nothing running
  ]
  const tagged = [
    { pid: 101, starttime: 1010, tag: `${A}.${SESSION}` },
    { pid: 102, starttime: 1020, tag: `${A}.fedcba9876543210` },
    { pid: 201, starttime: 2010, tag: `${B}.${SESSION}` },
    { pid: 301, starttime: 3010, tag: `${'d'.repeat(32)}.${SESSION}` }, // a client never registered here
    { pid: 302, starttime: 3020, tag: 'not-a-tag' },
    { pid: 303, starttime: 3030, tag: `${A}.${SESSION}x` }, // malformed: never trusted
  ]

  it('takes the tagged processes of every registered client none of whose programs runs', () => {
    expect(findOrphans(registrations, tagged)).toEqual([
      { client: A, registrations: [registrations[0]], processes: [tagged[0], tagged[1]] },
      { client: C, registrations: [registrations[3]], processes: [] },
    ])
  })

  it('never takes a process of a client with a live program, nor of an unknown client, nor a malformed tag', () => {
    const pids = findOrphans(registrations, tagged).flatMap(orphan => orphan.processes.map(process => process.pid))
    expect(pids).not.toContain(201)
    expect(pids).not.toContain(301)
    expect(pids).not.toContain(302)
    expect(pids).not.toContain(303)
  })

  it('finds nothing in an empty registry, whatever is tagged', () => {
    expect(findOrphans([], tagged)).toEqual([])
  })
})

describe('tags and names', () => {
  it('parses CLIENT.SESSION (32 and 16 lowercase hex digits) and nothing else', () => {
    expect(parseSessionTag(`${A}.${SESSION}`)).toEqual({ client: A, session: SESSION })
    expect(parseSessionTag(`${A.toUpperCase()}.${SESSION}`)).toBeUndefined()
    expect(parseSessionTag(`${A}.${SESSION}.x`)).toBeUndefined()
    expect(parseSessionTag(`${A}`)).toBeUndefined()
  })

  it('names a client\'s state directory after the uid and the client', () => {
    expect(stateDirectoryName(1000, A)).toBe(`dsh-remote-1000-${A}`)
  })
})

describe('markTagged', () => {
  const row = (pid: number, starttime: number) => ({ pid, ppid: 1, pgrp: pid, session: pid, state: 'S', starttime, tagged: false })
  const table = [row(10, 100), row(11, 110), row(12, 120)]

  it('marks exactly the rows whose identity carries the tag (a reused pid with another start time is not one)', () => {
    const tagged = [{ pid: 10, starttime: 100, tag: `${A}.${SESSION}` }, { pid: 11, starttime: 999, tag: `${A}.${SESSION}` }, { pid: 12, starttime: 120, tag: `${B}.${SESSION}` }]
    expect(markTagged(table, tagged, `${A}.${SESSION}`).map(entry => [entry.pid, entry.tagged])).toEqual([[10, true], [11, false], [12, false]])
  })

  it('leaves every row untagged when nothing carries the tag', () => {
    expect(markTagged(table, [], `${A}.${SESSION}`)).toEqual(table)
  })
})
