/**
 * The vitest file of docs/testcontainers.md ("CI with testcontainers") is
 * test/testcontainers/ci-sandbox.test.ts, word for word, but for the import a user writes (the
 * package name).
 */
import { readFileSync } from 'node:fs'
import { expect, it } from 'vitest'

it('the testcontainers example of docs/testcontainers.md is the ci-sandbox test as it runs here', () => {
  const readme = readFileSync(new URL('../../docs/testcontainers.md', import.meta.url), 'utf8')
  const section = readme.slice(readme.indexOf('## The containers'))
  const example = /```ts\n([\s\S]*?)```/.exec(section)?.[1]
  const test = readFileSync(new URL('./ci-sandbox.test.ts', import.meta.url), 'utf8').split('\n').slice(2).join('\n')
  expect(example).toBe(test.replace("from '../../src/testcontainers/index.ts'", "from 'dsh-remote-worlds/testcontainers'"))
})
