/**
 * Plugin configs as cordis and the loader hand them over hold `undefined` and `null` for what a
 * user left out (a `!!js ... || undefined` row, an absent optional field); the runtimes' zod
 * configs are strict and refuse such keys.
 * @module dsh-remote-worlds/plugins/defined
 */

/** `value` without the keys whose value is undefined or null. */
export function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined && entry !== null)) as T
}
