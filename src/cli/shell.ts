/**
 * `dsh-remote-worlds shell`: an interactive persistent shell. Each line typed is one send; its output
 * streams as it arrives; Ctrl-C cancels the active send with a real SIGINT to the remote
 * foreground group; each send ends with its wait reason and time. A line that is exactly
 * `@screen` is not sent: it shows what the terminal shows (as `run`'s `@screen` step does).
 * @module dsh-remote-worlds/cli/shell
 */
import { createInterface } from 'node:readline'
import type { TerminalSendOperation } from '@deepseek-ai/dsh-terminal'
import type { WorldTerminal } from '../backend/world.ts'
import { describeScreen, framedScreen, screenOrReason } from './run.ts'

/** The typed line that shows the screen instead of being sent. */
export const SCREEN_COMMAND = '@screen'

/**
 * Write the terminal's screen to `output`: `@screen  40x160, cursor 3:7, normal screen` and
 * its lines framed `    | ` (run.ts `formatRecord`), or `! screen unavailable: REASON`.
 * @throws the terminal's errors other than ScreenUnavailableError.
 */
export async function printScreen(terminal: WorldTerminal, output: NodeJS.WritableStream): Promise<void> {
  const screen = await screenOrReason(terminal)
  output.write(typeof screen === 'string'
    ? `! screen unavailable: ${screen}\n`
    : `${[`${SCREEN_COMMAND}  ${describeScreen(screen)}`, ...framedScreen(screen)].join('\n')}\n`)
}

/**
 * Drive `terminal` from `input` until EOF, `exit` ending the shell, or a second Ctrl-C at the prompt.
 * @returns the shell's exit status when it exited, else undefined.
 */
export async function interactiveShell(terminal: WorldTerminal, input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<number | null | undefined> {
  const rl = createInterface({ input, output, prompt: '', terminal: (input as { isTTY?: boolean }).isTTY === true })
  let active: TerminalSendOperation | undefined
  let interruptedAtPrompt = false
  rl.on('SIGINT', () => {
    if (active !== undefined && active.cancel()) {
      output.write('^C (SIGINT sent to the foreground process group)\n')
      return
    }
    if (interruptedAtPrompt) {
      rl.close()
      return
    }
    interruptedAtPrompt = true
    output.write('\n(press Ctrl-C again or Ctrl-D to leave)\n')
  })
  output.write(terminal.motd)
  for await (const line of rl) {
    interruptedAtPrompt = false
    if (line === SCREEN_COMMAND) {
      await printScreen(terminal, output)
      continue
    }
    const started = performance.now()
    const operation = terminal.startSend(line)
    active = operation
    let echoStripped = false
    const pump = (): void => {
      let { delta } = operation.readOutput()
      if (!echoStripped && delta.length > 0) {
        // The PTY echoes the typed line; the user already sees it.
        if (delta.startsWith(`${line}\n`)) delta = delta.slice(line.length + 1)
        echoStripped = true
      }
      if (delta.length > 0) output.write(delta)
    }
    const timer = setInterval(pump, 30)
    try {
      const result = await operation.done
      pump()
      output.write(`\n[${result.waitReason}, ${Math.round(performance.now() - started)} ms]\n`)
      if (result.sessionStatus.kind === 'exited') {
        rl.close()
        return result.sessionStatus.exitCode
      }
    } finally {
      clearInterval(timer)
      active = undefined
    }
  }
  return undefined
}
