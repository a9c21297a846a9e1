/**
 * The `terminal` option of the Docker and SSH plugins (schemastery, as cordis validates plugin
 * configs), mirroring the runtimes' zod setting in src/emulator/settings.ts.
 * @module dsh-remote-worlds/plugins/terminal-setting
 */
import z from '@deepseek-ai/schemastery'
import type { TerminalEmulatorSettings } from '../emulator/settings.ts'
import { defined } from './defined.ts'

/** Schema of the plugins' `terminal` option: see {@link TerminalEmulatorSettings}. */
export const TerminalSetting: z<TerminalEmulatorSettings> = z.object({
  emulator: z.boolean().description('Keep an xterm.js emulator per terminal: answers terminal queries, shows the screen (default true).'),
  replies: z.union(['answer', 'off'] as const).description("Answer the program's terminal queries (cursor position, DA, colours, size): 'answer' (default) or 'off' for a harness that answers them itself."),
  scrollback: z.natural().max(10_000).description('Lines each emulator keeps above the viewport (default 200).'),
}).description('Each terminal\'s emulator (see the README, "The terminal at the far end").')

/**
 * The option as the runtime takes it: absent when nothing is set (the schema turns an absent
 * object option into `{}`), else only the keys that are set.
 */
export function terminalSetting(value: TerminalEmulatorSettings | undefined): { terminal?: TerminalEmulatorSettings } {
  const set = defined(value ?? {})
  return Object.keys(set).length > 0 ? { terminal: set } : {}
}
