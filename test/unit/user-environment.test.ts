/**
 * The pure rules behind a world's locale and HOME (providers/remote/environment.ts) and the
 * wait-transition rule of foreground probes (providers/remote/input-wait.ts).
 */
import { describe, expect, it } from 'vitest'
import { chooseLocale, isUtf8Locale, normalizeLocaleName, userEnvironment } from '../../src/providers/remote/environment.ts'
import { InputWaitObserver } from '../../src/providers/remote/input-wait.ts'

/** `locale -a` of Debian bookworm's libc-bin without locales-all (the project image). */
const DEBIAN = ['C', 'C.utf8', 'POSIX']

describe('normalizeLocaleName', () => {
  it('lower-cases the codeset and keeps only its letters and digits, as glibc does', () => {
    expect(['C.UTF-8', 'en_US.UTF-8@euro', 'de_DE', 'C'].map(normalizeLocaleName)).toEqual(['C.utf8', 'en_US.utf8@euro', 'de_DE', 'C'])
  })

  it('tells UTF-8 codesets from others', () => {
    expect(['C.UTF-8', 'en_US.utf8', 'de_DE.ISO-8859-1', 'POSIX', 'C'].map(isUtf8Locale)).toEqual([true, true, false, false, false])
  })
})

describe('chooseLocale', () => {
  it('keeps a world that names its own locale in LC_ALL, LC_CTYPE or LANG', () => {
    expect(chooseLocale({ LANG: 'C.UTF-8' }, DEBIAN, 'auto', 'en_US.UTF-8')).toEqual({ lang: undefined, source: 'world', effective: true, reason: 'the world\'s own LANG=C.UTF-8' })
    expect(chooseLocale({ LC_ALL: 'C' }, DEBIAN, 'auto', undefined).source).toBe('world')
  })

  it('treats an empty LANG as none, and prefers the caller\'s UTF-8 LANG when the world has it', () => {
    expect(chooseLocale({ LANG: '' }, [...DEBIAN, 'en_US.utf8'], 'auto', 'en_US.UTF-8')).toEqual({ lang: 'en_US.UTF-8', source: 'caller', effective: true, reason: 'LANG=en_US.UTF-8: the caller\'s LANG, which the world has' })
  })

  it('falls back to C.UTF-8, and to nothing where the world has no UTF-8 locale or cannot say', () => {
    expect(chooseLocale({}, DEBIAN, 'auto', 'fr_FR.ISO-8859-1')).toEqual({ lang: 'C.UTF-8', source: 'c-utf8', effective: true, reason: 'LANG=C.UTF-8: the world names no locale' })
    expect(chooseLocale({}, ['C', 'POSIX'], 'auto', undefined)).toEqual({ lang: undefined, source: 'none', effective: false, reason: 'the world names no locale and has no UTF-8 one (C, POSIX): programs run in the POSIX locale' })
    expect(chooseLocale({}, undefined, 'auto', undefined).source).toBe('none')
  })

  it('obeys a configured name, saying when the world\'s own LC_ALL or LC_CTYPE overrides it', () => {
    expect(chooseLocale({ LC_ALL: 'POSIX' }, DEBIAN, 'C.UTF-8', undefined)).toEqual({ lang: 'C.UTF-8', source: 'configured', effective: false, reason: 'LANG=C.UTF-8 as configured (but the world\'s own LC_ALL=POSIX overrides LANG)' })
    expect(chooseLocale({ LANG: 'C' }, DEBIAN, 'C.UTF-8', undefined)).toEqual({ lang: 'C.UTF-8', source: 'configured', effective: true, reason: 'LANG=C.UTF-8 as configured' })
  })

  it('obeys a configured name (saying when the world lacks it) and off', () => {
    expect(chooseLocale({ LANG: 'C' }, DEBIAN, 'de_DE.UTF-8', undefined)).toEqual({ lang: 'de_DE.UTF-8', source: 'configured', effective: false, reason: 'LANG=de_DE.UTF-8 as configured (not in the world\'s `locale -a`: its C library falls back to POSIX)' })
    expect(chooseLocale({}, DEBIAN, false, 'C.UTF-8')).toEqual({ lang: undefined, source: 'off', effective: true, reason: 'locale setting off: the world\'s environment is kept as it is' })
  })
})

describe('userEnvironment', () => {
  it('adds LANG and, for a uid without a passwd entry, its private HOME over the engine\'s /', () => {
    const environment = userEnvironment({ HOME: '/', PATH: '/bin' }, { passwdEntry: false, privateHome: '/tmp/dsh-remote-home-4242', refusedHome: undefined, locales: DEBIAN }, 'auto', undefined)
    expect(environment.ambient).toEqual({ HOME: '/tmp/dsh-remote-home-4242', PATH: '/bin', LANG: 'C.UTF-8' })
  })
})

describe('InputWaitObserver', () => {
  const facts = (tpgid: number, call: string | undefined) => ({ tpgid, shellPgrp: 10, inputWaiting: call !== undefined, waitingCall: call })

  it('reports a group that waits again in a different wait as not waiting once (it left its wait between probes)', () => {
    const observer = new InputWaitObserver()
    expect([
      facts(10, '10:270:0x1:0x7ffd:40'), // the prompt, before the send
      facts(10, '10:0:0x3:0x7ffe:41'), // `read -u 3 x`: same group, another wait
      facts(10, '10:0:0x3:0x7ffe:41'), // the same wait again
    ].map(item => observer.observe(item))).toEqual([true, false, true])
  })

  it('remembers a group\'s wait across other groups: the shell back from `seq` waiting in `read x` is reported not waiting once', () => {
    const observer = new InputWaitObserver()
    expect([
      facts(10, '10:0:0x0:0x7ffd:40'), // the prompt, before the send
      facts(20, undefined), // `seq 1 100000`, printing
      facts(10, '10:0:0x0:0x7ffc:52'), // the builtin `read x`: the shell's group, another wait
      facts(10, '10:0:0x0:0x7ffc:52'), // the same wait again
    ].map(item => observer.observe(item))).toEqual([true, false, false, true])
  })

  it('forgets the oldest groups beyond 32: a group seen again after them is reported as it is', () => {
    const observer = new InputWaitObserver()
    observer.observe(facts(10, '10:0:0x0:0x7ffd:40'))
    for (let group = 100; group < 132; group += 1) observer.observe(facts(group, undefined))
    expect(observer.observe(facts(10, '10:0:0x0:0x7ffc:52'))).toBe(true)
  })

  it('reports a group that just became foreground as it is, and a group not waiting as not waiting', () => {
    const observer = new InputWaitObserver()
    expect([facts(10, '10:270:0x1:0x7ffd:40'), facts(20, '20:0:0x0:0x7ffe:3'), facts(20, undefined), facts(20, '20:0:0x0:0x7ffe:5')].map(item => observer.observe(item))).toEqual([true, true, false, true])
  })
})
