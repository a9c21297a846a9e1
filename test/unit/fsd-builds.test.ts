/**
 * Both builds of the file server (dist/world-tools/linux-{x86_64,aarch64}/dsh-fsd) speak the
 * protocol and keep its guarantees: the x86_64 one run directly, the aarch64 one under
 * `qemu-aarch64-static` (user-mode emulation; .ci/run installs it), each in a scratch directory
 * of this machine, driven by the package's own client (src/files/server-channel.ts).
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { decodeFields } from '../../src/files/protocol.ts'
import { ServerChannel, ServerRefusal } from '../../src/files/server-channel.ts'
import { worldTool } from '../../src/providers/remote/world-tools/manifest.ts'
import { ROOT } from '../helpers/built-package.ts'

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-fsd-builds-')))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

function start(arch: 'x86_64' | 'aarch64'): Promise<ServerChannel> {
  // The builds the world tools' manifest serves (built by `npm run build:world-tools`).
  expect(worldTool('dsh-fsd', arch).hostPath).toBe(join(ROOT, 'dist', 'world-tools', `linux-${arch}`, 'dsh-fsd'))
  const child = arch === 'x86_64'
    ? spawn(join(ROOT, 'dist', 'world-tools', 'linux-x86_64', 'dsh-fsd'), [], { stdio: ['pipe', 'pipe', 'ignore'] })
    : spawn('qemu-aarch64-static', [join(ROOT, 'dist', 'world-tools', 'linux-aarch64', 'dsh-fsd')], { stdio: ['pipe', 'pipe', 'ignore'] })
  return ServerChannel.open({ stdin: child.stdin, stdout: child.stdout, close: () => child.kill('SIGKILL') }, `${arch} build`)
}

const text = (field: Buffer | undefined): string => field?.toString('utf8') ?? ''

describe.each(['x86_64', 'aarch64'] as const)('the %s build', arch => {
  it('says hello with its architecture, resolves, writes, reads, lists and guards edits', async () => {
    const server = await start(arch)
    try {
      expect(server.info.arch).toBe(arch)
      const dir = join(scratch, arch)
      const content = Buffer.from('one\ntwo\n')
      // Create, with missing parents made.
      const created = decodeFields((await server.request('w', [join(dir, 'sub', 'f.txt'), 'n', '', '', '0', '0', String(content.length)], { content })).payload)
      expect(text(created[0])).toBe('create')
      expect(readFileSync(join(dir, 'sub', 'f.txt'), 'utf8')).toBe('one\ntwo\n')
      symlinkSync(join(dir, 'sub'), join(dir, 'link'))
      const resolved = decodeFields((await server.request('r', [dir, 'link/f.txt'])).payload)
      expect([text(resolved[0]), text(resolved[1]), text(resolved[2]), text(resolved[6])]).toEqual([join(dir, 'sub', 'f.txt'), '1', 'f', '8'])
      const version = text(resolved[7])
      // Read: data frames, then the record.
      const chunks: Buffer[] = []
      const read = decodeFields((await server.request('o', [join(dir, 'sub', 'f.txt'), ''], { onData: chunk => chunks.push(Buffer.from(chunk)) })).payload)
      expect(Buffer.concat(chunks).toString()).toBe('one\ntwo\n')
      expect(text(read[5])).toBe(version)
      // List: name, type, size, version, symlink target.
      const pieces: Buffer[] = []
      await server.request('l', [dir], { onData: chunk => pieces.push(Buffer.from(chunk)) })
      const listed = decodeFields(Buffer.concat(pieces)).map(text)
      expect([listed.slice(0, 3), listed[4], listed.slice(5, 8), listed[9]]).toEqual([['link', 'd', listed[2]], join(dir, 'sub'), ['sub', 'd', listed[7]], ''])
      // An edit guard with the wrong content hash is STALE; with the right one it publishes.
      const next = Buffer.from('one\nTWO\n')
      const wrong = await server.request('w', [join(dir, 'sub', 'f.txt'), 'h', version, '0'.repeat(64), '0', '0', String(next.length)], { content: next }).then(() => undefined, (error: unknown) => error)
      expect((wrong as ServerRefusal).code).toBe('STALE')
      const sha = createHash('sha256').update(content).digest('hex')
      const edited = decodeFields((await server.request('w', [join(dir, 'sub', 'f.txt'), 'h', version, sha, '0', '0', String(next.length)], { content: next })).payload)
      expect(text(edited[0])).toBe('update')
      expect(readFileSync(join(dir, 'sub', 'f.txt'), 'utf8')).toBe('one\nTWO\n')
      // createIfAbsent never replaces.
      writeFileSync(join(dir, 'exists.txt'), 'mine')
      const refused = await server.request('w', [join(dir, 'exists.txt'), 'c', '', '', '0', '0', '1'], { content: Buffer.from('x') }).then(() => undefined, (error: unknown) => error)
      expect((refused as ServerRefusal).code).toBe('EXISTS')
      expect(readFileSync(join(dir, 'exists.txt'), 'utf8')).toBe('mine')
    } finally {
      server.close()
    }
  }, 60_000)

  it('bounds a listing by entries and by the bytes of their records (TOOLARGE once past either), and serves on', async () => {
    const server = await start(arch)
    try {
      const dir = join(scratch, `${arch}-list`)
      const content = Buffer.from('x')
      for (const name of ['a', 'b', 'c']) await server.request('w', [join(dir, name), 'n', '', '', '0', '0', '1'], { content })
      const listed = async (bounds: string[]): Promise<string> => {
        const pieces: Buffer[] = []
        return server.request('l', [dir, ...bounds], { onData: chunk => pieces.push(Buffer.from(chunk)) }).then(
          () => decodeFields(Buffer.concat(pieces)).filter((_, index) => index % 5 === 0).map(text).sort().join(' '),
          (error: unknown) => `${(error as ServerRefusal).code}: ${(error as ServerRefusal).message}`,
        )
      }
      expect(await listed([])).toBe('a b c')
      expect(await listed(['3', '100000'])).toBe('a b c')
      expect(await listed(['2', '100000'])).toBe('TOOLARGE: the directory has more than 2 entries (the most a listing returns)')
      expect(await listed(['3', '100'])).toBe('TOOLARGE: the records of its entries take more than 100 bytes (the most a listing holds)')
      expect(await listed(['3', '1000'])).toBe('a b c')
    } finally {
      server.close()
    }
  }, 60_000)
})
