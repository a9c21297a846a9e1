/**
 * The filesystem half (`ctx.fs`, src/files) against the `@deepseek-ai/dsh-fs` contract,
 * world-neutral: every primitive with its exact semantics and FsError codes, in a real world
 * (a Docker container, an SSH host). The world's files are set up and checked through a
 * SEPARATE `docker exec` as root (test/docker/helpers.ts `execIn`), never through the file
 * server under test.
 */
import { createHash } from 'node:crypto'
import { FsError, type FileSystem, type FsTarget } from '@deepseek-ai/dsh-fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RemoteWorld } from '../../src/backend/world.ts'
import { FileServers } from '../../src/files/file-servers.ts'
import type { RemoteEditOutcome, RemoteWriteOutcome } from '../../src/files/remote-file-system.ts'
import { decodeFields } from '../../src/files/protocol.ts'
import { ServerRefusal } from '../../src/files/server-channel.ts'
import { worldOwnerOf } from '../../src/providers/remote/world-owner.ts'
import { execIn, hangGuard } from '../docker/helpers.ts'
import { startRace } from './fs-race.ts'

/**
 * What the suite's worlds are given besides the image (both the Docker container and the sshd
 * one): CAP_SYSLOG, so root can open /proc/kmsg (a regular file whose read waits for the
 * kernel's next message), and a 256 KiB tmpfs at /small, a filesystem a test can fill.
 */
export const FS_WORLD_HOST_CONFIG = { CapAdd: ['SYSLOG'], Tmpfs: { '/small': 'rw,size=256k,mode=1777' } }

/** What a world supplies to the suite. */
export interface FsWorld {
  /** `docker` or `ssh`, for test names. */
  name: string
  /** The container the files live in. */
  containerId(): string
  /** A composed world (openWorld, danger-full-access) whose runtime runs as `user`. */
  open(user: 'root' | 'agent'): Promise<RemoteWorld>
}

/** Run a script in the world as root, outside the file server; fails the test on a non-zero exit. */
export async function inWorld(containerId: string, script: string, user = 'root'): Promise<string> {
  const result = await execIn(containerId, ['sh', '-c', script], user)
  expect(result.exitCode, `${script}\n${result.stderr}`).toBe(0)
  return result.stdout
}

/** The FsError code a promise rejects with. */
export async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
  } catch (error) {
    expect(error).toBeInstanceOf(FsError)
    return (error as FsError).code
  }
  throw new Error('expected the call to fail with an FsError')
}

let nextDir = 0

/** Python (argv[1] a file): make it 'old', mode 0600, with an ACL giving uid 1002 rw- and a user.note. */
const ACL_SETUP = "import os, struct, sys; p = sys.argv[1]; open(p, 'w').write('old'); os.chmod(p, 0o600); " +
  "os.setxattr(p, 'system.posix_acl_access', struct.pack('<I', 2) + b''.join(struct.pack('<HHI', *e) for e in [(1, 6, 0xffffffff), (2, 6, 1002), (4, 0, 0xffffffff), (16, 6, 0xffffffff), (32, 0, 0xffffffff)])); " +
  "os.setxattr(p, 'user.note', b'hello')"
/** Python (argv[1] a directory): a default ACL user::rwx user:1002:rw- group::r-x mask::rwx other::r-x. */
const DEFAULT_ACL_SETUP = "import os, struct, sys; " +
  "os.setxattr(sys.argv[1], 'system.posix_acl_default', struct.pack('<I', 2) + b''.join(struct.pack('<HHI', *e) for e in [(1, 7, 0xffffffff), (2, 6, 1002), (4, 5, 0xffffffff), (16, 7, 0xffffffff), (32, 5, 0xffffffff)]))"
/** Python (argv[1] a file): its permission bits (octal) and every extended attribute as NAME=HEX, sorted. */
const XATTR_DUMP = "import os, sys; p = sys.argv[1]; " +
  "print(' '.join(['%o' % (os.stat(p).st_mode & 0o7777)] + ['%s=%s' % (n, os.getxattr(p, n).hex()) for n in sorted(os.listxattr(p))]))"

/** Register the suite. */
export function fsCases(world: FsWorld): void {
  describe(`ctx.fs in the ${world.name} world`, () => {
    let agent: RemoteWorld
    let root: RemoteWorld
    let fs: FileSystem
    /** A fresh directory owned by agent (0755), its absolute path. */
    let dir: string
    /** A script in the world as `agent` (the files it makes are agent's), outside the file server. */
    const sh = (script: string, user = 'agent'): Promise<string> => inWorld(world.containerId(), script, user)
    const fresh = async (): Promise<string> => {
      nextDir += 1
      const path = `/srv/fs-${world.name}-${process.pid}-${nextDir}`
      await sh(`mkdir -p ${path} && chown agent:agent ${path}`, 'root')
      return path
    }
    const at = (path: string, cwd = dir): Promise<FsTarget> => fs.resolve(path, { cwd })

    beforeAll(async () => {
      ;[agent, root] = await Promise.all([world.open('agent'), world.open('root')])
      fs = agent.fs!
      dir = await fresh()
    })

    afterAll(async () => {
      await Promise.all([agent?.dispose(), root?.dispose()])
    })

    it('after its world is disposed, every call is FS_IO_ERROR saying so', async () => {
      const closing = await world.open('agent')
      const closed = closing.fs!
      const target = await closed.resolve('/tmp')
      await closing.dispose()
      for (const call of [closed.resolve('x'), closed.lstat('x'), closed.stat(target), closed.readText(target), closed.listDir(target), closed.writeText(target, 'x')]) {
        await expect(call).rejects.toThrow(/the filesystem half of .* was closed/)
        expect(await codeOf(call)).toBe('FS_IO_ERROR')
      }
    })

    describe('resolve, processPath, fileUrl, contains', () => {
      it('gives one targetKey for one file reached by a relative path, an absolute path, a symlink and ..', async () => {
        await sh(`mkdir -p ${dir}/real/sub && echo x > ${dir}/real/sub/f.txt && ln -s real ${dir}/alias && ln -s ${dir}/real/sub/f.txt ${dir}/flink && chown -R agent:agent ${dir}`, 'root')
        const keys = await Promise.all([
          at('real/sub/f.txt'),
          at(`${dir}/real/sub/f.txt`, '/'),
          at('alias/sub/f.txt'),
          at('flink'),
          at('real/sub/../sub/f.txt'),
          at('f.txt', `${dir}/real/sub`),
        ])
        expect(new Set(keys.map(target => target.targetKey))).toEqual(new Set([`${dir}/real/sub/f.txt`]))
        expect(keys[2]!.displayPath).toBe(`${dir}/alias/sub/f.txt`)
        expect(fs.processPath(keys[0]!)).toBe(`${dir}/real/sub/f.txt`)
      })

      it('follows a symlink before the .. after it, as the world\'s kernel does (not lexically)', async () => {
        await sh(`mkdir -p ${dir}/deep/inner ${dir}/other && echo y > ${dir}/deep/target.txt && ln -s ${dir}/deep/inner ${dir}/other/jump && chown -R agent:agent ${dir}`, 'root')
        const target = await at('other/jump/../target.txt')
        expect(target.targetKey).toBe(`${dir}/deep/target.txt`)
        expect(await fs.readText(target)).toBe('y\n')
      })

      it('keys a missing file by its deepest existing ancestor\'s realpath plus the rest, stable across creation', async () => {
        await sh(`ln -sfn real ${dir}/alias2`)
        const before = await at('alias2/new/deeper/n.txt')
        expect(before.targetKey).toBe(`${dir}/real/new/deeper/n.txt`)
        await fs.writeText(before, 'n')
        expect((await at('alias2/new/deeper/n.txt')).targetKey).toBe(before.targetKey)
      })

      it('refuses an empty path, a parent that is a file and a symlink loop with FS_NOT_FOUND', async () => {
        await sh(`echo f > ${dir}/plain && ln -sfn loop-b ${dir}/loop-a && ln -sfn loop-a ${dir}/loop-b`)
        expect(await codeOf(at('   '))).toBe('FS_NOT_FOUND')
        await expect(at('plain/child.txt')).rejects.toThrow(`cannot resolve "${dir}/plain/child.txt": a parent path segment is not a directory`)
        await expect(at('loop-a')).rejects.toThrow(`cannot resolve "${dir}/loop-a": too many levels of symbolic links (a symlink loop)`)
      })

      it('missing/../file keys the existing file, and its first stat (answered from resolve) says it is there, as every later one', async () => {
        await sh(`echo here > ${dir}/existing.txt`)
        const target = await at('no-such-dir/../existing.txt')
        expect(target.targetKey).toBe(`${dir}/existing.txt`)
        expect((await fs.stat(target))?.size).toBe(5)
        expect((await fs.stat(target))?.size).toBe(5)
      })

      it('spells the world path as a percent-encoded file: URI and tests containment by canonical paths', async () => {
        const odd = await at('a b/#ü?.txt')
        expect(fs.fileUrl(odd)).toBe(`file://${dir}/a%20b/%23%C3%BC%3F.txt`)
        const parent = await at('real')
        expect(fs.contains(parent, await at('alias/sub/f.txt'))).toBe(true)
        expect(fs.contains(parent, parent)).toBe(true)
        expect(fs.contains(parent, await at('realm'))).toBe(false)
        expect(fs.contains(await at('alias/sub/f.txt'), parent)).toBe(false)
      })
    })

    describe('stat and lstat', () => {
      it('stat follows symlinks and reports type, size and a version; lstat reports the link itself', async () => {
        await sh(`printf 12345 > ${dir}/five && ln -sfn five ${dir}/five-link && mkdir -p ${dir}/adir && chown -R agent:agent ${dir}`, 'root')
        const info = await fs.stat(await at('five-link'))
        expect(info).toMatchObject({ type: 'file', size: 5 })
        expect(info!.version.length).toBeGreaterThan(0)
        expect((await fs.stat(await at('adir')))?.type).toBe('directory')
        expect(await fs.stat(await at('absent'))).toBeUndefined()
        expect((await fs.lstat('five-link', { cwd: dir }))?.type).toBe('symlink')
        expect((await fs.lstat('five', { cwd: dir }))).toMatchObject({ type: 'file', size: 5 })
        expect(await fs.lstat('absent', { cwd: dir })).toBeUndefined()
      })

      it('a version changes when the shell rewrites the file, and stays while nothing changes', async () => {
        const target = await at('versioned')
        await sh(`echo one > ${dir}/versioned`)
        const first = (await fs.stat(target))!.version
        expect((await fs.stat(target))!.version).toBe(first)
        await sh(`echo two > ${dir}/versioned`)
        expect((await fs.stat(target))!.version).not.toBe(first)
      })
    })

    describe('readText and streamText', () => {
      it('reads UTF-8 exactly, CRLF and all', async () => {
        await sh(`printf 'line 1\\r\\nzwei \\303\\274\\r\\n' > ${dir}/crlf.txt`)
        expect(await fs.readText(await at('crlf.txt'))).toBe('line 1\r\nzwei ü\r\n')
      })

      it('refuses binary (NUL) and invalid UTF-8 with FS_NOT_TEXT, a directory with FS_NOT_REGULAR_FILE, a missing file with FS_NOT_FOUND', async () => {
        await sh(`printf 'a\\000b' > ${dir}/bin && printf 'ok \\377\\376' > ${dir}/latin && mkdir -p ${dir}/folder`)
        await expect(fs.readText(await at('bin'))).rejects.toThrow(`cannot read "${dir}/bin": binary file`)
        await expect(fs.readText(await at('latin'))).rejects.toThrow(`cannot read "${dir}/latin": invalid UTF-8 text`)
        expect(await codeOf(fs.readText(await at('folder')))).toBe('FS_NOT_REGULAR_FILE')
        expect(await codeOf(fs.readText(await at('nothing-here')))).toBe('FS_NOT_FOUND')
      })

      it('a file deleted between resolve and read is FS_NOT_FOUND', async () => {
        await sh(`echo gone > ${dir}/soon-gone`)
        const target = await at('soon-gone')
        await sh(`rm ${dir}/soon-gone`)
        await expect(fs.readText(target)).rejects.toThrow(`cannot read "${dir}/soon-gone": not found`)
      })

      it('a FIFO is FS_NOT_REGULAR_FILE at once (the server never blocks opening it)', async () => {
        await sh(`mkfifo ${dir}/pipe`)
        expect(await hangGuard(codeOf(fs.readText(await at('pipe'))), 10_000, 'readText of a FIFO')).toBe('FS_NOT_REGULAR_FILE')
      })

      it('a whole-text read of a file larger than 256 MiB (a 100 GB sparse file) is FS_TOO_LARGE at once, and the server goes on serving', async () => {
        await sh(`truncate -s 100G ${dir}/sparse && echo fine > ${dir}/after-sparse`)
        await expect(fs.readText(await at('sparse'))).rejects.toThrow(`cannot read "${dir}/sparse": 107374182400 bytes exceeds the 268435456-byte limit`)
        expect(await codeOf(fs.editText(await at('sparse'), { oldString: 'a', newString: 'b', replaceAll: false }))).toBe('FS_TOO_LARGE')
        expect(await fs.readText(await at('after-sparse'))).toBe('fine\n')
      })

      it('resolve of a kernel file whose read waits for data (/proc/kmsg, as root) answers at once without reading it, again and again, and the server goes on serving', async () => {
        // resolve prefetches small regular files, but none of the kernel's own filesystems: a
        // read of /proc/kmsg would consume the kernel's messages and then wait for the next one.
        for (let i = 0; i < 3; i += 1) {
          const target = await hangGuard(root.fs!.resolve('/proc/kmsg'), 10_000, 'resolve of /proc/kmsg')
          expect(target.targetKey).toBe('/proc/kmsg')
          expect(await hangGuard(root.fs!.stat(target), 10_000, 'stat of /proc/kmsg')).toMatchObject({ type: 'file', size: 0 })
        }
        expect(await root.fs!.readText(await root.fs!.resolve('/etc/hostname'))).toMatch(/^\S+\n$/)
      })

      it('a device is FS_NOT_REGULAR_FILE without being opened (a read of /dev/tty with no terminal)', async () => {
        for (const device of ['/dev/tty', '/dev/zero']) expect(await codeOf(fs.readText(await fs.resolve(device)))).toBe('FS_NOT_REGULAR_FILE')
      })

      it('streams a large file in chunks whose concatenation is the file, multibyte characters cut between chunks included', async () => {
        // 256 KiB chunks: a 3-byte character straddles every chunk boundary (offset 262143).
        await sh(`python3 -c "import sys; sys.stdout.buffer.write((('a' * 262143 + '\\u20ac') * 6).encode())" > ${dir}/euros.txt`)
        const target = await at('euros.txt')
        const chunks: string[] = []
        for await (const chunk of await fs.streamText(target)) chunks.push(chunk)
        expect(chunks.length).toBeGreaterThan(1)
        expect(chunks.join('')).toBe(('a'.repeat(262143) + '\u20ac').repeat(6))
        expect(await fs.readText(target)).toBe(chunks.join(''))
      })

      it('streamText refuses binary in its sample and invalid UTF-8 anywhere, while iterating', async () => {
        await sh(`python3 -c "import sys; sys.stdout.buffer.write(b'x' * 300000 + b'\\xff')" > ${dir}/late-bad.txt`)
        const consume = async (): Promise<void> => {
          for await (const _chunk of await fs.streamText(await at('late-bad.txt'))) { /* read on */ }
        }
        expect(await codeOf(consume())).toBe('FS_NOT_TEXT')
        await sh(`printf 'a\\000b' > ${dir}/bin-stream`)
        const binary = async (): Promise<void> => {
          for await (const _chunk of await fs.streamText(await at('bin-stream'))) { /* read on */ }
        }
        expect(await codeOf(binary())).toBe('FS_NOT_TEXT')
      })
    })

    describe('readBytes', () => {
      it('returns the raw bytes up to and including maxBytes, and FS_TOO_LARGE past it', async () => {
        await sh(`printf 'a\\000\\377z' > ${dir}/raw`)
        const target = await at('raw')
        expect([...await fs.readBytes(target, undefined, 4)]).toEqual([0x61, 0x00, 0xff, 0x7a])
        await expect(fs.readBytes(target, undefined, 3)).rejects.toThrow(`cannot read "${dir}/raw": 4 bytes exceeds the 3-byte limit`)
      })

      it('refuses a file found larger while reading than its stat said (it grew), never buffering past the bound', async () => {
        // /proc/self/status is a regular file whose stat size is 0 and whose content is longer:
        // the bound is found only by reading, as for a file that grows after stat.
        const target = await fs.resolve('/proc/self/status')
        expect((await fs.stat(target))?.size).toBe(0)
        await expect(fs.readBytes(target, undefined, 16)).rejects.toThrow('content exceeds the 16-byte limit')
      })

      it('a file that never ends and refuses reads of other sizes than multiples of 8 (/proc/self/pagemap) is FS_TOO_LARGE past the bound, for readBytes and readText alike', async () => {
        const target = await fs.resolve('/proc/self/pagemap')
        for (const bound of [1001, 4096]) await expect(fs.readBytes(target, undefined, bound)).rejects.toThrow(`cannot read "/proc/self/pagemap": content exceeds the ${bound}-byte limit`)
        // As docs/files.md says of readText: once 256 MiB arrived.
        await expect(fs.readText(target)).rejects.toThrow('cannot read "/proc/self/pagemap": content exceeds the 268435456-byte limit')
        expect((await fs.stat(target))?.size).toBe(0)
      })

      it('reads 50 MB exactly', async () => {
        await sh(`head -c 52428800 /dev/urandom > ${dir}/big.bin && sha256sum ${dir}/big.bin > ${dir}/big.sum`)
        const expected = (await sh(`cat ${dir}/big.sum`)).split(' ')[0]
        const bytes = await fs.readBytes(await at('big.bin'), undefined, 52428800)
        expect(bytes.length).toBe(52428800)
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(expected)
      })
    })

    describe('listDir', () => {
      it('lists children in name order with types, sizes, versions and resolved targets; broken links are other', async () => {
        const listed = await fresh()
        await sh(`cd ${listed} && printf 123 > b.txt && mkdir c && printf 1 > A.txt && ln -s b.txt link && ln -s missing broken && ln -s c dirlink`)
        const entries = await fs.listDir(await fs.resolve(listed))
        expect(entries.map(entry => [entry.name, entry.type, entry.size, entry.target.targetKey, entry.version === undefined])).toEqual([
          ['A.txt', 'file', 1, `${listed}/A.txt`, false],
          ['b.txt', 'file', 3, `${listed}/b.txt`, false],
          ['broken', 'other', undefined, `${listed}/broken`, true],
          ['c', 'directory', undefined, `${listed}/c`, false],
          ['dirlink', 'directory', undefined, `${listed}/c`, false],
          ['link', 'file', 3, `${listed}/b.txt`, false],
        ])
        expect(entries[1]!.target.displayPath).toBe(`${listed}/b.txt`)
      })

      it('refuses a missing path (FS_NOT_FOUND) and a file (FS_NOT_DIRECTORY)', async () => {
        await sh(`echo f > ${dir}/not-a-dir`)
        expect(await codeOf(fs.listDir(await at('no-such-dir')))).toBe('FS_NOT_FOUND')
        await expect(fs.listDir(await at('not-a-dir'))).rejects.toThrow(`cannot list "${dir}/not-a-dir": not a directory`)
      })

      it('lists 100 000 entries, and refuses a directory of more with FS_TOO_LARGE saying so', async () => {
        // On the world's tmpfs, where 100 000 files are made quickly.
        const many = `/dev/shm/fs-list-${world.name}-${process.pid}`
        try {
          await sh(`rm -rf ${many} && mkdir ${many} && cd ${many} && seq -w 1 100000 | sed 's/^/f/' | xargs touch`)
          const entries = await fs.listDir(await fs.resolve(many))
          expect(entries.length).toBe(100000)
          expect([entries[0]!.name, entries[99999]!.name, entries[99999]!.target.targetKey]).toEqual(['f000001', 'f100000', `${many}/f100000`])
          await sh(`touch ${many}/g`)
          const refused = await fs.listDir(await fs.resolve(many)).then(() => undefined, (error: unknown) => error as FsError)
          expect([refused?.code, refused?.message]).toEqual(['FS_TOO_LARGE', `cannot list "${many}": the directory has more than 100000 entries (the most a listing returns)`])
        } finally {
          await sh(`rm -rf ${many}`)
        }
      })

      it('lists 5000 entries', async () => {
        const many = await fresh()
        await sh(`cd ${many} && seq -w 1 5000 | sed 's/^/f/' | xargs touch`)
        const entries = await fs.listDir(await fs.resolve(many))
        expect(entries.length).toBe(5000)
        expect(entries[0]!.name).toBe('f0001')
        expect(entries[4999]!.name).toBe('f5000')
      })
    })

    describe('writeText', () => {
      it('creates missing parents and a new file with 0666 less the umask, as the world\'s user', async () => {
        const target = await at('made/by/write.txt')
        const outcome = await fs.writeText(target, 'hello\r\nworld')
        expect(outcome).toMatchObject({ operation: 'create', before: null, after: 'hello\nworld' })
        expect(await sh(`stat -c '%a %U' ${dir}/made/by/write.txt; od -An -c ${dir}/made/by/write.txt | tr -s ' '`)).toBe('644 agent\n h e l l o \\r \\n w o r l d\n')
        expect((await fs.stat(target))!.version).toBe(outcome.version)
      })

      it('replaces a file keeping its mode and owner, and returns the replaced text as the diff basis', async () => {
        await sh(`printf 'old\\r\\n' > ${dir}/kept && chmod 751 ${dir}/kept && chown agent:agent ${dir}/kept`, 'root')
        // As root: the file stays agent's.
        const outcome = await root.fs!.writeText(await root.fs!.resolve(`${dir}/kept`), 'new\n')
        expect(outcome).toMatchObject({ operation: 'update', before: 'old\n', after: 'new\n' })
        expect(await sh(`stat -c '%a %U:%G' ${dir}/kept; cat ${dir}/kept`)).toBe('751 agent:agent\nnew\n')
      })

      it('returns a replaced file of 3 MiB whole as the diff basis (it comes in frames of at most 1 MiB)', async () => {
        await sh(`python3 -c "import sys; sys.stdout.write(''.join('l%010d\\n' % i for i in range(262144)))" > ${dir}/three-mib.txt`)
        const outcome = await fs.writeText(await at('three-mib.txt'), 'short\n')
        expect(outcome.before?.length).toBe(3 * 1024 * 1024)
        expect(outcome.before?.slice(0, 24)).toBe('l0000000000\nl0000000001\n')
        expect(outcome.before?.slice(-12)).toBe('l0000262143\n')
      })

      it('keeps the POSIX ACL and the extended attributes of the file it replaces: a 0600 file with user:1002:rw- stays closed to its group and open to uid 1002', async () => {
        // acl(5) as the kernel stores it (system.posix_acl_access): version 2, then (tag, perm, id)
        // entries: user::rw- user:1002:rw- group::--- mask::rw- other::---.
        const file = `${dir}/acl.txt`
        await sh(`python3 -c "${ACL_SETUP}" ${file}`)
        const before = await sh(`python3 -c "${XATTR_DUMP}" ${file}`)
        // The group bits show the mask (rw-), as acl(5) says.
        expect(before).toBe(`660 system.posix_acl_access=${['02000000', '01000600ffffffff', '02000600ea030000', '04000000ffffffff', '10000600ffffffff', '20000000ffffffff'].join('')} user.note=68656c6c6f\n`)
        await fs.writeText(await at('acl.txt'), 'new\n')
        expect(await sh(`python3 -c "${XATTR_DUMP}" ${file}`)).toBe(before)
        expect(await sh(`cat ${file}`, '1002')).toBe('new\n')
        // A member of the file's group only (uid 1003, group agent): the ACL's group::--- holds.
        expect((await execIn(world.containerId(), ['cat', file], '1003:1000')).stderr).toBe(`cat: ${file}: Permission denied\n`)
      })

      it('a new file under a directory\'s default ACL gets what any new file there gets (the umask is not applied)', async () => {
        await sh(`mkdir ${dir}/acl-dir && python3 -c "${DEFAULT_ACL_SETUP}" ${dir}/acl-dir && python3 -c "import os, sys; os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o666))" ${dir}/acl-dir/by-open`)
        await fs.writeText(await at('acl-dir/by-write'), 'w')
        const [byOpen, byWrite] = await Promise.all(['by-open', 'by-write'].map(name => sh(`python3 -c "${XATTR_DUMP}" ${dir}/acl-dir/${name}`)))
        expect(byWrite).toBe(byOpen)
        expect(byOpen).toMatch(/^664 system\.posix_acl_access=/)
      })

      it('refuses to replace a file whose extended attribute it cannot keep (security.capability, without CAP_SETFCAP), naming it; root keeps it', async () => {
        const file = `${dir}/cap.bin`
        await sh(`printf 'old\\n' > ${file}`)
        // vfs_cap_data revision 2: magic, then permitted/inheritable words (CAP_NET_BIND_SERVICE).
        await sh(`python3 -c "import os, struct, sys; os.setxattr(sys.argv[1], 'security.capability', struct.pack('<5I', 0x02000000, 1 << 10, 0, 0, 0))" ${file}`, 'root')
        const before = await sh(`python3 -c "${XATTR_DUMP}" ${file}`)
        const refused = await fs.writeText(await at('cap.bin'), 'new\n').then(() => undefined, (error: unknown) => error as FsError)
        expect([refused?.code, refused?.message]).toEqual(['FS_PERMISSION_DENIED', `cannot write "${file}": permission denied (cannot replace the file and keep its extended attribute security.capability (Operation not permitted): ${file})`])
        expect(await sh(`cat ${file}; python3 -c "${XATTR_DUMP}" ${file}`)).toBe(`old\n${before}`)
        await root.fs!.writeText(await root.fs!.resolve(file), 'by root\n')
        expect(await sh(`cat ${file}; python3 -c "${XATTR_DUMP}" ${file}`)).toBe(`by root\n${before}`)
      })

      it('replaces a file with hard links under its name alone: the other links keep the old content, and the outcome counts them (detachedLinks)', async () => {
        await sh(`printf 'old\\n' > ${dir}/linked && ln ${dir}/linked ${dir}/linked-2 && ln ${dir}/linked ${dir}/linked-3`)
        const written: RemoteWriteOutcome = await fs.writeText(await at('linked'), 'new\n')
        expect(written).toMatchObject({ operation: 'update', before: 'old\n', after: 'new\n', detachedLinks: 2 })
        expect(await sh(`cat ${dir}/linked ${dir}/linked-2; stat -c %h ${dir}/linked ${dir}/linked-2`)).toBe('new\nold\n1\n2\n')
        const edited: RemoteEditOutcome = await fs.editText(await at('linked-2'), { oldString: 'old', newString: 'OLD', replaceAll: false })
        expect(edited).toMatchObject({ before: 'old\n', after: 'OLD\n', detachedLinks: 1 })
        expect(await sh(`cat ${dir}/linked-2 ${dir}/linked-3`)).toBe('OLD\nold\n')
        // A file with one link, and a new one, say nothing.
        expect(Object.keys(await fs.writeText(await at('linked'), 'again\n')).sort()).toEqual(['after', 'before', 'operation', 'version'])
        expect(Object.keys(await fs.writeText(await at('unlinked-new'), 'n')).sort()).toEqual(['after', 'before', 'operation', 'version'])
      })

      it('refuses to replace a file it cannot keep the owner of (FS_PERMISSION_DENIED), leaving it as it was', async () => {
        await sh(`echo rootish > ${dir}/rootfile && chown root:root ${dir}/rootfile && chmod 666 ${dir}/rootfile`, 'root')
        await expect(fs.writeText(await at('rootfile'), 'agent was here')).rejects.toThrow(/cannot write ".*\/rootfile": permission denied \(cannot replace the file and keep its owner 0:0 \(this user is 1000:1000\)/)
        expect(await sh(`stat -c %U ${dir}/rootfile; cat ${dir}/rootfile; ls -a ${dir} | grep -c dsh- || true`)).toBe('root\nrootish\n0\n')
      })

      it('writes through a symlink to its target and keeps the link', async () => {
        await sh(`echo t > ${dir}/link-target && ln -sfn link-target ${dir}/via-link && chown -h agent:agent ${dir}/via-link ${dir}/link-target`, 'root')
        await fs.writeText(await at('via-link'), 'through\n')
        expect(await sh(`readlink ${dir}/via-link; cat ${dir}/link-target`)).toBe('link-target\nthrough\n')
      })

      it('createIfAbsent creates a missing file and refuses an existing one with FS_NOT_OBSERVED (its content survives)', async () => {
        const target = await at('once.txt')
        expect((await fs.writeText(target, 'first', { kind: 'createIfAbsent' })).operation).toBe('create')
        await expect(fs.writeText(target, 'second', { kind: 'createIfAbsent' })).rejects.toThrow(`cannot overwrite existing "${dir}/once.txt" without reading it first`)
        expect(await sh(`cat ${dir}/once.txt`)).toBe('first')
      })

      it('createIfAbsent racing another creator: exactly one creates, the other is FS_NOT_OBSERVED, the winner\'s file survives', async () => {
        const outcomes = await Promise.allSettled([
          fs.writeText(await at('race-create.txt'), 'agent', { kind: 'createIfAbsent' }),
          root.fs!.writeText(await root.fs!.resolve(`${dir}/race-create.txt`), 'root', { kind: 'createIfAbsent' }),
        ])
        const winners = outcomes.flatMap((outcome, index) => outcome.status === 'fulfilled' ? [index === 0 ? 'agent' : 'root'] : [])
        expect(winners.length).toBe(1)
        expect(outcomes.flatMap(outcome => outcome.status === 'rejected' ? [(outcome.reason as FsError).code] : [])).toEqual(['FS_NOT_OBSERVED'])
        expect(await sh(`cat ${dir}/race-create.txt`)).toBe(winners[0])
      })

      it('replaceIfVersion replaces that version only (FS_STALE_VERSION once the shell changed it, and for a missing file)', async () => {
        const target = await at('guarded.txt')
        const created = await fs.writeText(target, 'v1')
        const second = await fs.writeText(target, 'v2', { kind: 'replaceIfVersion', version: created.version })
        expect(second).toMatchObject({ operation: 'update', before: 'v1', after: 'v2' })
        await sh(`printf 'v3 by the shell' > ${dir}/guarded.txt`)
        await expect(fs.writeText(target, 'v4', { kind: 'replaceIfVersion', version: second.version })).rejects.toThrow(`cannot write "${dir}/guarded.txt": file changed since it was read`)
        expect(await sh(`cat ${dir}/guarded.txt`)).toBe('v3 by the shell')
        await sh(`rm ${dir}/guarded.txt`)
        await expect(fs.writeText(target, 'v5', { kind: 'replaceIfVersion', version: second.version })).rejects.toThrow(`cannot write "${dir}/guarded.txt": file no longer exists`)
      })

      it('every write gives a new version, even same-size rewrites within one clock tick whose inode is reused', async () => {
        const target = await at('churn.txt')
        const versions: string[] = []
        for (let i = 0; i < 50; i += 1) versions.push((await fs.writeText(target, i % 2 === 0 ? 'AAAA' : 'BBBB')).version)
        expect(new Set(versions).size).toBe(50)
        // So a guard on an old version never passes against a later state that looks the same.
        const old = versions[0]!
        await expect(fs.writeText(target, 'CCCC', { kind: 'replaceIfVersion', version: old as never })).rejects.toThrow(`cannot write "${dir}/churn.txt": file changed since it was read`)
        expect(await sh(`cat ${dir}/churn.txt`)).toBe('BBBB')
      })

      it('a write into missing sub/dir on a full filesystem fails (FS_IO_ERROR, no space) and leaves no directory it made', async () => {
        // /small: a 256 KiB tmpfs (FS_WORLD_HOST_CONFIG); directories take no space there, content does.
        await sh('rm -rf /small/* && mkdir /small/kept && (head -c 1048576 /dev/zero > /small/fill 2>/dev/null || true)')
        try {
          for (const path of ['/small/sub/dir/f.txt', '/small/kept/new/f.txt']) {
            await expect(fs.writeText(await fs.resolve(path), 'x'.repeat(65536))).rejects.toThrow(`cannot write "${path}": cannot write (No space left on device): ${path}`)
            expect(await codeOf(fs.writeText(await fs.resolve(path), 'x'.repeat(65536)))).toBe('FS_IO_ERROR')
          }
          expect(await sh('cd /small && find . | sort')).toBe('.\n./fill\n./kept\n')
        } finally {
          await sh('rm -rf /small/*')
        }
      })

      it('refuses a directory target (FS_NOT_REGULAR_FILE) and a parent that is a file (FS_NOT_FOUND)', async () => {
        await sh(`mkdir -p ${dir}/a-folder && echo f > ${dir}/a-file`)
        await expect(fs.writeText(await at('a-folder'), 'x')).rejects.toThrow(`cannot write "${dir}/a-folder": not a regular file`)
        await expect(fs.writeText({ targetKey: `${dir}/a-file/child` as never, displayPath: `${dir}/a-file/child` }, 'x')).rejects.toThrow(`cannot write "${dir}/a-file/child": a parent path segment is not a directory`)
      })

      it('a dangling symlink is refused by createIfAbsent as not a regular file (as upstream), and replaced by an unguarded write', async () => {
        await sh(`ln -sfn nowhere ${dir}/dangling`)
        await expect(fs.writeText(await at('dangling'), 'x', { kind: 'createIfAbsent' })).rejects.toThrow(`cannot write "${dir}/dangling": not a regular file`)
        await fs.writeText(await at('dangling'), 'replaced\n')
        expect(await sh(`test -L ${dir}/dangling || echo regular; cat ${dir}/dangling; ls ${dir}/nowhere 2>&1 || true`)).toBe(`regular\nreplaced\nls: cannot access '${dir}/nowhere': No such file or directory\n`)
      })

      it('a symlink swapped in for the target after resolve is replaced, never followed: nothing of its target is taken, a guarded write is stale', async () => {
        await sh(`echo mine > ${dir}/swapped && mkdir -p ${dir}/elsewhere && echo theirs > ${dir}/elsewhere/secret && chmod 640 ${dir}/elsewhere/secret`)
        const target = await at('swapped')
        const version = (await fs.stat(target))!.version
        await sh(`rm ${dir}/swapped && ln -s elsewhere/secret ${dir}/swapped`)
        await expect(fs.writeText(target, 'guarded', { kind: 'replaceIfVersion', version })).rejects.toThrow(`cannot write "${dir}/swapped": file changed since it was read`)
        const outcome = await fs.writeText(target, 'unguarded\n')
        expect(outcome.before).toBeNull()
        expect(await sh(`test -L ${dir}/swapped || echo regular; stat -c %a ${dir}/swapped; cat ${dir}/elsewhere/secret`)).toBe('regular\n644\ntheirs\n')
      })

      it('a directory target is FS_NOT_REGULAR_FILE even where nothing could be created beside it', async () => {
        await sh(`mkdir -p ${dir}/locked/inner && chmod 555 ${dir}/locked`)
        try {
          expect(await codeOf(fs.writeText(await at('locked/inner'), 'x'))).toBe('FS_NOT_REGULAR_FILE')
        } finally {
          await sh(`chmod 755 ${dir}/locked`)
        }
      })

      it('unguarded edits from many callers of one client all apply (a per-target queue, as upstream)', async () => {
        await sh(`printf 'END\n' > ${dir}/queue.txt`)
        const lanes = Array.from({ length: 4 }, (_, lane) => (async () => {
          for (let i = 0; i < 10; i += 1) await fs.editText(await at('queue.txt'), { oldString: 'END\n', newString: `l${lane}-${i}\nEND\n`, replaceAll: false })
        })())
        await Promise.all(lanes)
        const lines = (await sh(`cat ${dir}/queue.txt`)).trim().split('\n')
        expect(lines.length).toBe(41)
        expect(lines.at(-1)).toBe('END')
        expect(new Set(lines.slice(0, -1)).size).toBe(40)
      })

      it('a path with spaces, quotes, a newline and non-ASCII round-trips', async () => {
        const name = 'we\'ird "name"\nwith ü and $HOME.txt'
        const target = await at(name)
        await fs.writeText(target, 'odd')
        expect(await fs.readText(await at(name))).toBe('odd')
        expect((await fs.listDir(await at('.'))).some(entry => entry.name === name)).toBe(true)
        expect(await sh(`cat "${dir}/we'ird \\"name\\""*`)).toBe('odd')
      })

      it('a reader in the world never sees a partial file while it is replaced again and again', async () => {
        const a = 'a'.repeat(1_000_000)
        const b = 'b'.repeat(1_000_000)
        const target = await at('atomic.txt')
        await fs.writeText(target, a)
        // The reader opens and reads the whole file each time (one open: never two states
        // mixed) and records the distinct (first byte, size, last byte) it saw.
        const script = `import time\nseen = set()\nend = time.time() + 4\nwhile time.time() < end:\n    with open('${dir}/atomic.txt', 'rb') as f:\n        d = f.read()\n    seen.add('%s%d%s' % (chr(d[0]), len(d), chr(d[-1])))\nprint(' '.join(sorted(seen)))`
        const reader = execIn(world.containerId(), ['python3', '-c', script])
        for (let i = 0; i < 40; i += 1) await fs.writeText(target, i % 2 === 0 ? b : a)
        const seen = (await reader).stdout.trim().split(' ')
        expect(seen.every(line => line === 'a1000000a' || line === 'b1000000b')).toBe(true)
      })
    })

    describe('the server\'s fence (the roots a write names)', () => {
      it('a directory swapped for a symlink to one whose path is over 4096 bytes, 1500 times during 1500 writes: none lands outside, the refused ones say why', async () => {
        // Straight to the server, as a fenced write sends it: the roots are the server's own
        // check, on the descriptor of the directory it publishes in.
        const ws = await fresh()
        const base = `/dev/shm/fs-race-${world.name}-${process.pid}-${nextDir}`
        const servers = new FileServers(worldOwnerOf(agent.runtime)!)
        const race = await startRace(world.containerId(), ws, base, 'agent')
        try {
          const server = await servers.server(undefined, [], 'write')
          const content = Buffer.from('r\n')
          const outcomes = await Promise.all(Array.from({ length: 1500 }, (_, i) => server.request('w', [`${ws}/real/r-${i}.txt`, 'n', '', '', '0', '1', ws, String(content.length)], { content }).then(
            reply => decodeFields(reply.payload)[0]!.toString(),
            (error: unknown) => error instanceof ServerRefusal ? `${error.code}: ${error.message}` : String(error),
          )))
          const exchanges = await race.stop()
          expect(exchanges).toBeGreaterThan(0)
          expect(await race.outside()).toBe(0)
          const refused = outcomes.filter(outcome => outcome !== 'create')
          // The race happened: some writes opened the deep directory, and were refused for it.
          expect(refused.length).toBeGreaterThan(0)
          expect(new Set(refused)).toEqual(new Set([`UNPROVEN: the directory's path cannot be read whole from /proc/self/fd (File name too long), so it cannot be checked against the writable roots: ${ws}/real`]))
          // Every write it published is in the workspace (in real, or in evil while the directory had that name).
          expect(Number(await sh(`find ${ws} -name 'r-*' | wc -l`))).toBe(1500 - refused.length)
        } finally {
          await race.stop().catch(() => undefined)
          await servers.dispose()
          await sh(`rm -rf ${base}`, 'root')
        }
      })
    })

    describe('editText', () => {
      it('replaces literal text once, keeping CRLF storage, mode and owner', async () => {
        await sh(`printf 'alpha\\r\\nbeta\\r\\ngamma\\r\\n' > ${dir}/edit.txt && chmod 640 ${dir}/edit.txt && chown agent:agent ${dir}/edit.txt`, 'root')
        const target = await at('edit.txt')
        const version = (await fs.stat(target))!.version
        const outcome = await fs.editText(target, { oldString: 'beta\n', newString: 'BETA\nbeta2\n', replaceAll: false }, { version })
        expect(outcome).toMatchObject({ before: 'alpha\nbeta\ngamma\n', after: 'alpha\nBETA\nbeta2\ngamma\n' })
        expect(await sh(`stat -c '%a %U' ${dir}/edit.txt; od -An -c ${dir}/edit.txt | tr -s ' ' | tr -d '\\n'`)).toBe('640 agent\n a l p h a \\r \\n B E T A \\r \\n b e t a 2 \\r \\n g a m m a \\r \\n')
        expect((await fs.stat(target))!.version).toBe(outcome.version)
      })

      it('FS_EDIT_NOT_FOUND, FS_AMBIGUOUS_EDIT, and replaceAll', async () => {
        await sh(`printf 'x y x y x' > ${dir}/multi.txt`)
        const target = await at('multi.txt')
        await expect(fs.editText(target, { oldString: 'z', newString: 'q', replaceAll: false })).rejects.toThrow(`old_string was not found in "${dir}/multi.txt"`)
        await expect(fs.editText(target, { oldString: 'x', newString: 'q', replaceAll: false })).rejects.toThrow(`old_string matched 3 times in "${dir}/multi.txt"; provide a more specific old_string or set replace_all to true`)
        expect(await codeOf(fs.editText(target, { oldString: '', newString: 'q', replaceAll: false }))).toBe('FS_EDIT_NOT_FOUND')
        expect((await fs.editText(target, { oldString: 'x', newString: 'q', replaceAll: true })).after).toBe('q y q y q')
      })

      it('checks the version before matching: a stale version is FS_STALE_VERSION even when the old text is gone', async () => {
        await sh(`printf 'keep' > ${dir}/stale.txt`)
        const target = await at('stale.txt')
        const version = (await fs.stat(target))!.version
        await sh(`printf 'changed by the shell' > ${dir}/stale.txt`)
        await expect(fs.editText(target, { oldString: 'keep', newString: 'k', replaceAll: false }, { version })).rejects.toThrow(`cannot edit "${dir}/stale.txt": file changed since it was read`)
        expect(await codeOf(fs.editText(await at('never-there.txt'), { oldString: 'a', newString: 'b', replaceAll: false }))).toBe('FS_STALE_VERSION')
      })

      it('refuses binary and invalid UTF-8 (FS_NOT_TEXT), leaving the file unchanged', async () => {
        await sh(`printf 'text then \\000 NUL' > ${dir}/bin-edit && printf 'x \\377' > ${dir}/bad-edit`)
        expect(await codeOf(fs.editText(await at('bin-edit'), { oldString: 'text', newString: 't', replaceAll: false }))).toBe('FS_NOT_TEXT')
        expect(await codeOf(fs.editText(await at('bad-edit'), { oldString: 'x', newString: 'y', replaceAll: false }))).toBe('FS_NOT_TEXT')
        expect(await sh(`od -An -c ${dir}/bad-edit | tr -s ' '`)).toBe(' x 377\n')
      })

      it('two editors of one version: one success and one FS_STALE_VERSION, never a lost update', async () => {
        await sh(`printf 'count: 0' > ${dir}/shared.txt && chown agent:agent ${dir}/shared.txt`, 'root')
        const mine = await at('shared.txt')
        const theirs = await root.fs!.resolve(`${dir}/shared.txt`)
        const version = (await fs.stat(mine))!.version
        const outcomes = await Promise.allSettled([
          fs.editText(mine, { oldString: 'count: 0', newString: 'count: agent', replaceAll: false }, { version }),
          root.fs!.editText(theirs, { oldString: 'count: 0', newString: 'count: root', replaceAll: false }, { version }),
        ])
        const won = outcomes.filter(outcome => outcome.status === 'fulfilled')
        const lost = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected')
        expect(won.length).toBe(1)
        expect(lost.map(outcome => (outcome.reason as FsError).code)).toEqual(['FS_STALE_VERSION'])
        const winner = outcomes[0]!.status === 'fulfilled' ? 'agent' : 'root'
        expect(await sh(`cat ${dir}/shared.txt`)).toBe(`count: ${winner}`)
      })
    })
  })
}
