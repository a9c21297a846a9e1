/**
 * What a world's task must prove about itself because its service could not ask for it (Engine
 * API 1.41 has no per-service no-new-privileges and no network none; service-spec.ts): read
 * inside the task, by a process of the world's user, and from the node's engine.
 * @module dsh-remote-worlds/providers/swarm/task-facts
 */
import type Docker from 'dockerode'
import { TransportError } from '../remote/errors.ts'
import { runInWorld } from '../remote/world-tools/run.ts'
import type { DockerWorld } from '../docker/docker-world.ts'

/** The facts of one task (see the module documentation). */
export interface TaskFacts {
  /**
   * `NoNewPrivs` of a process of the task, from its /proc/self/status (1: no-new-privileges is
   * in force, inherited by every exec: the engine copies the container's process spec into
   * each). Docker sets it per container from the node's dockerd --no-new-privileges
   * (daemon/daemon_unix.go parseSecurityOpt), where inspect does not show it.
   */
  noNewPrivileges: boolean
  /** The network interfaces of the task's network namespace (/proc/self/net/dev): `['lo']` is network none. */
  interfaces: string[]
  /** The scratch volumes (service-spec.ts) and whether the node's engine says each is a tmpfs of the local driver. */
  scratch: { name: string; target: string; tmpfs: boolean }[]
}

/**
 * Builtins only: `nnp VALUE` from /proc/self/status, then `if NAME` per line of
 * /proc/self/net/dev (proc(5): two header lines, then `NAME: counters`).
 */
const PROBE = [
  'while IFS= read -r line; do case $line in NoNewPrivs:*) set -- ${line#NoNewPrivs:}; echo "nnp $1" ;; esac; done </proc/self/status',
  'while IFS= read -r line; do case $line in *:*) set -- ${line%%:*}; echo "if $1" ;; esac; done </proc/self/net/dev',
].join('\n')

/**
 * Read the facts of the task behind `world`, as `user`.
 * @param scratch - the scratch volumes the service mounts (names and targets).
 * @throws TransportError when the probe cannot run or prints nothing it should.
 */
export async function readTaskFacts(world: DockerWorld, user: string | undefined, scratch: readonly { name: string; target: string }[]): Promise<TaskFacts> {
  const result = await runInWorld({ describe: () => world.describe(user), openProcess: script => world.openProcess(script, user, { stdin: true }) }, PROBE)
  const lines = result.stdout.split('\n')
  const nnp = lines.find(line => line.startsWith('nnp '))?.slice(4)
  const interfaces = lines.filter(line => line.startsWith('if ')).map(line => line.slice(3))
  if (result.exitCode !== 0 || interfaces.length === 0) throw new TransportError(`${world.describe(user)}: the task's facts could not be read (exit ${result.exitCode}): ${result.stderr.trim() || result.stdout.trim() || 'no output'}`)
  const volumes = await Promise.all(scratch.map(async ({ name, target }) => {
    const info = await world.docker.getVolume(name).inspect().catch(() => undefined) as Docker.VolumeInspectInfo | undefined
    const mounted = (world.inspectInfo.Mounts ?? []).some(mount => mount.Type === 'volume' && mount.Name === name && mount.Destination === target)
    return { name, target, tmpfs: mounted && info?.Driver === 'local' && info.Options?.type === 'tmpfs' }
  }))
  return { noNewPrivileges: nnp === '1', interfaces, scratch: volumes }
}
