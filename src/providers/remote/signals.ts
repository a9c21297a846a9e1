/**
 * Signal names of a world's wait statuses. Linux numbers its signals the same on x86_64 and
 * aarch64 (asm-generic/signal.h; x86 follows it for 1-31), the two architectures this package
 * carries world tools for, so this host's table names a world's numbers too.
 * @module dsh-remote-worlds/providers/remote/signals
 */
import { constants as osConstants } from 'node:os'

/** The name of signal `number` (`SIGKILL` for 9), or undefined for a number the table lacks. */
export function signalName(number: number): NodeJS.Signals | undefined {
  for (const [name, value] of Object.entries(osConstants.signals)) if (value === number) return name as NodeJS.Signals
  return undefined
}
