/**
 * The text semantics of `ctx.fs`, the same in every world: UTF-8 only, binary rejection, line
 * endings, and the literal edit. Pure. The rules are upstream's (`@deepseek-ai/dsh-fs-local`,
 * src/fsio.ts at 0.1.0-rc.8), so a file reads, edits and diffs alike through this package and
 * through the local provider:
 * - a NUL byte in the first 8192 bytes is a binary file (`readText`, `streamText`); `editText`
 *   rejects a NUL anywhere;
 * - bytes that are not valid UTF-8 are `FS_NOT_TEXT` (a fatal decoder);
 * - CRLF is normalized to LF for edits and diffs; a file is CRLF when, in its first 4096
 *   characters, CRLF pairs outnumber lone LFs, and an edit writes it back so;
 * - an edit's old text must be non-empty and match literally (after CRLF normalization), once
 *   unless `replaceAll`.
 * @module dsh-remote-worlds/files/text
 */
import { TextDecoder } from 'node:util'
import { FsError } from '@deepseek-ai/dsh-fs'

/** Bytes examined for a NUL by text reads. */
export const BINARY_SAMPLE_BYTES = 8192

/** Line ending style of a file. */
export type LineEndings = 'LF' | 'CRLF'

/** `cannot VERB "PATH": binary file` (FS_NOT_TEXT). */
export function binaryFileError(verb: 'read' | 'edit', displayPath: string): FsError {
  return new FsError(`cannot ${verb} "${displayPath}": binary file`, 'FS_NOT_TEXT')
}

/** `cannot VERB "PATH": invalid UTF-8 text` (FS_NOT_TEXT). */
export function invalidUtf8Error(verb: 'read' | 'edit', displayPath: string): FsError {
  return new FsError(`cannot ${verb} "${displayPath}": invalid UTF-8 text`, 'FS_NOT_TEXT')
}

/**
 * Decode a whole file as UTF-8.
 * @param sampleOnly - true: a NUL counts only within the first {@link BINARY_SAMPLE_BYTES} (reads); false: anywhere (edits).
 * @throws FsError FS_NOT_TEXT for a binary file or invalid UTF-8; FS_TOO_LARGE for text longer
 *   than a JavaScript string (V8: 2^29 - 24 UTF-16 units).
 */
export function decodeText(bytes: Uint8Array, verb: 'read' | 'edit', displayPath: string, sampleOnly: boolean): string {
  const scanned = sampleOnly ? bytes.subarray(0, BINARY_SAMPLE_BYTES) : bytes
  if (scanned.includes(0)) throw binaryFileError(verb, displayPath)
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch (error) {
    // A fatal decoder throws TypeError for invalid bytes; anything else (a RangeError: the text
    // is longer than a JavaScript string can be) is not the file's fault.
    if (!(error instanceof TypeError)) throw new FsError(`cannot ${verb} "${displayPath}": ${bytes.length} bytes of text are more than one string can hold (${(error as Error).message}); stream it`, 'FS_TOO_LARGE', { cause: error })
    throw invalidUtf8Error(verb, displayPath)
  }
}

/**
 * A streaming decoder for `streamText`: a multibyte character cut between chunks decodes whole,
 * and the binary sample spans chunks.
 */
export class TextStreamDecoder {
  private readonly decoder = new TextDecoder('utf-8', { fatal: true })
  private sampled = 0

  constructor(private readonly displayPath: string) {}

  /**
   * Decode one chunk, or the end (`undefined`).
   * @throws FsError FS_NOT_TEXT for a NUL in the sample or invalid UTF-8 (also an incomplete
   *   character at the end).
   */
  decode(chunk: Uint8Array | undefined): string {
    if (chunk !== undefined && this.sampled < BINARY_SAMPLE_BYTES) {
      const sample = chunk.subarray(0, BINARY_SAMPLE_BYTES - this.sampled)
      if (sample.includes(0)) throw binaryFileError('read', this.displayPath)
      this.sampled += sample.length
    }
    try {
      return chunk === undefined ? this.decoder.decode() : this.decoder.decode(chunk, { stream: true })
    } catch (error) {
      if (!(error instanceof TypeError)) throw error
      throw invalidUtf8Error('read', this.displayPath)
    }
  }
}

/** Every CRLF pair as LF; lone CR bytes stay. */
export function normalizeLineEndings(content: string): string {
  return content.replaceAll('\r\n', '\n')
}

/** The style of `raw`: CRLF when its first 4096 characters hold more CRLF pairs than lone LFs. */
export function detectLineEndings(raw: string): LineEndings {
  const sample = raw.slice(0, 4096)
  const crlf = sample.split('\r\n').length - 1
  const lf = sample.split('\n').length - 1 - crlf
  return crlf > lf ? 'CRLF' : 'LF'
}

/** LF-normalized text back in `lineEndings` (an existing CRLF is never doubled). */
export function restoreLineEndings(content: string, lineEndings: LineEndings): string {
  return lineEndings === 'LF' ? content : normalizeLineEndings(content).split('\n').join('\r\n')
}

function occurrences(content: string, needle: string): number {
  let count = 0
  for (let index = content.indexOf(needle); index !== -1; index = content.indexOf(needle, index + needle.length)) count += 1
  return count
}

/**
 * Apply a literal replacement to LF-normalized content.
 * @returns the edited content (LF-normalized) and how many occurrences were replaced.
 * @throws FsError FS_EDIT_NOT_FOUND for an empty or absent old text; FS_AMBIGUOUS_EDIT for
 *   several matches without `replaceAll`.
 */
export function applyLiteralEdit(content: string, oldString: string, newString: string, replaceAll: boolean, displayPath: string): { content: string; replacements: number } {
  const oldText = normalizeLineEndings(oldString)
  if (oldText.length === 0) throw new FsError('old_string must be a non-empty string', 'FS_EDIT_NOT_FOUND')
  const newText = normalizeLineEndings(newString)
  const replacements = occurrences(content, oldText)
  if (replacements === 0) throw new FsError(`old_string was not found in "${displayPath}"`, 'FS_EDIT_NOT_FOUND')
  if (!replaceAll && replacements > 1) {
    throw new FsError(`old_string matched ${replacements} times in "${displayPath}"; provide a more specific old_string or set replace_all to true`, 'FS_AMBIGUOUS_EDIT')
  }
  return { content: content.split(oldText).join(newText), replacements }
}

/**
 * A write's diff basis from the replaced file's bytes: its LF-normalized text, or null when it
 * is binary or not UTF-8 (the consumer then diffs the whole file), as upstream.
 */
export function diffBasis(bytes: Uint8Array): string | null {
  if (bytes.includes(0)) return null
  try {
    return normalizeLineEndings(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch {
    // Invalid UTF-8, or too long for a string: no basis (the consumer diffs the whole file).
    return null
  }
}
