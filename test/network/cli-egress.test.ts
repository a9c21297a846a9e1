/**
 * The CLI's network flags, as a user runs them (issue 34): a managed read-only container with
 * `--allow`, `--resolve` and `--egress-log` reaches a server on this machine's 127.0.0.1 by the
 * name the rule gives it, is refused another, and the log holds one line for each.
 */
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { IMAGE, hostWorkspace } from '../sandbox/helpers.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
let http: Server
let port = 0
let dir: string
let workspace: ReturnType<typeof hostWorkspace>

beforeAll(async () => {
  http = createServer((request, response) => response.end(`hello ${request.url}`))
  http.listen(0, '127.0.0.1')
  await once(http, 'listening')
  port = (http.address() as AddressInfo).port
  dir = mkdtempSync(join(tmpdir(), 'dsh-cli-egress-'))
  workspace = hostWorkspace()
})

afterAll(() => {
  http?.close()
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  workspace?.remove()
})

describe('dsh-remote-worlds run --mode read-only --allow RULE --resolve NAME:PORT:ADDR --egress-log FILE', () => {
  it('lets the allowed name through the world\'s proxy, refuses another, and logs both', async () => {
    const fetch = (name: string): string => `python3 -c 'import urllib.request as u; print(u.urlopen("http://${name}:${port}/z").read().decode())' 2>&1 | tail -1`
    const script = join(dir, 'script.txt')
    writeFileSync(script, `${fetch('allowed.test')}\n${fetch('other.test')}\n`)
    const log = join(dir, 'egress.jsonl')
    const args = ['run', '--image', IMAGE, '--mode', 'read-only', '--workspace', workspace.path, '--allow', `allowed.test:${port}`, '--resolve', `allowed.test:${port}:127.0.0.1`, '--resolve', `other.test:${port}:127.0.0.1`, '--egress-log', log, '--json', '--script', script]
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: root, maxBuffer: 16 << 20 })
    const records = stdout.trim().split('\n').map(line => JSON.parse(line) as { output: string })
    // Each step's output: the echoed command, what it printed, the next prompt.
    expect(records.map(record => record.output.replaceAll('\r', '').split('\n'))).toEqual([
      [fetch('allowed.test'), 'hello /z', 'dsh> '],
      [fetch('other.test'), `urllib.error.HTTPError: HTTP Error 403: Forbidden (dsh-remote-worlds egress: refused other.test:${port}: no --allow rule matches other.test:${port})`, 'dsh> '],
    ])
    expect(stderr).toMatch(/^# network allow: the world's HTTP\(S\) proxy is 127\.0\.0\.1:\d+ \(HTTP_PROXY, HTTPS_PROXY\)$/m)
    expect(stderr).toMatch(/^# egress: 1 connection\(s\) allowed, 1 refused; \d+ bytes out, \d+ bytes in$/m)
    const logged = readFileSync(log, 'utf8').trim().split('\n').map(line => JSON.parse(line) as Record<string, unknown>)
    // One line per connection when it is over: sorted, as two connections may end in either order.
    expect(logged.map(({ host, verdict, reason }) => ({ host, verdict, reason })).sort((a, b) => String(a.host).localeCompare(String(b.host)))).toEqual([
      { host: 'allowed.test', verdict: 'allow', reason: `allowed by rule allowed.test:${port}` },
      { host: 'other.test', verdict: 'deny', reason: `no --allow rule matches other.test:${port}` },
    ])
  }, 120_000)
})
