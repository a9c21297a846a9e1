/**
 * The `dsh-remote` CLI end to end: `doctor` attached to an existing container proves every
 * readiness and teardown fact as root and as the non-root user; `demo` runs a session in a
 * throwaway container, proves nothing is left, and removes the container; bad targets fail
 * with a typed error and exit code 2.
 */
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_IMAGE } from '../../src/cli/target.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
const docker = new Docker()
let container: Docker.Container

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: root, maxBuffer: 16 << 20 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string }
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr }
  }
}

beforeAll(async () => {
  container = await docker.createContainer({ Image: DEFAULT_IMAGE, Cmd: ['sleep', 'infinity'], HostConfig: { Init: true, NetworkMode: 'none' } })
  await container.start()
})

afterAll(async () => {
  await container?.remove({ force: true })
})

describe.each(['agent', 'root'])('dsh-remote doctor --docker CONTAINER --user %s', user => {
  it('proves pid publication, foreground probing, exact stdin-wait, signal delivery and teardown', async () => {
    const { code, stdout } = await cli(['doctor', '--docker', container.id, '--user', user, '--cwd', '/tmp', '--json'])
    const report = JSON.parse(stdout) as { checks: { name: string; ok: boolean; detail: string }[] }
    expect(report.checks.map(check => [check.name, check.ok])).toEqual([
      ['control channel', true],
      ['pid publication', true],
      ['foreground probing', true],
      ['exact stdin-wait', true],
      ['signal delivery', true],
      ['teardown proof', true],
    ])
    expect(report.checks[0]!.detail).toContain(`uid ${user === 'root' ? 0 : 1000}, arch x86_64`)
    expect(code).toBe(0)
  }, 60_000)
})

describe('dsh-remote demo', () => {
  it('runs a session in a throwaway container, leaves nothing running and removes the container', async () => {
    const { code, stdout } = await cli(['demo'])
    expect(stdout).toContain('nothing of the session is left')
    expect(stdout).toMatch(/container [0-9a-f]{12} removed/)
    expect(stdout).toContain('status=130')
    expect(stdout).toContain('hi world')
    const id = /container ([0-9a-f]{12}) removed/.exec(stdout)![1]!
    await expect(docker.getContainer(id).inspect()).rejects.toMatchObject({ statusCode: 404 })
    expect(code).toBe(0)
  }, 120_000)
})

describe('dsh-remote with a bad target', () => {
  it('names the typed error and exits 2 for an unknown container', async () => {
    const { code, stderr } = await cli(['run', '--docker', 'dsh-remote-no-such-container', '--script', 'test/fixtures/agent-session-basic.txt'])
    expect(stderr).toContain('TargetNotFoundError [TARGET_NOT_FOUND]')
    expect(code).toBe(2)
  }, 60_000)
})
