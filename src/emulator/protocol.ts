/**
 * The messages between the emulator host (host.ts, in the client's main thread) and the
 * emulator worker (worker.ts). One worker serves every emulator of the process; `id` names
 * the emulator. Messages of one port arrive in order (worker_threads), so a `screen` request
 * is answered after every `write` posted before it.
 * @module dsh-remote-worlds/emulator/protocol
 */
import type { TerminalScreen } from './screen.ts'

/** Host to worker. */
export type HostMessage =
  | { op: 'open'; id: number; rows: number; cols: number; scrollback: number; replies: boolean }
  /** Bytes of the PTY output, in order. */
  | { op: 'write'; id: number; data: Uint8Array }
  | { op: 'resize'; id: number; rows: number; cols: number }
  | { op: 'screen'; id: number; request: number; scrollback: number }
  /** Answered (`synced`) once everything written before it is parsed. */
  | { op: 'sync'; id: number; request: number }
  | { op: 'close'; id: number }

/** Worker to host. */
export type WorkerMessage =
  /** The worker loaded its modules and takes messages (posted once, first). */
  | { op: 'ready'; id: 0 }
  /** A reply the emulator sends to the program (PTY input), e.g. a cursor position report. */
  | { op: 'reply'; id: number; data: string }
  /**
   * The output showed the harness's prompt marker (OSC 133 ; D), in order with `reply`: a reply
   * posted before it answered a query of a program that has ended by now.
   */
  | { op: 'prompt'; id: number }
  | { op: 'synced'; id: number; request: number }
  /** `bytes` more of the emulator's input were parsed (flow control). */
  | { op: 'parsed'; id: number; bytes: number }
  | { op: 'screen'; id: number; request: number; screen: TerminalScreen }
  | { op: 'failed'; id: number; request?: number; message: string }
