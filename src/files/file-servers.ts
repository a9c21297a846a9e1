/**
 * The file servers of one world: one per confinement, started on first use and replaced when
 * one dies. A server runs exactly as the world's shells do under the same policy: as the
 * world's user, and, under a confined mode, inside what `ctx.sandbox.confine` wraps around it
 * (the container itself for Docker, bubblewrap over SSH). Servers whose confinement is the same
 * argv (a container enforcing both confined modes) are one.
 * @module dsh-remote-worlds/files/file-servers
 */
import { SESSION_TAG_VARIABLE } from '../providers/remote/ownership.ts'
import { shQuote } from '../providers/remote/quote.ts'
import type { WorldOwner } from '../providers/remote/world-owner.ts'
import { forgetWorldTool, installWorldTool } from '../providers/remote/world-tools/install.ts'
import { type WorldToolCopy, saysUnverifiedTool, worldToolCommand } from '../providers/remote/world-tools/launch.ts'
import { isWithin } from './paths.ts'
import { ServerChannel, ServerLostError } from './server-channel.ts'

/** Wraps the server's argv for a confined mode, or throws why it cannot (a SandboxUnavailableError). */
export type Confine = (argv: readonly string[]) => readonly string[]

/** The servers of one world (see the module comment). */
export class FileServers {
  private readonly servers = new Map<string, Promise<ServerChannel>>()
  private disposed = false

  /** @param options.silenceMs - see server-channel.ts `DEFAULT_SERVER_SILENCE_MS`. */
  constructor(private readonly owner: WorldOwner, private readonly options: { silenceMs?: number | undefined } = {}) {}

  /**
   * The server for a confinement and a role: `confine` undefined for an unconfined one
   * (danger-full-access), else the wrapper of the mode in question, whose confined programs get
   * `privateRoots` of their own (sandbox/layout.ts). Reads and writes have servers of their
   * own (each answers one request at a time): a write waiting for a directory lock, or a large
   * one streaming in, never holds up a read.
   *
   * Each start runs the copy only once it is proven the build this client shipped
   * (world-tools/launch.ts), inside the confinement. A server that ends before it starts (its
   * copy vanished: a restarted container, a cleared cache; or it was refused: a file planted in
   * its place) is copied in again and started once more.
   * @throws WorldToolUnavailableError when the server cannot be copied into the world, or a
   *   confined one would sit where the confinement hides it; whatever `confine` throws;
   *   ServerLostError when it does not start (with what it printed); the owner's errors.
   */
  async server(confine: Confine | undefined, privateRoots: readonly string[] = [], role: 'read' | 'write' = 'read'): Promise<ServerChannel> {
    if (this.disposed) throw new ServerLostError('the filesystem half of this world was closed')
    for (let attempt = 1; ; attempt += 1) {
      const copy = await installWorldTool(this.owner, 'dsh-fsd')
      const argv = confine === undefined ? [copy.path] : [...confine([copy.path])]
      if (confine !== undefined) {
        const hidden = privateRoots.find(root => isWithin(root, copy.path))
        if (hidden !== undefined) throw new Error(`the file server was copied to ${copy.path}, which the confinement of ${this.owner.describe()} hides (it gives confined programs a private ${hidden}); give the world's user a writable HOME`)
      }
      try {
        return await this.running(JSON.stringify([role, ...argv]), copy, confine)
      } catch (error) {
        if (attempt >= 2 || !(error instanceof ServerLostError) || !(error.message.includes('ended before it started') || saysUnverifiedTool(error.message))) throw error
        forgetWorldTool(this.owner, 'dsh-fsd')
      }
    }
  }

  /** The live server of `key`, started from `copy` when there is none (one start at a time). */
  private async running(key: string, copy: WorldToolCopy, confine: Confine | undefined): Promise<ServerChannel> {
    const existing = this.servers.get(key)
    if (existing !== undefined) {
      const channel = await existing.catch(() => undefined)
      if (channel?.alive === true) return channel
    }
    // Another caller may have replaced a dead one meanwhile: join it.
    const current = this.servers.get(key)
    if (current !== undefined && current !== existing) return current
    const started = this.start(copy, confine)
    this.servers.set(key, started)
    const forget = (): void => { if (this.servers.get(key) === started) this.servers.delete(key) }
    started.then(channel => channel.closed.then(forget), forget)
    return started
  }

  private async start(copy: WorldToolCopy, confine: Confine | undefined): Promise<ServerChannel> {
    // Tagged as a session of this client: should it ever outlive its client (it ends at its
    // stdin's EOF, which a client's death gives it), the next client's reaper ends it.
    const script = `${SESSION_TAG_VARIABLE}=${shQuote(this.owner.newTag())}; export ${SESSION_TAG_VARIABLE}
${worldToolCommand(copy, [], { wrap: confine })}`
    const transport = await this.owner.openProcess(script)
    // Kept (a little) for the message of a server that does not start: a missing copy, a
    // sandbox that refuses it.
    let stderr = ''
    transport.stderr.on('data', (chunk: Buffer) => { if (stderr.length < 2_000) stderr += chunk.toString('utf8') })
    const stdin = transport.stdin
    if (stdin === undefined) {
      transport.close()
      throw new Error(`${this.owner.describe()}: the file server's process has no stdin`)
    }
    return ServerChannel.open({ stdin, stdout: transport.stdout, close: () => transport.close() }, this.owner.describe(), { stderr: () => stderr, ...(this.options.silenceMs !== undefined ? { silenceMs: this.options.silenceMs } : {}) })
  }

  /** Close every server (each ends at its stdin's EOF). Idempotent. */
  async dispose(): Promise<void> {
    this.disposed = true
    const servers = [...this.servers.values()]
    this.servers.clear()
    for (const started of servers) (await started.catch(() => undefined))?.close()
  }
}
