/**
 * The one POSIX quoting function every remote command line is built with.
 * @module dsh-remote-worlds/providers/remote/quote
 */
import { InvalidArgumentError } from './errors.ts'

/**
 * Quote one string as a single POSIX shell word: wrapped in single quotes, each embedded `'`
 * written as `'\''`. Inside single quotes no byte is special (POSIX.1-2017 XCU 2.2.2), so
 * `$`, backslashes, newlines, backquotes and any UTF-8 pass through unchanged.
 *
 * @param value - any string; the empty string becomes `''`.
 * @returns the quoted word.
 * @throws InvalidArgumentError when `value` contains NUL: no exec argument, environment entry
 *   or path can carry it, so it would be silently truncated remotely.
 */
export function shQuote(value: string, what = 'argument'): string {
  if (value.includes('\0')) throw new InvalidArgumentError(`${what} contains a NUL byte, which no remote process can receive: ${JSON.stringify(value)}`)
  return `'${value.replaceAll("'", `'\\''`)}'`
}

/**
 * Quote every element of an argv.
 * @param argv - program and arguments.
 * @returns the words joined by single spaces.
 * @throws InvalidArgumentError when an element contains NUL.
 */
export function shQuoteArgv(argv: readonly string[]): string {
  return argv.map(arg => shQuote(arg, 'argv element')).join(' ')
}

/** Environment names a POSIX `env` can set: no `=`, no NUL, not empty. */
const ENV_NAME = /^[^=\0]+$/

/**
 * Quote one `NAME=value` environment assignment for `env`.
 * @throws InvalidArgumentError for an empty name, a name containing `=`, or NUL anywhere.
 */
export function shQuoteEnvEntry(name: string, value: string): string {
  if (!ENV_NAME.test(name)) throw new InvalidArgumentError(`invalid environment variable name: ${JSON.stringify(name)}`)
  return shQuote(`${name}=${value}`, `environment entry ${name}`)
}
