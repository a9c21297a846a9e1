/**
 * The client's resolver for a confined world (src/network/resolve.ts): curl-style `--resolve`
 * overrides parse (bracketed or bare IPv6, several addresses) and answer first, matched by
 * name in any case and by port; IP literals are themselves without a lookup; everything else
 * goes to the host's resolver, and a failure is a NameNotResolvedError carrying the name, the
 * port and the resolver's error. The only real lookup is of `localhost`; no other network.
 */
import { describe, expect, it } from 'vitest'
import { EgressResolver, InvalidResolveOverrideError, NameNotResolvedError, parseResolveOverride } from '../../src/network/resolve.ts'

describe('parseResolveOverride', () => {
  it('NAME:PORT:ADDR, the name canonical and the addresses in order', () => {
    expect(parseResolveOverride('Example.COM.:443:127.0.0.1')).toEqual({ text: 'Example.COM.:443:127.0.0.1', name: 'example.com', port: 443, addresses: ['127.0.0.1'] })
    expect(parseResolveOverride('db.test:5432:[FD00::1],10.0.0.2,::ffff:10.0.0.3')).toEqual({ text: 'db.test:5432:[FD00::1],10.0.0.2,::ffff:10.0.0.3', name: 'db.test', port: 5432, addresses: ['fd00::1', '10.0.0.2', '10.0.0.3'] })
    expect(parseResolveOverride('v6.test:80:2001:db8::1')).toEqual({ text: 'v6.test:80:2001:db8::1', name: 'v6.test', port: 80, addresses: ['2001:db8::1'] })
  })

  it.each([
    ['example.com', 'it needs three parts'],
    ['example.com:443', 'it needs three parts'],
    ['+example.com:443:127.0.0.1', '"+example.com" is not a host name'],
    ['-example.com:443:127.0.0.1', '"-example.com" is not a host name'],
    ['*:443:127.0.0.1', '"*" is not a host name'],
    ['example.com:0:127.0.0.1', 'port "0" is not a number from 1 to 65535'],
    ['example.com:https:127.0.0.1', 'port "https" is not a number from 1 to 65535'],
    ['example.com:443:', '"" is not an IP address'],
    ['example.com:443:127.0.0.1,', '"" is not an IP address'],
    ['example.com:443:localhost', '"localhost" is not an IP address'],
  ])('refuses %j: %s', (text, problem) => {
    expect(() => parseResolveOverride(text)).toThrow(new InvalidResolveOverrideError(text, problem))
    expect(new InvalidResolveOverrideError(text, problem).message).toBe(`--resolve ${JSON.stringify(text)}: ${problem}; the form is NAME:PORT:ADDRESS[,ADDRESS]... (IPv6 in brackets or bare: example.com:443:[::1],127.0.0.1)`)
    expect(new InvalidResolveOverrideError(text, problem).code).toBe('INVALID_RESOLVE_OVERRIDE')
  })
})

describe('EgressResolver', () => {
  /** A lookup that answers from a table and records what it was asked. */
  function scripted(table: Record<string, string[] | Error>): { lookup: (name: string) => Promise<string[]>; asked: string[] } {
    const asked: string[] = []
    return {
      asked,
      lookup: async name => {
        asked.push(name)
        const answer = table[name]
        if (answer instanceof Error) throw answer
        return answer ?? []
      },
    }
  }

  it('an override answers for its name (any case) and port only; the first of two wins', async () => {
    const { lookup, asked } = scripted({ 'api.test': ['192.0.2.80'] })
    const resolver = new EgressResolver([parseResolveOverride('api.test:443:127.0.0.1,::1'), parseResolveOverride('api.test:443:10.0.0.1')], lookup)
    expect(await resolver.resolve('API.test.', 443)).toEqual(['127.0.0.1', '::1'])
    expect(asked).toEqual([])
    expect(await resolver.resolve('api.test', 80)).toEqual(['192.0.2.80'])
    expect(asked).toEqual(['api.test'])
  })

  it('an IP literal is itself, canonical, without a lookup', async () => {
    const { lookup, asked } = scripted({})
    const resolver = new EgressResolver([], lookup)
    expect(await resolver.resolve('10.0.0.1', 80)).toEqual(['10.0.0.1'])
    expect(await resolver.resolve('[FD00:0::1]', 80)).toEqual(['fd00::1'])
    expect(await resolver.resolve('::ffff:10.0.0.9', 80)).toEqual(['10.0.0.9'])
    expect(asked).toEqual([])
  })

  it('every address the lookup answers, canonical and without repeats', async () => {
    const { lookup } = scripted({ 'many.test': ['192.0.2.1', '2001:DB8::1', '::ffff:192.0.2.1', '192.0.2.2'] })
    expect(await new EgressResolver([], lookup).resolve('many.test', 443)).toEqual(['192.0.2.1', '2001:db8::1', '192.0.2.2'])
  })

  it('a failed lookup is a NameNotResolvedError with the name, the port and the cause', async () => {
    const cause = Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.test'), { code: 'ENOTFOUND' })
    const { lookup } = scripted({ 'nowhere.test': cause })
    const error = await new EgressResolver([], lookup).resolve('nowhere.test', 443).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(NameNotResolvedError)
    expect(error).toMatchObject({ code: 'NAME_NOT_RESOLVED', host: 'nowhere.test', port: 443, cause })
    expect((error as Error).message).toBe('could not resolve nowhere.test (for port 443) on the client: getaddrinfo ENOTFOUND nowhere.test; check the name, or give its address with --resolve nowhere.test:443:ADDRESS')
  })

  it('no address, or not a name at all, is a NameNotResolvedError too', async () => {
    const { lookup, asked } = scripted({ 'empty.test': [] })
    const resolver = new EgressResolver([], lookup)
    await expect(resolver.resolve('empty.test', 80)).rejects.toThrow('could not resolve empty.test (for port 80) on the client: no address; check the name, or give its address with --resolve empty.test:80:ADDRESS')
    await expect(resolver.resolve('bad name', 80)).rejects.toThrow('could not resolve bad name (for port 80) on the client: not a host name; check the name, or give its address with --resolve bad name:80:ADDRESS')
    expect(asked).toEqual(['empty.test'])
  })

  it("the host's resolver answers localhost with a loopback address", async () => {
    const addresses = await new EgressResolver().resolve('localhost', 80)
    expect(addresses.length).toBeGreaterThan(0)
    expect(addresses.every(address => address === '::1' || address.startsWith('127.'))).toBe(true)
  })
})
