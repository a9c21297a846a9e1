/**
 * Egress and ports of a confined swarm world (issue 34, item 4): the task has `lo` only (proven
 * in the task), and with `network: 'allow'` the relay runs in the task over the node engine's
 * exec, so its programs reach what the rules allow and a port forwarded from this machine
 * reaches a server they started. Real cluster (docker/ensure-swarm.sh), real servers on this
 * machine's 127.0.0.1 named by test host names (`resolve`).
 */
import { once } from 'node:events'
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { SwarmSubprocessRuntime } from '../../src/providers/swarm/swarm-runtime.ts'
import { SWARM_IMAGE, onNode, swarmConfig, useSwarmCluster } from '../helpers/swarm.ts'
import { FETCH, PIP_INSTALL, type PackageIndex, answerStartingWith, demoWheel, expectPipThroughRules, hostGet, startPackageIndex } from '../network/helpers.ts'
import { run } from '../sandbox/helpers.ts'

useSwarmCluster()
let folder: string
let http: Server
let httpPort = 0
let index: PackageIndex
let world: RemoteWorld

beforeAll(async () => {
  http = createServer((request, response) => response.end(`hello ${request.url} via ${request.headers.host}`))
  http.listen(0, '127.0.0.1')
  await once(http, 'listening')
  httpPort = (http.address() as AddressInfo).port
  folder = mkdtempSync(join(tmpdir(), 'dsh-swarm-egress-'))
  writeFileSync(join(folder, 'fetch.py'), FETCH)
  writeFileSync(join(folder, 'pip-install.sh'), PIP_INSTALL)
  index = await startPackageIndex(await demoWheel(SWARM_IMAGE))
  chownSync(folder, 1000, 1000)
  world = await openWorld({
    runtime: SwarmSubprocessRuntime as never,
    runtimeConfig: swarmConfig({ placement: onNode('dsh-swarm-3'), workspace: { bind: folder } }),
    workspaceRoot: '/workspace',
    mode: 'read-only',
    network: { allow: [`allowed.test:${httpPort}`], deny: ['denied.test'], resolve: [`allowed.test:${httpPort}:127.0.0.1`, `denied.test:${httpPort}:127.0.0.1`, `pypi.test:${index.port}:127.0.0.1`] },
  })
}, 180_000)

afterAll(async () => {
  await world?.dispose()
  http?.close()
  index?.server.close()
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
})

describe('a read-only swarm world with network allow', () => {
  it('its task keeps lo only; the allowed name goes through the proxy, the denied one is refused, no name resolves', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "')).toBe('lo')
    expect(await run(terminal, `python3 /workspace/fetch.py http://allowed.test:${httpPort}/x`)).toBe(`200 hello /x via allowed.test:${httpPort}`)
    expect(await run(terminal, `python3 /workspace/fetch.py http://denied.test:${httpPort}/x`)).toBe(`403 dsh-remote-worlds egress: refused denied.test:${httpPort}: denied by rule denied.test`)
    expect(await run(terminal, 'getent hosts example.com; echo "getent $?"')).toBe('getent 2')
    await terminal.close()
  })

  it('a port forwarded from this machine reaches a server the task\'s shell started', async () => {
    const terminal = await world.open()
    const forward = await world.network.forward('0:8000')
    try {
      expect(await run(terminal, '(cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &)')).toBe('')
      expect(await answerStartingWith('200', () => hostGet(forward.host.port, '/fetch.py'))).toBe(`200 ${FETCH}`)
    } finally {
      await forward.close()
      await terminal.close()
    }
  })

  it('pip installs from a package index the rules allow, and finds nothing where they do not', async () => {
    await expectPipThroughRules(world, '/workspace/pip-install.sh', index, [`allowed.test:${httpPort}`])
  })
})
