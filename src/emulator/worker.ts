/**
 * The emulator worker: one xterm.js headless terminal per remote terminal of this process,
 * parsing PTY output off the main thread (where terminal-bash parses the same bytes), and
 * reporting replies, parse progress and screens back (protocol.ts).
 * Run as a worker_threads Worker by host.ts; loaded from TypeScript source by Node's type
 * stripping, so this file and what it imports are erasable TypeScript only.
 * @module dsh-remote-worlds/emulator/worker
 */
import { createRequire } from 'node:module'
import { parentPort } from 'node:worker_threads'
import xterm from '@xterm/headless'
import unicode11 from '@xterm/addon-unicode11'
import type { HostMessage, WorkerMessage } from './protocol.ts'
import { installReplies } from './replies.ts'
import { readScreen } from './screen.ts'

const port = parentPort
if (port === null) throw new Error('emulator/worker.ts runs only as a worker thread (see emulator/host.ts)')

const headlessVersion: string = createRequire(import.meta.url)('@xterm/headless/package.json').version
/** The XTVERSION answer: the emulator that keeps the state, and its version. */
const XTVERSION = `xterm.js(${headlessVersion})`

const terminals = new Map<number, InstanceType<typeof xterm.Terminal>>()
const post = (message: WorkerMessage): void => port.postMessage(message)

/**
 * The harness's prompt marker: terminal-bash prints OSC 133 ; D ; status before every prompt
 * (its PROMPT_COMMAND, and its pwsh prompt function), as shells do for FinalTerm's semantic
 * prompts.
 */
const PROMPT_MARKER_OSC = 133

function open(message: Extract<HostMessage, { op: 'open' }>): void {
  const terminal = new xterm.Terminal({
    rows: message.rows,
    cols: message.cols,
    scrollback: message.scrollback,
    allowProposedApi: true,
    logLevel: 'off',
    // CSI 18 t, the text area size in characters; the pixel reports stay off (no pixels here).
    windowOptions: { getWinSizeChars: true },
  })
  // Cell widths of Unicode 11 (emoji such as U+2705 are two cells), as glibc's wcwidth and
  // current terminals count them; xterm.js defaults to Unicode 6 widths.
  terminal.loadAddon(new unicode11.Unicode11Addon())
  terminal.unicode.activeVersion = '11'
  installReplies(terminal, XTVERSION)
  if (message.replies) terminal.onData(data => post({ op: 'reply', id: message.id, data }))
  // In order with the replies: the host drops a reply a prompt followed (host.ts, ReplyDelivery).
  terminal.parser.registerOscHandler(PROMPT_MARKER_OSC, data => {
    if (data.startsWith('D')) post({ op: 'prompt', id: message.id })
    return false
  })
  terminals.set(message.id, terminal)
}

port.on('message', (message: HostMessage) => {
  if (message.op === 'open') {
    open(message)
    return
  }
  const terminal = terminals.get(message.id)
  if (terminal === undefined) return
  try {
    switch (message.op) {
      case 'write': {
        const bytes = message.data.byteLength
        terminal.write(message.data, () => post({ op: 'parsed', id: message.id, bytes }))
        return
      }
      case 'sync':
        terminal.write('', () => post({ op: 'synced', id: message.id, request: message.request }))
        return
      case 'resize':
        terminal.resize(message.cols, message.rows)
        return
      case 'screen':
        // The callback runs once everything written before it is parsed.
        terminal.write('', () => post({ op: 'screen', id: message.id, request: message.request, screen: readScreen(terminal, message.scrollback) }))
        return
      case 'close':
        terminal.dispose()
        terminals.delete(message.id)
        return
    }
  } catch (error) {
    post({ op: 'failed', id: message.id, ...(message.op === 'screen' || message.op === 'sync' ? { request: message.request } : {}), message: (error as Error).message })
  }
})

post({ op: 'ready', id: 0 })
