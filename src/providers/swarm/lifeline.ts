/**
 * A swarm world's lifeline: its task lives only while its client holds one exec stream on the
 * node's engine, however the client ends (SIGKILL, OOM, power loss).
 *
 * A managed Docker container reads its lifeline on pid 1's stdin, attached before it starts
 * (providers/docker/lifeline.ts); a swarm task starts on its node before any client can attach,
 * and a service has no StdinOnce, so that cannot work here. Instead:
 * - pid 1 (under the engine's init) makes a FIFO in /dev/shm (the engine's private tmpfs, there
 *   under every mode) and reads it until EOF: it blocks until a writer opens it;
 * - the client starts ONE exec on the node's engine with stdin attached that opens the FIFO
 *   for writing and then reads its own stdin until EOF ({@link LIFELINE_EXEC});
 * - when the client's connection closes (dispose, or the kernel closing a dead client's
 *   socket), the engine closes that exec's stdin, it exits, the FIFO has no writer left, pid 1
 *   reads EOF and exits, the kernel kills every process of the task's pid namespace, and the
 *   task is complete (restart policy none: nothing restarts it).
 *
 * Only shell builtins and mkfifo/sleep (coreutils) run. A process of the world that opens the
 * FIFO itself could keep pid 1 waiting after the client died; the reaper (reap.ts) does not
 * trust pid 1 for that reason: it asks the node's engine whether the lifeline EXEC still runs,
 * which nothing inside the task can fake.
 * @module dsh-remote-worlds/providers/swarm/lifeline
 */
import type { Duplex } from 'node:stream'
import { LIFELINE_LOOP, unrefSocket } from '../docker/lifeline.ts'

/** The FIFO between pid 1 and the lifeline exec; its name is also how the reaper knows the exec. */
export const LIFELINE_FIFO = '/dev/shm/dsh-world-lifeline'

/** pid 1's program: make the FIFO (0600, the task's user), wait for its writer, read until EOF. */
export const LIFELINE_ENTRYPOINT: readonly string[] = ['/bin/sh', '-c', `mkfifo -m 600 ${LIFELINE_FIFO} && exec <${LIFELINE_FIFO} && ${LIFELINE_LOOP}`]

/**
 * The lifeline exec: wait (at most 5 s) until pid 1 made the FIFO, hold it open for writing
 * (fd 3), and read stdin until EOF.
 */
export const LIFELINE_EXEC: readonly string[] = ['/bin/sh', '-c', `n=0; until [ -p ${LIFELINE_FIFO} ]; do n=$((n + 1)); [ "$n" -le 100 ] || exit 3; sleep 0.05; done; exec 3>${LIFELINE_FIFO}; ${LIFELINE_LOOP}`]

/** True when an exec's command (ExecInspect `ProcessConfig`) is a lifeline's. */
export function isLifelineExec(processConfig: { entrypoint?: string; arguments?: string[] } | undefined): boolean {
  return processConfig !== undefined && [processConfig.entrypoint, ...processConfig.arguments ?? []].join(' ') === LIFELINE_EXEC.join(' ')
}

/**
 * Hold the lifeline: its exec stream is unref'd (it never keeps this process alive) and errors on
 * it are ignored (the task's end is the engine's business).
 * @param start - starts {@link LIFELINE_EXEC} as the task's own user with stdin attached (the
 *   Docker world's `startExec`).
 * @returns the stream; destroy it to end the task.
 */
export async function holdLifeline(start: (cmd: string[]) => Promise<{ stream: Duplex }>): Promise<Duplex> {
  const { stream } = await start([...LIFELINE_EXEC])
  stream.on('error', () => undefined)
  // Output never comes; what the engine sends is read and dropped.
  stream.resume()
  unrefSocket(stream)
  return stream
}
