/**
 * The sandbox policy holds inside a swarm world's task: the service is created from the policy
 * (workspace-write here, the workspace a host folder bound at /workspace), and what a 1.41
 * service cannot ask for is proven in the task. Everything is read from the shell in the task,
 * on the real cluster.
 */
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, type WorldTerminal, openWorld } from '../../src/backend/world.ts'
import { SwarmSubprocessRuntime } from '../../src/providers/swarm/swarm-runtime.ts'
import { sandboxReportOf } from '../../src/sandbox/index.ts'
import { onNode, swarmConfig, useSwarmCluster } from '../helpers/swarm.ts'

const PIDS_LIMIT = 40
const MEMORY_BYTES = 300 * 1024 * 1024
useSwarmCluster()
let folder: string
let world: RemoteWorld
let shell: WorldTerminal

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), 'dsh-swarm-workspace-'))
  chownSync(folder, 1000, 1000)
  world = await openWorld({
    runtime: SwarmSubprocessRuntime as never,
    runtimeConfig: swarmConfig({ placement: onNode('dsh-swarm-2'), workspace: { bind: folder }, limits: { pidsLimit: PIDS_LIMIT, memoryBytes: MEMORY_BYTES } }),
    workspaceRoot: '/workspace',
    mode: 'workspace-write',
  })
  shell = await world.open({ cwd: '/workspace' })
}, 180_000)

afterAll(async () => {
  await shell?.close()
  await world?.dispose()
  rmSync(folder, { recursive: true, force: true })
})

/**
 * The output of `command` between its echo (one line: readline scrolls a line longer than the
 * terminal sideways under TERM=dumb) and the prompt.
 */
async function run(command: string): Promise<string> {
  const result = await shell.send(command)
  expect(result.waitReason).toBe('stdin_read')
  expect(result.viewport.endsWith('dsh> '), result.viewport).toBe(true)
  return result.viewport.slice(result.viewport.indexOf('\n') + 1, -'dsh> '.length)
}

describe('inside a workspace-write swarm task', () => {
  it('runs as the folder\'s owner, not root', async () => {
    expect(await run('id -u; id -g')).toBe('1000\n1000\n')
  })

  it('the root filesystem is read-only; the workspace is writable and its writes reach the host folder', async () => {
    expect(await run('touch /etc/dsh-probe; echo $?')).toBe('touch: cannot touch \'/etc/dsh-probe\': Read-only file system\n1\n')
    expect(await run('echo from-the-task > /workspace/note && cat /workspace/note')).toBe('from-the-task\n')
    expect(readFileSync(join(folder, 'note'), 'utf8')).toBe('from-the-task\n')
  })

  it('holds no capability, and no-new-privileges is in force', async () => {
    expect(await run('grep -E "^(CapPrm|CapEff|CapBnd|NoNewPrivs)" /proc/self/status')).toBe('CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n')
  })

  it('has no network but loopback', async () => {
    expect(await run('tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "')).toBe('lo\n')
  })

  it('has the pids and memory limits, and the pids limit refuses the fork past it', async () => {
    expect(await run('cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes')).toBe(`${PIDS_LIMIT}\n${MEMORY_BYTES}\n`)
    // Fork until the kernel refuses: EAGAIN (11) from the pids controller, well before 1000;
    // then the children go, so later commands can fork. (The program is put in the workspace
    // from the host: a long command line would scroll sideways under TERM=dumb.)
    writeFileSync(join(folder, 'forks.py'), [
      'import os, signal',
      'kids = []',
      'try:',
      '    while len(kids) < 1000:',
      '        pid = os.fork()',
      '        if pid == 0:',
      '            signal.pause()',
      '        kids.append(pid)',
      'except OSError as e:',
      `    print("refused", e.errno, len(kids) < ${PIDS_LIMIT})`,
      'for pid in kids:',
      '    os.kill(pid, 9); os.waitpid(pid, 0)',
      '',
    ].join('\n'))
    const forks = await run('python3 /workspace/forks.py')
    expect(forks).toBe('refused 11 True\n')
  })

  it('has a private /tmp where programs run (a tmpfs: exec, nosuid, nodev)', async () => {
    expect(await run('cp /bin/true /tmp/t && /tmp/t && echo ran; grep " /tmp " /proc/mounts | cut -d" " -f1,3,4')).toBe('ran\ntmpfs tmpfs rw,nosuid,nodev,relatime,size=262144k\n')
  })

  it('reports both confined modes enforced in full, with what the task proved', () => {
    const report = sandboxReportOf(world.ctx)!
    expect(report.world).toMatch(/^swarm service dsh-world-[0-9a-f]{12} on node dsh-swarm-2 \(swarm task\)$/)
    expect(report.limits).toEqual({ pidsLimit: PIDS_LIMIT, memoryBytes: MEMORY_BYTES, nanoCpus: 2_000_000_000, networkMode: 'none' })
    for (const mode of ['read-only', 'workspace-write'] as const) {
      const entry = report.modes.find(candidate => candidate.mode === mode)!
      // read-only is not enforced: the workspace is a read-write bind (the policy made it for workspace-write).
      if (mode === 'read-only') {
        expect(entry.available).toBe(false)
        continue
      }
      expect(entry.available).toBe(true)
      expect(entry.enforcement).toBe('full')
      expect(entry.facts).toContain('no-new-privileges (the node\'s dockerd --no-new-privileges; proven in the task: NoNewPrivs 1)')
      expect(entry.facts).toContain('network none (proven in the task: lo only)')
      expect(entry.facts).toContain('capabilities: none (CapDrop ALL)')
      expect(entry.facts).toContain('private writable tmpfs (ephemeral): /tmp, /dev/shm, /dev/mqueue')
    }
  })
})
