/**
 * One answer per terminal query. The emulator answers a program's queries as soon as it parses
 * them; a harness on top that answers the same queries itself (newer terminal-bash releases
 * write replies through the terminal handle) would make the program read a second answer, which
 * it takes as typed input. The guard remembers the kinds of replies the emulator sent and drops
 * a reply of the same kind from the harness's next write, within a short window: a harness
 * answers right after it sees the query, before it writes anything else, so a write that carries
 * anything besides replies (typed text) ends the watch, and later text passes untouched.
 * @module dsh-remote-worlds/emulator/reply-guard
 */

/** How long an emulator reply makes a harness reply of its kind a duplicate (ms). */
export const DUPLICATE_REPLY_WINDOW_MS = 5_000

/**
 * Every reply shape the emulator sends (ctlseqs names), one alternative each:
 * CPR `CSI r ; c R` (and DECXCPR `CSI ? r ; c R`), DSR status `CSI 0 n`, DA1 `CSI ? ... c`,
 * DA2 `CSI > ... c`, DECRPM `CSI [?] mode ; value $ y`, XTVERSION `DCS > | text ST`, the OSC
 * colour reports `OSC 4 ; index ; rgb:...` and `OSC 10/11/12 ; rgb:...` (BEL or ST), and the
 * text area size `CSI 8 ; rows ; cols t`.
 */
const REPLY = /\x1b\[(\?)?\d+;\d+(?:;\d+)?R|\x1b\[0n|\x1b\[\?[\d;]*c|\x1b\[>[\d;]*c|\x1b\[(\??\d+);\d+\$y|\x1bP>\|[^\x1b\x07]*\x1b\\|\x1b\](4;\d+|1[0-2]);rgb:[0-9a-fA-F/]+(?:\x07|\x1b\\)|\x1b\[8;\d+;\d+t/g

/** The kind of a reply matched by {@link REPLY}: replies of one kind answer the same query. */
function kindOf(text: string, privateCpr: string | undefined, mode: string | undefined, osc: string | undefined): string {
  if (text.endsWith('R')) return privateCpr === '?' ? 'DECXCPR' : 'CPR'
  if (text.endsWith('n')) return 'DSR'
  if (text.endsWith('$y')) return `DECRPM ${mode}`
  if (text.startsWith('\x1bP')) return 'XTVERSION'
  if (text.startsWith('\x1b]')) return `OSC ${osc}`
  if (text.endsWith('t')) return 'WINSIZE'
  return text[2] === '?' ? 'DA1' : 'DA2'
}

/** Reply kinds the emulator sent, and when; a harness write of the same kind is dropped once. */
export class ReplyGuard {
  private answered: { kind: string; at: number }[] = []

  /** Record what the emulator sent (`reply` may hold several replies). */
  noteAnswered(reply: string, now = Date.now()): void {
    for (const match of reply.matchAll(REPLY)) this.answered.push({ kind: kindOf(match[0], match[1], match[2], match[3]), at: now })
  }

  /**
   * `input` without the replies that repeat one the emulator already sent (each such reply is
   * dropped once); anything else, typed text included, passes unchanged. A write that keeps
   * anything (typed text) ends the watch: nothing is dropped from later writes.
   */
  filter(input: string, now = Date.now()): string {
    this.answered = this.answered.filter(entry => now - entry.at <= DUPLICATE_REPLY_WINDOW_MS)
    if (this.answered.length === 0) return input
    const kept = !input.includes('\x1b') ? input : input.replace(REPLY, (text: string, privateCpr?: string, mode?: string, osc?: string) => {
      const kind = kindOf(text, privateCpr, mode, osc)
      const at = this.answered.findIndex(entry => entry.kind === kind)
      if (at < 0) return text
      this.answered.splice(at, 1)
      return ''
    })
    if (kept.length > 0) this.answered = []
    return kept
  }
}
