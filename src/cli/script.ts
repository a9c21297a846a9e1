/**
 * The `dsh-remote-worlds run --script` format: one send per line.
 *   TEXT                    send TEXT and Enter
 *   @raw TEXT               send TEXT without Enter
 *   @cancel-after MS TEXT   send TEXT and Enter, cancel the send after MS ms (a real SIGINT)
 *   @signal SIG             signal the foreground process group (SIGINT, SIGTERM, SIGKILL, SIGTSTP, SIGHUP)
 *   @screen                 show what the terminal shows now (its emulator's screen)
 *   # ...                   comment; blank lines are skipped
 * @module dsh-remote-worlds/cli/script
 */
import type { TerminalSignal } from '@deepseek-ai/dsh-terminal'
import { InvalidArgumentError } from '../providers/remote/errors.ts'

/** One step of a script. `line` is the 1-based source line. */
export type ScriptStep =
  | { kind: 'send'; text: string; submit: boolean; line: number }
  | { kind: 'cancel-after'; text: string; afterMs: number; line: number }
  | { kind: 'signal'; signal: TerminalSignal; line: number }
  | { kind: 'screen'; line: number }

const SIGNALS: readonly TerminalSignal[] = ['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGTSTP', 'SIGHUP']

/**
 * Parse a script.
 * @param source - the script text (UTF-8 decoded).
 * @returns the steps in order.
 * @throws InvalidArgumentError naming the line for an unknown directive, a bad delay or signal,
 *   or an argument given to `@screen`.
 */
export function parseScript(source: string): ScriptStep[] {
  const steps: ScriptStep[] = []
  const lines = source.split('\n')
  lines.forEach((raw, index) => {
    const line = index + 1
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    if (text.trim().length === 0 || text.startsWith('#')) return
    if (!text.startsWith('@')) {
      steps.push({ kind: 'send', text, submit: true, line })
      return
    }
    const space = text.indexOf(' ')
    const directive = space < 0 ? text : text.slice(0, space)
    const rest = space < 0 ? '' : text.slice(space + 1)
    switch (directive) {
      case '@raw':
        steps.push({ kind: 'send', text: rest, submit: false, line })
        return
      case '@cancel-after': {
        const match = /^(\d+) (.*)$/.exec(rest)
        if (match === null) throw new InvalidArgumentError(`script line ${line}: expected "@cancel-after MS TEXT"`)
        steps.push({ kind: 'cancel-after', afterMs: Number(match[1]), text: match[2]!, line })
        return
      }
      case '@signal': {
        const signal = rest.trim().toUpperCase()
        const name = (signal.startsWith('SIG') ? signal : `SIG${signal}`) as TerminalSignal
        if (!SIGNALS.includes(name)) throw new InvalidArgumentError(`script line ${line}: unsupported signal ${JSON.stringify(rest)} (use one of ${SIGNALS.join(', ')})`)
        steps.push({ kind: 'signal', signal: name, line })
        return
      }
      case '@screen':
        if (rest.trim().length > 0) throw new InvalidArgumentError(`script line ${line}: @screen takes no argument, got ${JSON.stringify(rest)}`)
        steps.push({ kind: 'screen', line })
        return
      default:
        throw new InvalidArgumentError(`script line ${line}: unknown directive ${directive}`)
    }
  })
  return steps
}
