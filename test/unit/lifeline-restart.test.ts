/**
 * Which engines restart an AutoRemove container safely (src/testcontainers/lifeline-restart.ts):
 * API 1.42 (Docker 23.0) and later; 1.41 (Docker 20.10) and earlier may remove it.
 */
import { describe, expect, it } from 'vitest'
import { restartKeepsAutoRemove } from '../../src/testcontainers/lifeline-restart.ts'

describe('restartKeepsAutoRemove', () => {
  it('is true from API 1.42 on, comparing the minor version as a number, not as text', () => {
    const versions = ['1.24', '1.41', '1.42', '1.43', '1.50', '1.9', '2.0']
    expect(Object.fromEntries(versions.map(version => [version, restartKeepsAutoRemove(version)]))).toEqual({ '1.24': false, '1.41': false, '1.42': true, '1.43': true, '1.50': true, '1.9': false, '2.0': true })
  })
})
