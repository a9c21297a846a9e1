/**
 * A container's lifeline: its pid 1 (under the engine's init) reads stdin until EOF, and this
 * client holds that stdin through an attach made before the container starts. When the client
 * process ends, however it ends (SIGKILL and OOM included), the engine closes the attach, the
 * lifeline reads EOF and exits, the container stops, and `AutoRemove` removes it: nothing
 * remote depends on teardown code running. Used by managed Docker worlds and by the
 * testcontainers room.
 * @module dsh-remote-worlds/providers/docker/lifeline
 */
import type { Duplex } from 'node:stream'
import type Docker from 'dockerode'

/** The lifeline's loop as a POSIX sh fragment, for an entrypoint that starts a service first. */
export const LIFELINE_LOOP = 'while read -r _; do :; done'

/**
 * The lifeline program: reads stdin until EOF with shell builtins only, so any image with
 * /bin/sh can carry it.
 */
export const LIFELINE_COMMAND: readonly string[] = ['/bin/sh', '-c', LIFELINE_LOOP]

/**
 * The create options a lifeline needs (merge them last): the lifeline as entrypoint (or
 * `entrypoint`, which must end in {@link LIFELINE_LOOP} in the foreground), stdin open
 * for exactly one attach (`StdinOnce`: the engine closes it when that attach ends), and
 * `AutoRemove`, so the stopped container goes.
 */
export function lifelineCreateOptions(hostConfig: Docker.HostConfig | undefined, entrypoint: readonly string[] = LIFELINE_COMMAND): Pick<Docker.ContainerCreateOptions, 'Entrypoint' | 'Cmd' | 'OpenStdin' | 'StdinOnce' | 'AttachStdin' | 'Tty' | 'HostConfig'> {
  return {
    Entrypoint: [...entrypoint],
    Cmd: [],
    OpenStdin: true,
    StdinOnce: true,
    AttachStdin: true,
    Tty: false,
    HostConfig: { ...hostConfig, AutoRemove: true },
  }
}

/** Let the process exit while `stream` is open (a hijacked socket, or a stream wrapping one). */
export function unrefSocket(stream: Duplex): void {
  const socket = stream as Duplex & { unref?: () => void; socket?: { unref?: () => void } }
  if (typeof socket.unref === 'function') socket.unref()
  else socket.socket?.unref?.()
}

/**
 * Attach to a created (not yet started) container's stdin and keep the connection: the held end
 * of its lifeline. The socket is unref'd, so it never keeps this process alive, and errors on
 * it are ignored (the container's end is the engine's business).
 * @returns the attach stream; destroy it to end the container.
 * @throws the engine's error when the attach fails.
 */
export async function attachLifeline(container: Docker.Container): Promise<Duplex> {
  const lifeline = await container.attach({ stream: true, hijack: true, stdin: true, stdout: false, stderr: false }) as Duplex
  lifeline.on('error', () => undefined)
  unrefSocket(lifeline)
  return lifeline
}
