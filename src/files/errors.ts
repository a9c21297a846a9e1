/**
 * What the file server's refusals and a lost world mean in the `ctx.fs` vocabulary: the stable
 * `FsError` codes of `@deepseek-ai/dsh-fs`, with messages in upstream's shape
 * (`cannot read "PATH": not found`) plus the world's own reason.
 * @module dsh-remote-worlds/files/errors
 */
import { FsError, type FsErrorCode } from '@deepseek-ai/dsh-fs'
import { ServerLostError, ServerProtocolError, ServerRefusal } from './server-channel.ts'

/** The operation an error happened in, for its message and its code. */
export interface FsErrorContext {
  /** `read`, `write`, `list`, `resolve`, ... (the message's verb). */
  verb: string
  /** The path as shown to the model. */
  displayPath: string
  /** The code for ENOTDIR: FS_NOT_DIRECTORY when listing the path itself, else FS_NOT_FOUND (a parent is a file). */
  notDirectory?: FsErrorCode
}

const PERMISSION = new Set(['EACCES', 'EPERM', 'EROFS'])

/**
 * The `FsError` for a failure of one operation.
 * @param error - a {@link ServerRefusal}, a {@link ServerLostError}, an `FsError` (returned as
 *   it is), or anything else (the world could not be reached: FS_IO_ERROR naming why).
 */
export function fsErrorOf(error: unknown, context: FsErrorContext): FsError {
  if (error instanceof FsError) return error
  const target = `cannot ${context.verb} "${context.displayPath}"`
  if (error instanceof ServerRefusal) {
    const detail = error.message
    const code: FsErrorCode = (() => {
      switch (error.code) {
        case 'ENOENT': return 'FS_NOT_FOUND'
        case 'ENOTDIR': return context.notDirectory ?? 'FS_NOT_FOUND'
        case 'ELOOP': return 'FS_NOT_FOUND'
        case 'ENAMETOOLONG': return 'FS_NOT_FOUND'
        case 'NOTREG':
        case 'EISDIR': return 'FS_NOT_REGULAR_FILE'
        case 'TOOLARGE': return 'FS_TOO_LARGE'
        case 'STALE': return 'FS_STALE_VERSION'
        case 'EXISTS': return 'FS_NOT_OBSERVED'
        case 'OUTSIDE':
        case 'UNPROVEN': return 'FS_SANDBOX_DENIED'
        default: return PERMISSION.has(error.code) ? 'FS_PERMISSION_DENIED' : 'FS_IO_ERROR'
      }
    })()
    const reason = ((): string => {
      switch (code) {
        case 'FS_NOT_FOUND':
          if (error.code === 'ENOTDIR') return 'a parent path segment is not a directory'
          if (error.code === 'ELOOP') return 'too many levels of symbolic links (a symlink loop)'
          if (error.code === 'ENAMETOOLONG') return 'the path is too long'
          return 'not found'
        case 'FS_NOT_DIRECTORY': return 'not a directory'
        case 'FS_NOT_REGULAR_FILE': return 'not a regular file'
        case 'FS_PERMISSION_DENIED': return `permission denied (${detail})`
        case 'FS_STALE_VERSION': return detail.startsWith('the file no longer exists') ? 'file no longer exists' : 'file changed since it was read'
        case 'FS_NOT_OBSERVED': return 'the file exists; read it first'
        default: return detail
      }
    })()
    if (code === 'FS_NOT_OBSERVED') return new FsError(`cannot overwrite existing "${context.displayPath}" without reading it first`, code, { cause: error })
    return new FsError(`${target}: ${reason}`, code, { cause: error })
  }
  if (error instanceof ServerProtocolError) return new FsError(`${target}: the world's file server broke its protocol and was ended (${error.message})`, 'FS_IO_ERROR', { cause: error })
  if (error instanceof ServerLostError) return new FsError(`${target}: the world's file server was lost (${error.message})`, 'FS_IO_ERROR', { cause: error })
  return new FsError(`${target}: ${(error as Error)?.message ?? String(error)}`, 'FS_IO_ERROR', { cause: error })
}
