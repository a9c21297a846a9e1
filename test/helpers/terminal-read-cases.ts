/**
 * Terminal reads beyond fd 0 (issue 10, item 1), as a world-neutral suite over openWorld with
 * terminal-bash's DEFAULT tuning: a silence settle takes 3 s there, so `stdin_read` can only
 * come from the stdin-wait proof. Password prompts, pagers and editors read the terminal
 * through `/dev/tty` on a descriptor other than 0; each must settle `stdin_read`, and the next
 * send must reach it.
 */
import { expect, it } from 'vitest'
import type { RemoteWorld, TimedSendResult, WorldTerminal } from '../../src/backend/world.ts'

/** Opens a composed world whose user can write /tmp (the caller disposes it). */
export type OpenTestWorld = () => Promise<RemoteWorld>

/** Send and expect the proof-based settle; returns the result for its output. */
async function expectStdinRead(terminal: WorldTerminal, text: string, options: { submit?: boolean } = {}): Promise<TimedSendResult> {
  const result = await terminal.send(text, options)
  expect(result.waitReason, `${text}\n${JSON.stringify(result.viewport)}`).toBe('stdin_read')
  return result
}

/**
 * Register the cases (call inside a `describe`).
 * @param open - opens a fresh world for each case.
 */
export function terminalReadCases(open: OpenTestWorld): void {
  const withTerminal = (name: string, body: (terminal: WorldTerminal) => Promise<void>): void => {
    it(name, async () => {
      const world = await open()
      try {
        const terminal = await world.open({ cwd: '/tmp' })
        await body(terminal)
        await terminal.close()
      } finally {
        await world.dispose()
      }
    })
  }

  withTerminal('a getpass() prompt, reading /dev/tty, settles stdin_read and the next send answers it', async terminal => {
    const asked = await expectStdinRead(terminal, `python3 -c 'import getpass; print("got", getpass.getpass())'`)
    expect(asked.viewport).toContain('Password:')
    const answered = await expectStdinRead(terminal, 'hunter2')
    expect(answered.viewport).toContain('got hunter2')
    expect(answered.viewport).not.toContain('hunter2\r\n')
  })

  withTerminal('the shell\'s own read on fd 3 of /dev/tty (exec 3</dev/tty; read -u 3 x) settles stdin_read', async terminal => {
    await expectStdinRead(terminal, 'exec 3</dev/tty; read -u 3 x')
    await expectStdinRead(terminal, 'typed-on-fd-3')
    const shown = await expectStdinRead(terminal, 'echo "x=$x"')
    expect(shown.viewport).toContain('x=typed-on-fd-3')
  })

  withTerminal('the shell\'s own read -p, and a second line into a cat that was already waiting, settle stdin_read', async terminal => {
    const asked = await expectStdinRead(terminal, "read -p 'name: ' n")
    expect(asked.viewport).toContain('name: ')
    await expectStdinRead(terminal, 'ada')
    expect((await expectStdinRead(terminal, 'echo "n=$n"')).viewport).toContain('n=ada')
    await expectStdinRead(terminal, 'cat')
    expect((await expectStdinRead(terminal, 'first-line')).viewport).toContain('first-line')
    expect((await expectStdinRead(terminal, 'second-line')).viewport).toContain('second-line')
  })

  withTerminal('less on a file settles stdin_read; q returns to the prompt', async terminal => {
    await expectStdinRead(terminal, 'seq 1 100 > lines.txt')
    // terminal-bash's TERM is dumb: less first asks for RETURN, then shows the page; each of its
    // reads is on /dev/tty (fd 3), never on its fd 0.
    const warned = await expectStdinRead(terminal, 'less lines.txt')
    expect(warned.viewport).toContain('Press RETURN to continue')
    const paging = await expectStdinRead(terminal, '')
    expect(paging.viewport).toMatch(/^1\r?$/m)
    expect(paging.viewport).toMatch(/^20\r?$/m)
    await expectStdinRead(terminal, 'q', { submit: false })
    const after = await expectStdinRead(terminal, 'echo "after-$((6*7))"')
    expect(after.viewport).toContain('after-42')
  })

  withTerminal('git log through GIT_PAGER=less, and git commit with EDITOR=less, settle stdin_read', async terminal => {
    await expectStdinRead(terminal, 'cd "$(mktemp -d)" && git init -q && git -c user.name=a -c user.email=a@example.invalid commit -q --allow-empty -m first-commit-msg')
    const warned = await expectStdinRead(terminal, 'GIT_PAGER=less git log')
    expect(warned.viewport).toContain('Press RETURN to continue')
    // git's pager environment (LESS=FRX) quits after a page that fits: the prompt follows.
    const log = await expectStdinRead(terminal, '')
    expect(log.viewport).toContain('first-commit-msg')
    expect(log.viewport).toMatch(/dsh> $/)
    await expectStdinRead(terminal, 'EDITOR=less git -c user.name=a -c user.email=a@example.invalid commit --allow-empty')
    await expectStdinRead(terminal, '')
    await expectStdinRead(terminal, 'q', { submit: false })
    const aborted = await expectStdinRead(terminal, 'echo "git-status=$?"')
    expect(aborted.viewport).toContain('git-status=1')
    expect(terminal.read(0, 500).text).toContain('Aborting commit due to empty commit message')
  })

  withTerminal('git\'s credential prompt and ssh-keygen\'s passphrase prompt (both open /dev/tty; stdin is a pipe or unused) settle stdin_read', async terminal => {
    const user = await expectStdinRead(terminal, `printf 'protocol=https\\nhost=example.invalid\\n\\n' | git credential fill`)
    expect(user.viewport).toContain("Username for 'https://example.invalid':")
    const password = await expectStdinRead(terminal, 'someone')
    expect(password.viewport).toContain("Password for 'https://someone@example.invalid':")
    const filled = await expectStdinRead(terminal, 's3cret')
    expect(filled.viewport).toContain('username=someone')
    expect(filled.viewport).toContain('password=s3cret')
    const asked = await expectStdinRead(terminal, 'ssh-keygen -q -t ed25519 -f "$(mktemp -u)"')
    expect(asked.viewport).toContain('Enter passphrase')
    const again = await expectStdinRead(terminal, '')
    expect(again.viewport).toContain('Enter same passphrase again')
    await expectStdinRead(terminal, '')
  })

  withTerminal('sleep, a pipe reader, a socket reader and a reader of ANOTHER tty are never proven waiting', async terminal => {
    // Each runs far past the 3 s silence settle, until the SIGINT: a `sleep 3.5` may end first on
    // a loaded machine, and its prompt then settles the send.
    for (const text of [
      'sleep 30',
      'sleep 30 | sort',
      `python3 -c 'import socket; a, b = socket.socketpair(); a.recv(1)'`,
      `python3 -c 'import os, pty; master, slave = pty.openpty(); os.read(slave, 1)'`,
    ]) {
      const operation = terminal.startSend(text)
      const result = await operation.done
      expect(result.waitReason, text).toBe('inferred_idle')
      await terminal.signal('SIGINT')
      await expectStdinRead(terminal, 'true')
    }
  })
}
