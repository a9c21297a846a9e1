/**
 * `--egress [WORLD_PORT:]HOST:PORT` parsing (src/network/egress-forward.ts) and the allow rule
 * each forward implies.
 */
import { describe, expect, it } from 'vitest'
import { InvalidEgressForwardError, impliedAllowRule, parseEgressForward } from '../../src/network/egress-forward.ts'

describe('parseEgressForward', () => {
  it('takes HOST:PORT with the world port defaulting to PORT, and an explicit world port', () => {
    expect(parseEgressForward('db.internal:5432')).toEqual({ worldPort: 5432, host: 'db.internal', port: 5432 })
    expect(parseEgressForward('15432:db.internal:5432')).toEqual({ worldPort: 15432, host: 'db.internal', port: 5432 })
    expect(parseEgressForward('10.1.2.3:22')).toEqual({ worldPort: 22, host: '10.1.2.3', port: 22 })
  })

  it('takes an IPv6 host in brackets, and implies the bracketed allow rule', () => {
    const spec = parseEgressForward('7000:[fd00::7]:6379')
    expect(spec).toEqual({ worldPort: 7000, host: 'fd00::7', port: 6379 })
    expect(impliedAllowRule(spec)).toBe('[fd00::7]:6379')
    expect(impliedAllowRule(parseEgressForward('db.internal:5432'))).toBe('db.internal:5432')
  })

  it('refuses a missing port, a port out of range and an unbracketed IPv6 host, saying the form', () => {
    for (const text of ['db.internal', 'db.internal:0', 'db.internal:70000', '70000:db.internal:5432', 'fd00::7:6379', '']) {
      expect(() => parseEgressForward(text)).toThrow(InvalidEgressForwardError)
    }
    expect(() => parseEgressForward('db.internal')).toThrow('invalid --egress "db.internal": expected [WORLD_PORT:]HOST:PORT; the form is [WORLD_PORT:]HOST:PORT (HOST a name or an IP literal, IPv6 in brackets; WORLD_PORT defaults to PORT)')
  })
})
