/**
 * The terminal protocol in remote worlds (issue 12), as a world-neutral suite over openWorld:
 * the emulator at the far end of the PTY answers the program's terminal queries from its own
 * state, and shows the screen of full-screen and redrawing programs. terminal-bash runs with
 * its default settle tuning (a silence settle takes 3 s, so `stdin_read` comes from the
 * stdin-wait proof) and a 24-row terminal, so screens are small enough to state exactly.
 */
import { createRequire } from 'node:module'
import { expect, it } from 'vitest'
import type { RemoteWorld, TimedSendResult, WorldTerminal } from '../../src/backend/world.ts'
import type { TerminalScreen } from '../../src/emulator/screen.ts'
import type { TerminalEmulatorSettings } from '../../src/emulator/settings.ts'
import { RemoteSubprocessRuntime } from '../../src/providers/remote/runtime.ts'
import type { RemoteTerminalHandle } from '../../src/providers/remote/terminal.ts'
import { waitFor } from '../docker/helpers.ts'

/**
 * Opens a composed world with 24x160 terminals (the width is terminal-bash's default; at TERM=dumb
 * readline scrolls a command line longer than the width sideways) with these emulator settings;
 * the caller disposes it.
 */
export type OpenProtocolWorld = (settings?: TerminalEmulatorSettings) => Promise<RemoteWorld>

const XTERM_VERSION: string = createRequire(import.meta.url)('@xterm/headless/package.json').version

/** Send and expect the proof-based settle; returns the result for its output. */
async function expectStdinRead(terminal: WorldTerminal, text: string, options: { submit?: boolean } = {}): Promise<TimedSendResult> {
  const result = await terminal.send(text, options)
  expect(result.waitReason, `${text}\n${JSON.stringify(result.viewport)}`).toBe('stdin_read')
  return result
}

/**
 * The lines a send printed: what follows the last echo of its command line (readline may
 * redraw it, after a SIGWINCH say), without blank lines and the prompt that followed.
 */
function printed(result: TimedSendResult, text: string): string[] {
  const lines = result.viewport.replace(/\r/g, '').split('\n')
  const echo = lines.findLastIndex(line => line.endsWith(text))
  return lines.slice(echo + 1).filter(line => line.trim() !== '' && line !== 'dsh> ')
}

/** Send, expect the proof-based settle, and return what the send printed. */
async function run(terminal: WorldTerminal, text: string): Promise<string[]> {
  return printed(await expectStdinRead(terminal, text), text)
}

/**
 * Poll the screen (every 20 ms, at most 5 s) until `done` holds; returns that screen. A send that
 * settles on a program's proven terminal read learns of the read over the control channel,
 * while what the program drew before it travels the PTY's stream: it may arrive a moment later.
 */
async function screenWhen(terminal: WorldTerminal, done: (screen: TerminalScreen) => boolean): Promise<TerminalScreen> {
  let screen = await terminal.screen()
  for (let i = 0; i < 250 && !done(screen); i++) {
    await new Promise(resolve => setTimeout(resolve, 20))
    screen = await terminal.screen()
  }
  return screen
}

/** Our handle of a WorldTerminal (for what the seam does not carry: a harness's own writes). */
function handleOf(world: RemoteWorld, terminal: WorldTerminal): RemoteTerminalHandle {
  if (!(world.runtime instanceof RemoteSubprocessRuntime)) throw new Error('not a remote runtime')
  const handle = world.runtime.terminal(terminal.pid!)
  if (handle === undefined) throw new Error(`no live terminal ${terminal.pid}`)
  return handle
}

/**
 * Register the cases (call inside a `describe`).
 * @param open - opens a fresh world for each case.
 */
export function terminalProtocolCases(open: OpenProtocolWorld): void {
  const withTerminal = (name: string, body: (terminal: WorldTerminal, world: RemoteWorld) => Promise<void>, settings?: TerminalEmulatorSettings): void => {
    it(name, async () => {
      const world = await open(settings)
      try {
        const terminal = await world.open({ cwd: '/tmp' })
        await body(terminal, world)
        await terminal.close()
      } finally {
        await world.dispose()
      }
    })
  }

  withTerminal('a cursor position query is answered at once, and the next send reaches the shell (the issue\'s input)', async terminal => {
    const text = `printf '\\033[6n'; read -rs -d R pos; echo "got \${#pos}"`
    // stdin_read at the prompt, with the answer printed: not the 3 s silence settle (inferred_idle).
    const asked = await expectStdinRead(terminal, text)
    expect(printed(asked, text)).toEqual(['got 5'])
    expect(await run(terminal, 'echo after')).toEqual(['after'])
  })

  withTerminal('the cursor position report says where the cursor is (DSR 6 after CUP 5;7)', async terminal => {
    await run(terminal, `printf '\\033[2J\\033[5;7H\\033[6n'; read -rs -d R pos; printf '\\033[12;1Hpos=%s\\n' "\${pos#*[}"`)
    expect((await terminal.screen()).lines[11]).toBe('pos=5;7')
  })

  withTerminal('DSR 5, DA1, DA2, DECRQM, XTVERSION and CSI 18 t are answered from the emulator', async terminal => {
    const ask = async (query: string, delimiter: string): Promise<string> => {
      return (await run(terminal, `printf '${query}'; read -rs -d '${delimiter}' r; printf '%q\\n' "$r"`)).at(-1)!
    }
    expect(await ask('\\033[5n', 'n')).toBe("$'\\E[0'")
    expect(await ask('\\033[c', 'c')).toBe("$'\\E[?1;2'")
    expect(await ask('\\033[>c', 'c')).toBe("$'\\E[>0;276;0'")
    expect(await ask('\\033[?1049$p', 'y')).toBe("$'\\E[?1049;2$'")
    expect(await ask('\\033[?1049h\\033[?1049$p', 'y')).toBe("$'\\E[?1049;1$'")
    await expectStdinRead(terminal, "printf '\\033[?1049l'")
    expect(await ask('\\033[>q', '\\')).toBe(`$'\\EP>|xterm.js(${XTERM_VERSION})\\E'`)
    expect(await ask('\\033[18t', 't')).toBe("$'\\E[8;24;160'")
  })

  withTerminal('OSC 10, 11 and 4 report the colours, also after a program set and reset them', async terminal => {
    const ask = async (query: string): Promise<string> => {
      return (await run(terminal, `printf '\\033]${query}\\007'; read -rs -d $'\\a' r; printf '%q\\n' "$r"`)).at(-1)!
    }
    expect(await ask('10;?')).toBe("$'\\E]10;rgb:ffff/ffff/ffff'")
    expect(await ask('11;?')).toBe("$'\\E]11;rgb:0000/0000/0000'")
    expect(await ask('4;1;?')).toBe("$'\\E]4;1;rgb:cccc/0000/0000'")
    expect(await ask('4;196;?')).toBe("$'\\E]4;196;rgb:ffff/0000/0000'")
    await expectStdinRead(terminal, "printf '\\033]11;rgb:12/34/56\\007\\033]4;1;#00ff00\\007'")
    expect(await ask('11;?')).toBe("$'\\E]11;rgb:1212/3434/5656'")
    expect(await ask('4;1;?')).toBe("$'\\E]4;1;rgb:0000/ffff/0000'")
    await expectStdinRead(terminal, "printf '\\033]111\\007\\033]104\\007'")
    expect(await ask('11;?')).toBe("$'\\E]11;rgb:0000/0000/0000'")
    expect(await ask('4;1;?')).toBe("$'\\E]4;1;rgb:cccc/0000/0000'")
  })

  withTerminal('a resize reaches the program (SIGWINCH, stty size) and the size reports', async terminal => {
    await terminal.resize(30, 100)
    expect(await run(terminal, 'stty size')).toEqual(['30 100'])
    expect(await run(terminal, `printf '\\033[18t'; read -rs -d t r; printf '%q\\n' "$r"`)).toEqual(["$'\\E[8;30;100'"])
    const screen = await terminal.screen()
    expect([screen.rows, screen.cols]).toEqual([30, 100])
  })

  withTerminal('a query whose program never reads the answer is not answered into the prompt', async terminal => {
    await expectStdinRead(terminal, "printf '\\033[6n'")
    expect(await run(terminal, 'echo next')).toEqual(['next'])
    // The program went on with other work before the prompt (the answer is held until someone reads).
    await expectStdinRead(terminal, "printf '\\033[6n'; ls / >/dev/null")
    expect(await run(terminal, 'echo n2')).toEqual(['n2'])
    await expectStdinRead(terminal, "printf '\\033]11;?\\007'; sleep 0.05")
    expect(await run(terminal, 'echo n3')).toEqual(['n3'])
    // A file holding queries, printed by cat: cat never reads the terminal.
    await expectStdinRead(terminal, "printf '\\033[c\\033[6n' > queries.txt; cat queries.txt; ls /usr/bin | wc -l >/dev/null")
    expect(await run(terminal, 'echo n4')).toEqual(['n4'])
  })

  withTerminal('a program that reads the answer later (after other work) still gets it', async terminal => {
    expect(await run(terminal, `printf '\\033[6n'; sleep 0.5; read -t 2 -rs -d R pos; echo "late \${#pos}"`)).toEqual(['late 5'])
  })

  withTerminal('a harness\'s second answer to a query the emulator answered is dropped: the program reads one', async (terminal, world) => {
    // The reads are proven terminal reads, so the send settles while the second one waits.
    await expectStdinRead(terminal, `printf '\\033[6n'; read -rs -d R a; read -t 2 -rs -d R b; echo "first=\${#a} second-status=$?"`)
    // The harness answers too, after the emulator did (as a newer terminal-bash would).
    await handleOf(world, terminal).write('\x1b[9;9R')
    const screen = await screenWhen(terminal, current => current.lines.some(line => line.startsWith('first=')))
    expect(screen.lines[1]).toBe('first=5 second-status=142')
  })

  withTerminal('a read that the emulator\'s answer is on its way to is never reported as an input wait: a waiting probe comes after the program took its answer', async (terminal, world) => {
    // Each round asks, reads the answer, says so, then waits for a line: only that last read
    // waits for input (PSReadLine asks the cursor position as it draws a typed line, and a send
    // settled on that read as if pwsh waited for the next command).
    const ROUNDS = 15
    const result = await terminal.send(`for i in $(seq 1 ${ROUNDS}); do echo "ask-$i"; printf '\\033[6n'; read -rs -d R pos; echo "took-$i"; read -r line; done`)
    expect(result.waitReason).toBe('stdin_read')
    const handle = handleOf(world, terminal)
    const lastMarker = (screen: TerminalScreen): string | undefined => screen.lines.findLast(line => /^(ask|took)-\d+$/.test(line))
    for (let round = 1; round <= ROUNDS; round++) {
      // Printed after the last round's line wait returned: no probe below can see that wait.
      expect(lastMarker(await screenWhen(terminal, screen => lastMarker(screen) !== undefined && lastMarker(screen) !== `took-${round - 1}`)), `round ${round} began`).toMatch(new RegExp(`^(ask|took)-${round}$`))
      // Probes as fast as they come back, each one meeting the program wherever it is.
      let waiting = false
      for (let probes = 0; probes < 2_000 && !waiting; probes++) waiting = (await handle.inspectForeground())?.inputWaiting === true
      expect(waiting, `round ${round}: a probe proved the line wait`).toBe(true)
      // A probe's answer follows the output printed before the read it proves.
      expect(lastMarker(await terminal.screen()), `round ${round}: the read a probe proved`).toBe(`took-${round}`)
      await handle.write('\n')
    }
  })

  withTerminal('with replies off nothing answers: the read times out', async terminal => {
    // The read is a proven terminal read: the send settles while it waits for an answer.
    await expectStdinRead(terminal, `printf '\\033[6n'; read -t 1 -rs -d R pos; echo "status-$?"`)
    const screen = await screenWhen(terminal, current => current.lines[1] !== '')
    expect(screen.lines[1]).toBe('status-142')
  }, { replies: 'off' })

  withTerminal('with replies off a harness\'s own answer reaches the program', async (terminal, world) => {
    await expectStdinRead(terminal, `printf '\\033[6n'; read -t 5 -rs -d R pos; echo "pos=\${pos#*[}"`)
    await handleOf(world, terminal).write('\x1b[9;9R')
    const screen = await screenWhen(terminal, current => current.lines[1] !== '')
    expect(screen.lines[1]).toBe('pos=9;9')
  }, { replies: 'off' })

  withTerminal('without an emulator, screen() fails with SCREEN_UNAVAILABLE and nothing answers', async terminal => {
    await expect(terminal.screen()).rejects.toMatchObject({ name: 'ScreenUnavailableError', code: 'SCREEN_UNAVAILABLE' })
    await expectStdinRead(terminal, `printf '\\033[6n'; read -t 1 -rs -d R pos; echo "status-$?"`)
    // The read times out after its 1 s, then the status arrives (when, the machine says).
    expect(await waitFor(() => terminal.read(0, 50).text, text => text.includes('status-142'))).toContain('status-142')
  }, { emulator: false })

  withTerminal('less on a 100-line file shows lines 1..rows-1 and its prompt, on the alternate screen', async terminal => {
    await expectStdinRead(terminal, 'seq 1 100 > lines.txt')
    // terminal-bash sets TERM=dumb (line-oriented output); a full-screen program draws with a real TERM.
    await expectStdinRead(terminal, 'TERM=xterm-256color less lines.txt')
    const screen = await screenWhen(terminal, current => current.lines[23] === 'lines.txt')
    expect(screen).toEqual({
      rows: 24,
      cols: 160,
      cursor: { row: 23, col: 9 },
      altScreen: true,
      lines: [...Array.from({ length: 23 }, (_, i) => String(i + 1)), 'lines.txt'],
    })
    await expectStdinRead(terminal, 'q', { submit: false })
    expect((await screenWhen(terminal, current => !current.altScreen)).altScreen).toBe(false)
  })

  withTerminal('a resize while less shows the alternate screen redraws it at the new size', async terminal => {
    await expectStdinRead(terminal, 'seq 1 100 > lines.txt')
    await expectStdinRead(terminal, 'TERM=xterm-256color less lines.txt')
    await terminal.resize(30, 100)
    // less redraws on SIGWINCH: its prompt moves to the new last row.
    const screen = await screenWhen(terminal, current => current.lines[29] === ':')
    expect(screen).toEqual({
      rows: 30,
      cols: 100,
      cursor: { row: 29, col: 1 },
      altScreen: true,
      lines: [...Array.from({ length: 29 }, (_, i) => String(i + 1)), ':'],
    })
    await expectStdinRead(terminal, 'q', { submit: false })
  })

  withTerminal('a wide character and a cursor move: printf \'\\033[H\\033[2J✅ab\\033[1;3HZ\' shows ✅Zb on row 1', async terminal => {
    // The read keeps the prompt from drawing over the row while the screen is read.
    await expectStdinRead(terminal, `printf '\\033[H\\033[2J✅ab\\033[1;3HZ'; read -rs _`)
    const screen = await screenWhen(terminal, current => current.lines[0] === '✅Zb')
    expect(screen.lines[0]).toBe('✅Zb')
    expect(screen.lines.slice(1)).toEqual(Array.from({ length: 23 }, () => ''))
    expect(screen.cursor).toEqual({ row: 0, col: 3 })
    await expectStdinRead(terminal, '')
  })

  withTerminal('alternate screen, program killed with SIGKILL: altScreen stays true; rmcup brings back the intact normal buffer, reset clears it', async terminal => {
    await expectStdinRead(terminal, 'echo normal-marker')
    await expectStdinRead(terminal, `bash -c 'printf "\\033[?1049h\\033[Hin-alt"; read x'`)
    expect(await screenWhen(terminal, current => current.altScreen && current.lines.includes('in-alt'))).toMatchObject({ altScreen: true, lines: expect.arrayContaining(['in-alt']) })
    expect((await terminal.signal('SIGKILL')).delivered).toBe(true)
    await expectStdinRead(terminal, '')
    // The stdin-wait proof travels the control channel, bash's `Killed` the PTY's stream: under
    // load the proof can arrive first, so the screen is read until the report is there (2 s).
    // Where the report lands is not promised either: after `in-alt` on row 0, or on the next row
    // when the tty's echo of the empty send's newline comes first. That it is there, once, in
    // the alternate screen that still shows `in-alt`, is.
    const killed = (lines: readonly string[]): number => lines.filter(line => line.includes('Killed')).length
    let stale = await terminal.screen()
    for (const deadline = Date.now() + 2_000; killed(stale.lines) === 0 && Date.now() < deadline;) {
      await new Promise(resolve => setTimeout(resolve, 20))
      stale = await terminal.screen()
    }
    expect(stale.altScreen).toBe(true)
    expect(stale.lines[0]!.startsWith('in-alt')).toBe(true)
    expect(killed(stale.lines)).toBe(1)
    await expectStdinRead(terminal, 'TERM=xterm-256color tput rmcup')
    const restored = await terminal.screen()
    expect(restored.altScreen).toBe(false)
    expect(restored.lines.slice(0, 3)).toEqual(['dsh> echo normal-marker', 'normal-marker', `dsh> bash -c 'printf "\\033[?1049h\\033[Hin-alt"; read x'`])
    // reset sends RIS (ESC c): like xterm, a full reset clears the screen; the shell's prompt follows.
    await expectStdinRead(terminal, `bash -c 'printf "\\033[?1049h\\033[Hin-alt-again"; read x'`)
    await terminal.signal('SIGKILL')
    await expectStdinRead(terminal, '')
    await expectStdinRead(terminal, 'TERM=xterm-256color reset')
    const reset = await terminal.screen()
    expect(reset.altScreen).toBe(false)
    expect(reset.lines.filter(line => line !== '')).toEqual(['dsh>'])
  })

  withTerminal('a progress bar redrawn with \\r shows only its last state', async terminal => {
    await expectStdinRead(terminal, `for i in 1 2 3 4 5; do printf '\\rprogress %d/5' $i; sleep 0.05; done; echo`)
    const screen = await terminal.screen()
    expect(screen.lines.filter(line => line.includes('progress ') && !line.startsWith('dsh>'))).toEqual(['progress 5/5'])
  })

  withTerminal('vim (vim-tiny) draws its screen, and keys typed into it edit the file', async terminal => {
    await expectStdinRead(terminal, 'TERM=xterm-256color vi -u NONE notes.txt')
    const screen = await screenWhen(terminal, current => /^"notes.txt" \[New( File)?\]/.test(current.lines[23] ?? ''))
    expect(screen.altScreen).toBe(true)
    expect(screen.lines.slice(1, 23)).toEqual(Array.from({ length: 22 }, () => '~'))
    expect(screen.lines[23]).toMatch(/^"notes.txt" \[New( File)?\]/)
    await expectStdinRead(terminal, 'ihello from vim\x1b:wq\r', { submit: false })
    expect((await screenWhen(terminal, current => !current.altScreen)).altScreen).toBe(false)
    expect(await run(terminal, 'cat notes.txt')).toEqual(['hello from vim'])
  })

  withTerminal('screen({ scrollback }) returns the lines that scrolled off the top, oldest first', async terminal => {
    await expectStdinRead(terminal, 'seq 1 60')
    const screen = await terminal.screen({ scrollback: 5 })
    // 62 lines were written from the top row (the command, 60 numbers, the prompt) on 24 rows:
    // the command and 1..37 scrolled off.
    expect(screen.scrollback).toEqual(['33', '34', '35', '36', '37'])
    expect(screen.lines[0]).toBe('38')
    expect(screen.lines[23]).toBe('dsh>')
  })
}
