/**
 * Ordinary (non-PTY) processes in the SSH world: an exec channel whose stdout and stderr are
 * separate natively, as the world-neutral process handle's transport (remote/process.ts).
 * @module dsh-remote-worlds/providers/ssh/ssh-process
 */
import { TransportError } from '../remote/errors.ts'
import type { ProcessTransport } from '../remote/process.ts'
import type { SshExecChannel } from './exec-channel.ts'
import type { SshConnection, SshWorld } from './ssh-world.ts'

/**
 * Open a non-PTY exec channel running SCRIPT (the login shell runs it with -c, as for
 * terminals: the login shell must accept POSIX sh syntax; an extra `exec sh -c` would cost a
 * process start, ~1.3 ms of a ~9 ms round trip), on any pooled connection with a free slot (a
 * refused channel moves to another connection). The slot is released when the channel closes.
 * @param options.stdin - keep stdin open for the caller; otherwise it is closed at once (EOF).
 * @throws the connect errors; ChannelRefusedError after repeated refusals; TransportError.
 */
export async function openSshProcess(world: SshWorld, script: string, options: { stdin: boolean }): Promise<ProcessTransport> {
  let connection: SshConnection | undefined
  const opened = await world.withSlot(async lease => {
    connection = lease.connection
    return lease.exec(script)
  })
  return processTransport(opened, connection!, options.stdin)
}

/**
 * The process transport of an open exec channel.
 * @param stdin - keep stdin open for the caller; otherwise it is closed at once (EOF).
 */
export function processTransport({ channel, exited, closed }: SshExecChannel, connection: SshConnection, stdin: boolean): ProcessTransport {
  if (!stdin) channel.end()
  return {
    stdout: channel,
    stderr: channel.stderr,
    stdin: stdin ? channel : undefined,
    exited,
    exit: async () => {
      const outcome = await closed
      if (outcome !== undefined) return outcome
      throw new TransportError(`${connection.where}: lost the process: ${connection.alive ? 'the channel closed without an exit status' : connection.lossReason()}`)
    },
    close: () => {
      try { channel.close() } catch { /* the connection is gone */ }
    },
  }
}
