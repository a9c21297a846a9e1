/**
 * Shared pieces of the egress suites (Docker, swarm and SSH worlds): the world's HTTP client, a
 * GET from this machine, an HTTPS server with a test CA serving a git repository, and a Python
 * package index serving one wheel. Servers are this machine's 127.0.0.1 only.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { type Server, createServer, get } from 'node:http'
import { type Server as HttpsServer, createServer as createHttpsServer } from 'node:https'
import { type AddressInfo, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { promisify } from 'node:util'
import { expect } from 'vitest'
import type { RemoteWorld } from '../../src/backend/world.ts'
import { run } from '../sandbox/helpers.ts'

const execFileAsync = promisify(execFile)

/** The world's HTTP(S) client: prints `STATUS BODY`, or `error KIND` (python3 is in the image; urllib reads *_PROXY). */
export const FETCH = `import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=20)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except Exception as e:
    print('error', type(e).__name__)
`

/** A world's server (argv: PORT) that reads each connection to its EOF, then sends all it read back and closes. */
export const ECHO_AT_EOF = `import socket, sys
server = socket.socket()
server.bind(('127.0.0.1', int(sys.argv[1])))
server.listen(8)
while True:
    c = server.accept()[0]
    data = bytearray()
    while True:
        part = c.recv(65536)
        if not part: break
        data += part
    c.sendall(data)
    c.close()
`

/**
 * From this machine, connect to 127.0.0.1:PORT, send `body`, end the sending side (a
 * half-close), and read to the end: `echoed N SHA256-PREFIX` of what came back, or `error CODE`.
 */
export function hostHalfClose(port: number, body: Buffer): Promise<string> {
  return new Promise(resolve => {
    const parts: Buffer[] = []
    const socket = connect(port, '127.0.0.1')
    socket.on('data', (chunk: Buffer) => parts.push(chunk))
    socket.on('end', () => {
      const back = Buffer.concat(parts)
      resolve(`echoed ${back.length} ${createHash('sha256').update(back).digest('hex').slice(0, 16)}`)
      socket.destroy()
    })
    socket.on('error', (error: NodeJS.ErrnoException) => resolve(`error ${error.code ?? error.message}`))
    socket.end(body)
  })
}

/** GET http://127.0.0.1:PORT/PATH from this machine: the status and body, or the error's code. */
export function hostGet(port: number, path: string): Promise<string> {
  return new Promise(resolve => {
    get({ host: '127.0.0.1', port, path }, response => {
      let body = ''
      response.on('data', (chunk: Buffer) => { body += chunk.toString('utf8') })
      response.on('end', () => resolve(`${response.statusCode} ${body}`))
    }).on('error', (error: NodeJS.ErrnoException) => resolve(`error ${error.code ?? error.message}`))
  })
}

/**
 * Ask `attempt` until its answer starts with `prefix` (a server or a relay that starts in the
 * background), at most `boundMs`; returns the last answer.
 */
export async function answerStartingWith(prefix: string, attempt: () => Promise<string>, boundMs = 20_000): Promise<string> {
  let answer = await attempt()
  for (const deadline = Date.now() + boundMs; !answer.startsWith(prefix) && Date.now() < deadline;) {
    await delay(100)
    answer = await attempt()
  }
  return answer
}

/** A test CA and a server certificate it signed for one host name (PEM texts). */
export interface TestCertificates {
  ca: string
  key: string
  cert: string
}

/**
 * Make a CA and a certificate for `name` (subjectAltName DNS:name), signed by it, valid 2 days:
 * openssl in a throwaway container of the project image (the host has no openssl of the
 * project's), NetworkMode none.
 */
export async function testCertificates(image: string, name: string): Promise<TestCertificates> {
  const script = [
    'set -e',
    'openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=dsh-remote-worlds-test-ca 2>/dev/null',
    `openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=${name} 2>/dev/null`,
    `printf 'subjectAltName=DNS:${name}\\nbasicConstraints=CA:FALSE\\n' > ext`,
    'openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext 2>/dev/null',
    'chmod 644 ca.pem server.key server.pem',
  ].join('\n')
  return madeInImage(image, ['sh', '-c', script], out => ({ ca: readFileSync(join(out, 'ca.pem'), 'utf8'), key: readFileSync(join(out, 'server.key'), 'utf8'), cert: readFileSync(join(out, 'server.pem'), 'utf8') }))
}

/**
 * Run `argv` in a throwaway container of `image` (NetworkMode none; working directory /out, a
 * fresh host folder) and read what it made there with `read`: for host tools the host lacks
 * but the project image has (openssl, python3). The folder is removed after.
 */
async function madeInImage<T>(image: string, argv: readonly string[], read: (out: string) => T): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-test-made-'))
  try {
    await execFileAsync('docker', ['run', '--rm', '--network', 'none', '-v', `${dir}:/out`, '-w', '/out', image, ...argv])
    return read(dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * A bare git repository at `dir/repo.git` with one commit whose subject is `subject`, made with
 * this machine's git, ready for git's dumb HTTP protocol (update-server-info): served as static
 * files, `git clone https://HOST/repo.git` fetches it.
 */
export async function bareRepository(dir: string, subject: string): Promise<string> {
  const source = join(dir, 'source')
  const git = (...args: string[]): Promise<unknown> => execFileAsync('git', ['-c', 'user.name=dsh test', '-c', 'user.email=test@dsh.invalid', '-c', 'init.defaultBranch=main', ...args])
  await git('init', '-q', source)
  writeFileSync(join(source, 'README'), `${subject}\n`)
  await git('-C', source, 'add', 'README')
  await git('-C', source, 'commit', '-q', '-m', subject)
  const bare = join(dir, 'repo.git')
  await git('clone', '-q', '--bare', source, bare)
  await git('-C', bare, 'update-server-info')
  return bare
}

/**
 * An HTTPS server on this machine's 127.0.0.1 with `certificates`: `/hello` answers
 * `hello PATH via HOST`; `/repo.git/...` serves the files of `repository` (git's dumb protocol).
 */
export async function startHttpsServer(certificates: TestCertificates, repository: string): Promise<{ server: HttpsServer; port: number }> {
  const server = createHttpsServer({ key: certificates.key, cert: certificates.cert }, (request, response) => {
    const url = new URL(request.url ?? '/', 'https://host')
    if (url.pathname.startsWith('/repo.git/')) {
      const file = join(repository, url.pathname.slice('/repo.git/'.length))
      if (!file.startsWith(`${repository}/`) || !existsSync(file) || !statSync(file).isFile()) {
        response.writeHead(404).end()
        return
      }
      response.end(readFileSync(file))
      return
    }
    response.end(`hello ${request.url} via ${request.headers.host}`)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { server, port: (server.address() as AddressInfo).port }
}

/** The package the index serves: its name, version and what its module says. */
export const INDEX_PACKAGE = { name: 'dshdemo', version: '1.0', greeting: 'hello from a package index on this machine' } as const

/** The wheel's file name (PEP 427: NAME-VERSION-PYTAG-ABITAG-PLATFORM.whl). */
const WHEEL_NAME = `${INDEX_PACKAGE.name}-${INDEX_PACKAGE.version}-py3-none-any.whl`

/**
 * A pure-Python wheel of {@link INDEX_PACKAGE} (a module whose GREETING is its greeting; METADATA,
 * WHEEL and a RECORD of sha256 digests, PEP 427/376), zipped by python3 in a throwaway container
 * of the project image (the host has no python of the project's), NetworkMode none.
 */
export async function demoWheel(image: string): Promise<Buffer> {
  const { name, version, greeting } = INDEX_PACKAGE
  const info = `${name}-${version}.dist-info`
  const script = `import base64, hashlib, zipfile
files = {
    '${name}/__init__.py': b'GREETING = "${greeting}"\\n',
    '${info}/METADATA': b'Metadata-Version: 2.1\\nName: ${name}\\nVersion: ${version}\\n',
    '${info}/WHEEL': b'Wheel-Version: 1.0\\nGenerator: dsh-remote-worlds-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
digest = lambda data: base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
record = ''.join('%s,sha256=%s,%d\\n' % (path, digest(data), len(data)) for path, data in files.items()) + '${info}/RECORD,,\\n'
with zipfile.ZipFile('${WHEEL_NAME}', 'w') as wheel:
    for path, data in files.items():
        wheel.writestr(path, data)
    wheel.writestr('${info}/RECORD', record)
`
  return madeInImage(image, ['python3', '-c', script], out => readFileSync(join(out, WHEEL_NAME)))
}

/** A running package index ({@link startPackageIndex}). */
export interface PackageIndex {
  server: Server
  port: number
  /** The paths asked, in order. */
  requests: string[]
}

/**
 * A PEP 503 "simple" package index on this machine's 127.0.0.1 serving `wheel` as
 * {@link INDEX_PACKAGE}: `/simple/NAME/` lists it with its sha256 (which pip checks), `/files/`
 * serves it, anything else is a 404. `requests` counts the paths asked, in order.
 */
export async function startPackageIndex(wheel: Buffer): Promise<PackageIndex> {
  const requests: string[] = []
  const sha256 = createHash('sha256').update(wheel).digest('hex')
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://index').pathname
    requests.push(path)
    if (path === `/simple/${INDEX_PACKAGE.name}/`) {
      response.writeHead(200, { 'content-type': 'text/html' }).end(`<!DOCTYPE html><html><body><a href="/files/${WHEEL_NAME}#sha256=${sha256}">${WHEEL_NAME}</a></body></html>`)
    } else if (path === `/files/${WHEEL_NAME}`) {
      response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(wheel)
    } else {
      response.writeHead(404).end()
    }
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { server, port: (server.address() as AddressInfo).port, requests }
}

/**
 * The world's pip, as a sh script (argv: HOST PORT TARGET): through its proxy, from the index
 * at HOST:PORT (plain HTTP, so trusted by name), into TARGET (pip's --target: no system site, so
 * Debian's externally-managed rule is not in the way), quietly; then prints the installed
 * module's greeting. On failure, pip's last line and python3's.
 */
export const PIP_INSTALL = `python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir --target "$3" --index-url "http://$1:$2/simple/" --trusted-host "$1" ${INDEX_PACKAGE.name} 2>&1 | tail -n 1
PYTHONPATH="$3" python3 -c 'import ${INDEX_PACKAGE.name}; print(${INDEX_PACKAGE.name}.GREETING)' 2>&1 | tail -n 1
`

/**
 * The pip case of every world's egress suite. With only `rules` (which do not name the index,
 * `pypi.test:PORT`, that the world's resolver maps to it) pip finds nothing and the index sees
 * no request; once a live rule change adds the index, pip installs and the greeting prints.
 * @param script - {@link PIP_INSTALL}'s path in the world.
 */
export async function expectPipThroughRules(world: RemoteWorld, script: string, index: PackageIndex, rules: readonly string[]): Promise<void> {
  const terminal = await world.open()
  try {
    world.network.setRules({ allow: [...rules] })
    expect(await run(terminal, `sh ${script} pypi.test ${index.port} /tmp/pip-denied`)).toBe(`ERROR: No matching distribution found for ${INDEX_PACKAGE.name}\nModuleNotFoundError: No module named '${INDEX_PACKAGE.name}'`)
    expect(index.requests).toEqual([])
    world.network.setRules({ allow: [...rules, `pypi.test:${index.port}`] })
    expect(await run(terminal, `sh ${script} pypi.test ${index.port} /tmp/pip-allowed`)).toBe(INDEX_PACKAGE.greeting)
    expect(index.requests).toEqual([`/simple/${INDEX_PACKAGE.name}/`, `/files/${WHEEL_NAME}`])
  } finally {
    await terminal.close()
  }
}
