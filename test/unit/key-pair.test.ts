/**
 * readableKeyPair (src/testcontainers/key-pair.ts): every pair it returns is one ssh2 reads back,
 * where ssh2's own generator alone yields an unreadable private key about once in 250 pairs.
 */
import ssh2 from 'ssh2'
import { describe, expect, it } from 'vitest'
import { readableKeyPair } from '../../src/testcontainers/key-pair.ts'

describe('readableKeyPair', () => {
  it('returns 1000 distinct ed25519 pairs whose private keys ssh2 parses, each matching its public key', () => {
    const publics = new Set<string>()
    for (let index = 0; index < 1000; index += 1) {
      const pair = readableKeyPair()
      const parsed = ssh2.utils.parseKey(pair.private)
      expect(parsed).not.toBeInstanceOf(Error)
      const key = (Array.isArray(parsed) ? parsed[0] : parsed) as ssh2.ParsedKey
      expect(key.type).toBe('ssh-ed25519')
      expect(`ssh-ed25519 ${key.getPublicSSH().toString('base64')}`).toBe(pair.public.split(' ').slice(0, 2).join(' '))
      publics.add(pair.public)
    }
    expect(publics.size).toBe(1000)
  })
})
