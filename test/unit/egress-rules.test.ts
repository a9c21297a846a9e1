/**
 * The egress policy of a confined world (src/network/rules.ts, names.ts): every rule form the
 * CLI takes parses to one canonical rule and every other text is refused with the accepted
 * forms; in mode 'allow' a deny rule wins over an allow rule whether it matches the name or the
 * address; a port in a rule narrows it; an IPv4-mapped IPv6 address is judged as its IPv4
 * address; and a LivePolicy's change applies to the next decision.
 */
import { describe, expect, it } from 'vitest'
import { parseIpAddress } from '../../src/network/names.ts'
import { type EgressPolicy, InvalidEgressRuleError, LivePolicy, decide, parsePolicy, parseRule } from '../../src/network/rules.ts'

describe('parseRule', () => {
  it('a host name: lower-cased, one trailing dot dropped, the text kept', () => {
    expect(parseRule('Example.COM.')).toEqual({ kind: 'host', text: 'Example.COM.', host: 'example.com' })
    expect(parseRule('registry.npmjs.org:443')).toEqual({ kind: 'host', text: 'registry.npmjs.org:443', host: 'registry.npmjs.org', port: 443 })
    expect(parseRule('localhost')).toEqual({ kind: 'host', text: 'localhost', host: 'localhost' })
  })

  it('a Unicode name is taken as its xn-- form', () => {
    expect(parseRule('bücher.example')).toEqual({ kind: 'host', text: 'bücher.example', host: 'xn--bcher-kva.example' })
  })

  it('a suffix', () => {
    expect(parseRule('*.Example.com')).toEqual({ kind: 'suffix', text: '*.Example.com', suffix: 'example.com' })
    expect(parseRule('*.example.com:8443')).toEqual({ kind: 'suffix', text: '*.example.com:8443', suffix: 'example.com', port: 8443 })
  })

  it('IPv4 addresses and networks', () => {
    expect(parseRule('10.0.0.0/8')).toEqual({ kind: 'cidr', text: '10.0.0.0/8', family: 4, address: '10.0.0.0', prefix: 8 })
    expect(parseRule('192.168.1.10')).toEqual({ kind: 'cidr', text: '192.168.1.10', family: 4, address: '192.168.1.10', prefix: 32 })
    expect(parseRule('192.168.1.10:5432')).toEqual({ kind: 'cidr', text: '192.168.1.10:5432', family: 4, address: '192.168.1.10', prefix: 32, port: 5432 })
    expect(parseRule('10.0.0.0/8:443')).toEqual({ kind: 'cidr', text: '10.0.0.0/8:443', family: 4, address: '10.0.0.0', prefix: 8, port: 443 })
    expect(parseRule('0.0.0.0/0')).toEqual({ kind: 'cidr', text: '0.0.0.0/0', family: 4, address: '0.0.0.0', prefix: 0 })
  })

  it('IPv6 addresses and networks, bare or bracketed, a port only in brackets', () => {
    expect(parseRule('::1')).toEqual({ kind: 'cidr', text: '::1', family: 6, address: '::1', prefix: 128 })
    expect(parseRule('[::1]')).toEqual({ kind: 'cidr', text: '[::1]', family: 6, address: '::1', prefix: 128 })
    expect(parseRule('fd00::/8')).toEqual({ kind: 'cidr', text: 'fd00::/8', family: 6, address: 'fd00::', prefix: 8 })
    expect(parseRule('[FD00:0:0::1]:5432')).toEqual({ kind: 'cidr', text: '[FD00:0:0::1]:5432', family: 6, address: 'fd00::1', prefix: 128, port: 5432 })
    expect(parseRule('[fd00::/8]:443')).toEqual({ kind: 'cidr', text: '[fd00::/8]:443', family: 6, address: 'fd00::', prefix: 8, port: 443 })
  })

  it('a bare IPv6 text is all address: fd00::1:5432 is the address ending :1:5432, not port 5432', () => {
    expect(parseRule('fd00::1:5432')).toEqual({ kind: 'cidr', text: 'fd00::1:5432', family: 6, address: 'fd00::1:5432', prefix: 128 })
  })

  it('an IPv4-mapped IPv6 address or network is kept as the IPv4 one', () => {
    expect(parseRule('::ffff:10.1.2.3')).toEqual({ kind: 'cidr', text: '::ffff:10.1.2.3', family: 4, address: '10.1.2.3', prefix: 32 })
    expect(parseRule('::ffff:10.0.0.0/104')).toEqual({ kind: 'cidr', text: '::ffff:10.0.0.0/104', family: 4, address: '10.0.0.0', prefix: 8 })
  })

  it.each([
    ['', 'empty rule'],
    ['*', 'a wildcard is allowed only as a whole first label (*.example.com)'],
    ['*.', '"" after *. is not a host name'],
    ['a.*.example.com', 'a wildcard is allowed only as a whole first label (*.example.com)'],
    ['*example.com', 'a wildcard is allowed only as a whole first label (*.example.com)'],
    ['example.com:0', 'port "0" is not a number from 1 to 65535'],
    ['example.com:65536', 'port "65536" is not a number from 1 to 65535'],
    ['example.com:', 'port "" is not a number from 1 to 65535'],
    ['example.com:http', 'port "http" is not a number from 1 to 65535'],
    ['http://example.com', 'port "//example.com" is not a number from 1 to 65535'],
    ['exa mple.com', '"exa mple.com" is not a host name or IP address'],
    ['-bad.example', '"-bad.example" is not a host name or IP address'],
    ['1.2.3', '"1.2.3" is not a host name or IP address'],
    ['010.0.0.1', '"010.0.0.1" is not a host name or IP address'],
    ['10.0.0.0/33', 'prefix /33 is not 0 to 32'],
    ['10.0.0.0/', 'prefix / is not 0 to 32'],
    ['10.1.0.0/8', '10.1.0.0/8 has bits set past the prefix; the network is 10.0.0.0/8'],
    ['fd00::1/8', 'fd00::1/8 has bits set past the prefix; the network is fd00::/8'],
    ['fd00::1::2', '"fd00::1::2" is not an IP address'],
    ['fd00::g', '"fd00::g" is not an IP address'],
    ['[fd00::1', 'an opening [ without ]'],
    ['[fd00::1]5432', 'unexpected "5432" after ]'],
    ['[10.0.0.1]:80', 'brackets hold an IPv6 address or network only'],
    ['fe80::1%eth0', '"fe80::1%eth0" is not an IP address'],
    ['::ffff:10.0.0.0/64', 'an IPv4-mapped network needs a prefix of at least /96'],
  ])('refuses %j: %s', (text, problem) => {
    const error = (() => { try { parseRule(text) } catch (caught) { return caught } })()
    expect(error).toBeInstanceOf(InvalidEgressRuleError)
    expect((error as InvalidEgressRuleError).code).toBe('INVALID_EGRESS_RULE')
    expect((error as InvalidEgressRuleError).text).toBe(text)
    expect((error as Error).message).toBe(`egress rule ${JSON.stringify(text)}: ${problem}; accepted forms: HOST, *.SUFFIX, an IPv4 or IPv6 address or CIDR (10.0.0.0/8, ::1, fd00::/8), each with an optional :PORT (IPv6 with a port in brackets: [fd00::1]:5432, [fd00::/8]:443)`)
  })
})

describe('parsePolicy', () => {
  it('--allow implies network allow; nothing given is none', () => {
    expect(parsePolicy({ allow: ['example.com'] })).toEqual({ network: 'allow', allow: [parseRule('example.com')], deny: [] })
    expect(parsePolicy({})).toEqual({ network: 'none', allow: [], deny: [] })
    expect(parsePolicy({ network: 'full', deny: ['10.0.0.0/8'] })).toEqual({ network: 'full', allow: [], deny: [parseRule('10.0.0.0/8')] })
    expect(Object.isFrozen(parsePolicy({ allow: ['example.com'] }))).toBe(true)
  })

  it('allow rules with none or full are refused, never narrowed or widened', () => {
    expect(() => parsePolicy({ network: 'none', allow: ['example.com'] })).toThrow(new InvalidEgressRuleError('example.com', "--allow rules need network 'allow', not 'none' (none refuses every connection); drop --network or the --allow rules"))
    expect(() => parsePolicy({ network: 'full', allow: ['example.com'] })).toThrow(new InvalidEgressRuleError('example.com', "--allow rules need network 'allow', not 'full' (full already allows every connection no --deny rule refuses); drop --network or the --allow rules"))
  })

  it('an unknown mode and a bad rule are refused', () => {
    expect(() => parsePolicy({ network: 'some' })).toThrow('egress rule "some": unknown network mode; use one of none, allow, full')
    expect(() => parsePolicy({ deny: ['bad rule'] })).toThrow(InvalidEgressRuleError)
  })
})

describe('decide', () => {
  const policy = (network: EgressPolicy['network'], allow: string[], deny: string[] = []): EgressPolicy => parsePolicy({ network, allow, deny })

  it("network 'none' denies everything, deny rules or not", () => {
    expect(decide(policy('none', []), { host: 'example.com', address: '93.184.215.14', port: 443 })).toEqual({ verdict: 'deny', reason: "network is 'none': no connection to example.com:443 (93.184.215.14) leaves the world" })
  })

  it("network 'full' allows what no deny rule matches", () => {
    const full = policy('full', [], ['*.internal', '169.254.169.254'])
    expect(decide(full, { host: 'example.com', port: 443 })).toEqual({ verdict: 'allow', reason: "network is 'full' and no --deny rule matches example.com:443" })
    expect(decide(full, { host: 'db.internal', port: 5432 })).toEqual({ verdict: 'deny', rule: '*.internal', reason: 'denied by rule *.internal' })
    expect(decide(full, { address: '169.254.169.254', port: 80 })).toEqual({ verdict: 'deny', rule: '169.254.169.254', reason: 'denied by rule 169.254.169.254' })
  })

  it('an unspecified address (0.0.0.0/8, ::, ::ffff:0.0.0.0) is never dialed, whatever allows it: it reaches this machine\'s own loopback', () => {
    const open = policy('allow', ['0.0.0.0/0', '::/0', 'evil.test'], ['127.0.0.0/8', '::1'])
    expect(decide(open, { address: '0.0.0.0', port: 18083 })).toEqual({ verdict: 'deny', reason: '0.0.0.0 is an unspecified address, which reaches this machine\'s own loopback; it is never dialed' })
    expect(decide(open, { address: '0.1.2.3', port: 80 }).verdict).toBe('deny')
    expect(decide(open, { address: '::', port: 18084 })).toEqual({ verdict: 'deny', reason: ':: is an unspecified address, which reaches this machine\'s own loopback; it is never dialed' })
    expect(decide(open, { address: '::ffff:0.0.0.0', port: 18083 }).verdict).toBe('deny')
    // A name resolved to it (--resolve, or a resolver's answer) is judged by that address.
    expect(decide(open, { host: 'evil.test', address: '0.0.0.0', port: 18083 }).verdict).toBe('deny')
    expect(decide(open, { address: '1.2.3.4', port: 80 }).verdict).toBe('allow')
  })

  it('allow: a host rule matches the exact name in any case, not names below it', () => {
    const p = policy('allow', ['example.com'])
    expect(decide(p, { host: 'EXAMPLE.com.', port: 443 })).toEqual({ verdict: 'allow', rule: 'example.com', reason: 'allowed by rule example.com' })
    expect(decide(p, { host: 'www.example.com', port: 443 })).toEqual({ verdict: 'deny', reason: 'no --allow rule matches www.example.com:443' })
  })

  it('allow: a suffix rule matches names strictly below it', () => {
    const p = policy('allow', ['*.example.com'])
    expect(decide(p, { host: 'a.b.example.com', port: 80 }).verdict).toBe('allow')
    expect(decide(p, { host: 'example.com', port: 80 })).toEqual({ verdict: 'deny', reason: 'no --allow rule matches example.com:80' })
    expect(decide(p, { host: 'badexample.com', port: 80 }).verdict).toBe('deny')
  })

  it('allow: a rule with a port matches only that port', () => {
    const p = policy('allow', ['example.com:443', '[fd00::/8]:5432'])
    expect(decide(p, { host: 'example.com', port: 443 }).verdict).toBe('allow')
    expect(decide(p, { host: 'example.com', port: 80 })).toEqual({ verdict: 'deny', reason: 'no --allow rule matches example.com:80' })
    expect(decide(p, { address: 'fd12::7', port: 5432 }).verdict).toBe('allow')
    expect(decide(p, { address: 'fd12::7', port: 5433 })).toEqual({ verdict: 'deny', reason: 'no --allow rule matches [fd12::7]:5433' })
  })

  it('allow: an address rule matches the address a name resolved to', () => {
    const p = policy('allow', ['10.0.0.0/8'])
    expect(decide(p, { host: 'db.corp', address: '10.20.30.40', port: 5432 })).toEqual({ verdict: 'allow', rule: '10.0.0.0/8', reason: 'allowed by rule 10.0.0.0/8' })
    expect(decide(p, { host: 'db.corp', address: '11.0.0.1', port: 5432 })).toEqual({ verdict: 'deny', reason: 'no --allow rule matches db.corp:5432 (11.0.0.1)' })
    expect(decide(p, { host: 'db.corp', port: 5432 })).toEqual({ verdict: 'deny', reason: 'no --allow rule matches db.corp:5432' })
  })

  it('allow: deny wins, by name or by address, whichever list comes first', () => {
    const p = policy('allow', ['*.example.com', '10.0.0.0/8'], ['secret.example.com', '10.9.0.0/16'])
    expect(decide(p, { host: 'secret.example.com', address: '93.184.215.14', port: 443 })).toEqual({ verdict: 'deny', rule: 'secret.example.com', reason: 'denied by rule secret.example.com' })
    expect(decide(p, { host: 'www.example.com', address: '10.9.1.1', port: 443 })).toEqual({ verdict: 'deny', rule: '10.9.0.0/16', reason: 'denied by rule 10.9.0.0/16' })
    expect(decide(p, { host: 'www.example.com', address: '93.184.215.14', port: 443 })).toEqual({ verdict: 'allow', rule: '*.example.com', reason: 'allowed by rule *.example.com' })
    expect(decide(p, { address: '10.8.0.1', port: 22 })).toEqual({ verdict: 'allow', rule: '10.0.0.0/8', reason: 'allowed by rule 10.0.0.0/8' })
  })

  it('an IPv4-mapped IPv6 address is judged as its IPv4 address', () => {
    const p = policy('allow', ['10.0.0.0/8'], ['10.9.9.9'])
    expect(decide(p, { address: '::ffff:10.1.1.1', port: 80 })).toEqual({ verdict: 'allow', rule: '10.0.0.0/8', reason: 'allowed by rule 10.0.0.0/8' })
    expect(decide(p, { address: '[::ffff:a09:909]', port: 80 })).toEqual({ verdict: 'deny', rule: '10.9.9.9', reason: 'denied by rule 10.9.9.9' })
    expect(decide(policy('allow', ['::ffff:10.0.0.0/104']), { address: '10.3.3.3', port: 80 }).verdict).toBe('allow')
  })

  it('an IP literal given as host is judged as the address; host rules do not match it', () => {
    const p = policy('allow', ['127.0.0.1', 'localhost'])
    expect(decide(p, { host: '127.0.0.1', port: 8080 })).toEqual({ verdict: 'allow', rule: '127.0.0.1', reason: 'allowed by rule 127.0.0.1' })
    expect(decide(p, { host: '[::1]', port: 8080 })).toEqual({ verdict: 'deny', reason: 'no --allow rule matches [::1]:8080' })
  })

  it('IPv4 rules never match IPv6 addresses and the other way round', () => {
    expect(decide(policy('allow', ['0.0.0.0/0']), { address: '2001:db8::1', port: 443 }).verdict).toBe('deny')
    expect(decide(policy('allow', ['::/0']), { address: '192.0.2.1', port: 443 }).verdict).toBe('deny')
    expect(decide(policy('allow', ['::/0']), { address: '2001:db8::1', port: 443 }).verdict).toBe('allow')
  })

  it('a target that is neither a name nor an address matches nothing', () => {
    expect(decide(policy('allow', ['*.example.com']), { host: 'a b.example.com', port: 443 })).toEqual({ verdict: 'deny', reason: 'no --allow rule matches a b.example.com:443' })
  })
})

describe('LivePolicy', () => {
  it('a change applies to the next decision and is announced with the previous policy', () => {
    const first = parsePolicy({ allow: ['example.com'] })
    const second = parsePolicy({ network: 'none' })
    const live = new LivePolicy(first)
    const changes: [EgressPolicy, EgressPolicy][] = []
    live.on('change', (policy, previous) => changes.push([policy, previous]))
    expect(live.decide({ host: 'example.com', port: 443 }).verdict).toBe('allow')
    live.set(second)
    expect(live.get()).toBe(second)
    expect(live.decide({ host: 'example.com', port: 443 }).verdict).toBe('deny')
    expect(changes).toEqual([[second, first]])
  })
})

describe('IP addresses (names.ts)', () => {
  it.each([
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:0db8:0000:0001:0001:0001:0001:0001', '2001:db8:0:1:1:1:1:1'],
    ['::', '::'],
    ['1::', '1::'],
    ['64:ff9b::192.0.2.33', '64:ff9b::c000:221'],
    ['::ffff:192.0.2.33', '192.0.2.33'],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
  ])('%s is written %s', (text, canonical) => {
    expect(parseIpAddress(text)?.address).toBe(canonical)
  })
})
