/**
 * Ordinary (non-PTY) processes in the SSH world: an exec channel whose stdout and stderr are
 * separate natively, as the world-neutral process handle's transport (remote/process.ts).
 * @module dsh-remote-worlds/providers/ssh/ssh-process
 */
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import type { ClientChannel } from 'ssh2'
import { TransportError } from '../remote/errors.ts'
import type { ProcessTransport } from '../remote/process.ts'
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
  const channel = await world.withSlot(async lease => {
    connection = lease.connection
    return lease.exec(script)
  })
  return processTransport(channel, connection!, options.stdin)
}

function processTransport(channel: ClientChannel, connection: SshConnection, stdin: boolean): ProcessTransport {
  let outcome: SubprocessOutcome | undefined
  const exited = Promise.withResolvers<SubprocessOutcome>()
  exited.promise.catch(() => undefined)
  channel.once('exit', (code: number | null, signal?: string) => {
    outcome = signal !== undefined && signal !== null
      ? { exitCode: null, signal: (signal.startsWith('SIG') ? signal : `SIG${signal}`) as NodeJS.Signals }
      : { exitCode: code ?? null, signal: null }
    exited.resolve(outcome)
  })
  channel.on('error', () => undefined)
  const closed = new Promise<void>(resolve => channel.once('close', () => {
    exited.reject(new TransportError(`${connection.where}: the channel closed without an exit status`))
    resolve()
  }))
  if (!stdin) channel.end()
  return {
    stdout: channel,
    stderr: channel.stderr,
    stdin: stdin ? channel : undefined,
    exited: exited.promise,
    exit: async () => {
      await closed
      if (outcome !== undefined) return outcome
      throw new TransportError(`${connection.where}: lost the process: ${connection.alive ? 'the channel closed without an exit status' : connection.lossReason()}`)
    },
    close: () => {
      try { channel.close() } catch { /* the connection is gone */ }
    },
  }
}
