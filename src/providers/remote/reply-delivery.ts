/**
 * When a terminal emulator's reply reaches the program. A real terminal writes its answer into
 * the PTY at once; when the program that asked does not read it (it printed the query and went
 * on: `printf '\e[6n'; ls`, `cat` of a file holding `\e[c`), the answer waits in the tty's
 * input queue and the shell's line editor reads it at the next prompt: the agent's next command
 * becomes `;1Recho ...`. So a reply is held until a member of the foreground group is PROVEN
 * blocked reading the terminal (the same stdin-wait probe a send's settle uses), and dropped when
 * the harness's prompt marker follows its query first (the program that asked has ended) or
 * when nothing read within {@link REPLY_HOLD_MS}.
 *
 * The shell waiting at its prompt is also "reading the terminal", and its prompt marker may still
 * be in flight when the probe answers (the output and the control channel are different paths).
 * So after a positive probe the output received so far is handed to the emulator and parsed
 * (`settle`) before the reply goes: a prompt marker in it drops the reply instead.
 *
 * A read that a reply is on its way to is not a wait for input: {@link ReplyDelivery.pending}
 * tells a probe to wait for the delivery, and which read the reply went into.
 * @module dsh-remote-worlds/providers/remote/reply-delivery
 */
import { setTimeout as delay } from 'node:timers/promises'

/** How long a reply waits for its program to read (ms); then nobody is going to. */
export const REPLY_HOLD_MS = 3_000
/** Interval of the stdin-wait probe while a reply is held (ms). */
export const REPLY_PROBE_INTERVAL_MS = 5
/** Time left for output already printed to arrive before a positive probe is believed (ms). */
const OUTPUT_IN_FLIGHT_MS = 5

/** What the delivery needs from its terminal. */
export interface ReplyPort {
  /**
   * The read a member of the foreground group is proven blocked in now (the probe's
   * `waitingCall`: thread, system call and times scheduled), or undefined when none is.
   */
  readingTerminal(): Promise<string | undefined>
  /** Hand the output received so far to the emulator and wait until it is parsed. */
  settle(): Promise<void>
  /** Write the reply to the PTY input. */
  write(data: string): Promise<void>
  /** False once the terminal ended or is terminating. */
  live(): boolean
}

/** The held replies of one terminal. */
export class ReplyDelivery {
  private held: string[] = []
  private running = false
  /** True from the moment held replies are taken for writing until the write returned. */
  private writing = false
  /** Settles when the current run ends, with the read its last write went into. */
  private delivered: PromiseWithResolvers<string | undefined> | undefined

  constructor(private readonly port: ReplyPort) {}

  /** True while a reply waits for its program to read. */
  get holding(): boolean {
    return this.held.length > 0
  }

  /** The emulator answered a query: deliver the answer once the program reads. */
  reply(data: string): void {
    this.held.push(data)
    if (!this.running) void this.run()
  }

  /** The harness's prompt marker followed: every held reply's program has ended. */
  prompt(): void {
    this.held = []
  }

  /**
   * Undefined when no reply is held or being written. Else a promise that resolves once none
   * is: with the read (a `waitingCall` of {@link ReplyPort.readingTerminal}) the last reply was
   * written into, or undefined when the held ones were dropped (a prompt followed, nobody read
   * within {@link REPLY_HOLD_MS}, the terminal ended). It never rejects.
   */
  pending(): Promise<string | undefined> | undefined {
    if (this.held.length === 0 && !this.writing) return undefined
    return this.delivered?.promise
  }

  private async run(): Promise<void> {
    this.running = true
    const delivered = Promise.withResolvers<string | undefined>()
    this.delivered = delivered
    let into: string | undefined
    const deadline = performance.now() + REPLY_HOLD_MS
    try {
      while (this.held.length > 0 && this.port.live()) {
        const reading = await this.port.readingTerminal().catch(() => undefined)
        if (reading !== undefined && this.held.length > 0) {
          this.writing = true
          try {
            await delay(OUTPUT_IN_FLIGHT_MS)
            await this.port.settle().catch(() => undefined)
            const data = this.held.join('')
            this.held = []
            if (data.length > 0 && this.port.live() && await this.port.write(data).then(() => true, () => false)) into = reading
          } finally {
            this.writing = false
          }
          continue
        }
        if (performance.now() > deadline) {
          this.held = []
          break
        }
        await delay(REPLY_PROBE_INTERVAL_MS)
      }
    } finally {
      this.running = false
      delivered.resolve(into)
    }
  }
}
