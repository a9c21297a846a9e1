/**
 * `dsh-remote-worlds/fs`: the filesystem half (`ctx.fs`) of the world of `ctx.subprocess`, for
 * either runtime of this package (mount `dsh-remote-worlds/docker` or `dsh-remote-worlds/ssh`
 * first). DSH's file tools (`@deepseek-ai/dsh-tool-fs`, `dsh-tool-str-replace-editor`,
 * `dsh-fs-observation-policy`) then read, write and edit where the shell runs, as its user and
 * inside its confinement (src/files/remote-file-system.ts). It replaces `dsh-fs-local`.
 *
 * Disposal closes the world's file servers (each also ends by itself when its client dies).
 * @module dsh-remote-worlds/plugins/fs
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import type { Context } from '@deepseek-ai/cordis'
import z from '@deepseek-ai/schemastery'
import { mountRemoteFileSystem } from '../files/remote-file-system.ts'
import { defined } from './defined.ts'

/** Cordis plugin name. */
export const name = 'dsh-remote-worlds-fs'

/** The world whose files these are. */
export const inject = ['subprocess']

/** Plugin config. */
export interface Config {
  /** Base of relative paths for calls without a session cwd (absolute, in the world; default: the sandbox policy's workspace root, else the user's HOME). */
  cwd?: string
  /** Exclusive byte limit of each side of a write's diff basis (default 10 MiB). */
  diffBasisMaxBytes?: number
  /** How long a file server may be silent with a request in flight before the request fails (ms, default 30 000). */
  silenceMs?: number
  /** What a write waits for before it is published: 'written' (default: its pages on the disk) or 'flushed' (an fsync too). */
  durability?: 'written' | 'flushed'
}

/** Schema of {@link Config}. */
export const Config: z<Config> = z.object({
  cwd: z.string().description('Base of relative paths for calls without a session cwd (an absolute path in the world; default: the workspace root, else HOME).'),
  diffBasisMaxBytes: z.natural().description('Exclusive byte limit of each side of a write\'s diff basis (default 10 MiB).'),
  silenceMs: z.natural().description('How long a file server may be silent with a request in flight before the request fails as frozen (ms, default 30000).'),
  durability: z.union(['written', 'flushed'] as const).description("What a write waits for before it is published: 'written' (default: its pages on the disk, so a host crash leaves the old file or the new one) or 'flushed' (an fsync too: the new content survives a power loss at once)."),
})

/**
 * Register `ctx.fs` over the world of `ctx.subprocess`.
 * @throws InvalidArgumentError when `ctx.subprocess` is not a runtime of this package.
 */
export async function apply(ctx: Context, config: Config = {}): Promise<void> {
  await mountRemoteFileSystem(ctx, defined(config))
}
