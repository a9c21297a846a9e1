/**
 * The pwsh dialect of the UNCHANGED upstream terminal-bash on a remote world (issue 13), as a
 * world-neutral suite over openWorld with the default settle tuning: a silence settle takes
 * 3 s, so a `stdin_read` under a second comes from the stdin-wait proof. PowerShell's line
 * editor (PSReadLine) re-renders the input line on every key; under terminal-bash's TERM=dumb
 * the terminal has no cursor motion, so the echo of a send shows as growing prefixes
 * (`RRead-HoRead-Host...`). Outputs are therefore read after the line that ends with the command.
 */
import { expect, it } from 'vitest'
import type { RemoteWorld, TimedSendResult, WorldTerminal } from '../../src/backend/world.ts'
import { sessionLeftovers } from '../../src/cli/run.ts'
import { waitForOutput } from '../docker/helpers.ts'
import { type AssemblyCode, assemblyCode } from './ready-to-run.ts'

/** Opens a composed world whose terminals run pwsh (the caller disposes it). */
export type OpenPwshWorld = () => Promise<RemoteWorld>

/**
 * The lines a send printed after the echo of `text` (the first line ending with it: the output
 * may end with it too, as `ada` answering Read-Host), without blank lines and prompts.
 */
function printed(result: TimedSendResult, text: string): string[] {
  const lines = result.viewport.replace(/\r/g, '').split('\n')
  const echo = lines.findIndex(line => line.endsWith(text))
  return lines.slice(echo + 1).filter(line => line.trim() !== '' && line !== 'dsh> ')
}

/**
 * Send, expect the proven settle (the silence rule would give inferred_idle) and exactly these
 * printed lines; a failure names the whole viewport.
 */
async function expectOutput(terminal: WorldTerminal, text: string, lines: string[]): Promise<void> {
  const result = await terminal.send(text)
  const context = `${text}\n${JSON.stringify(result.viewport)}`
  expect(result.waitReason, context).toBe('stdin_read')
  expect(printed(result, text), context).toEqual(lines)
}

/**
 * The bytes of `file` under the directory of the world's `pwsh` (its PSHOME: the link on PATH
 * resolved), read by the world's own process half.
 * @throws Error unless the read exits 0.
 */
async function pshomeFile(world: RemoteWorld, file: string): Promise<Buffer> {
  const handle = world.runtime.spawn({
    argv: ['sh', '-c', 'exec cat "$(dirname "$(readlink -f "$(command -v pwsh)")")/$1"', 'sh', file],
    cwd: '/tmp',
    graceMs: 1_000,
    stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
  })
  const chunks: Buffer[] = []
  handle.stdout!.on('data', (chunk: Buffer) => chunks.push(chunk))
  handle.stderr!.resume()
  const [outcome] = await Promise.all([handle.done, new Promise(resolve => handle.stdout!.once('end', resolve))])
  if (outcome.exitCode !== 0) throw new Error(`reading ${file} under PSHOME exited ${JSON.stringify(outcome)}`)
  return Buffer.concat(chunks)
}

/** The assemblies every pwsh start runs (docker/ready-to-run.sh compiles them). */
const STARTUP_ASSEMBLIES = [
  'pwsh.dll',
  'System.Management.Automation.dll',
  'Microsoft.PowerShell.ConsoleHost.dll',
  'Microsoft.PowerShell.Commands.Utility.dll',
  'Modules/PSReadLine/Microsoft.PowerShell.PSReadLine.dll',
] as const

/**
 * Register the cases (call inside a `describe`).
 * @param open - opens a fresh world for each case.
 */
export function pwshCases(open: OpenPwshWorld): void {
  const withTerminal = (name: string, body: (terminal: WorldTerminal, world: RemoteWorld) => Promise<void>): void => {
    it(name, async () => {
      const world = await open()
      try {
        const terminal = await world.open({ cwd: '/tmp' })
        await body(terminal, world)
        if (terminal.status().kind === 'running') await terminal.close()
      } finally {
        await world.dispose()
      }
    })
  }

  it('the assemblies every pwsh start runs are ReadyToRun code in the world, not IL the start must JIT-compile', async () => {
    const world = await open()
    try {
      const kinds: Record<string, AssemblyCode> = {}
      for (const file of STARTUP_ASSEMBLIES) kinds[file] = assemblyCode(await pshomeFile(world, file))
      expect(kinds).toEqual(Object.fromEntries(STARTUP_ASSEMBLIES.map(file => [file, 'ReadyToRun'])))
    } finally {
      await world.dispose()
    }
  })

  withTerminal('Get-Location prints the working directory, and a variable persists to the next send', async terminal => {
    await expectOutput(terminal, 'Get-Location', ['Path', '----', '/tmp'])
    await expectOutput(terminal, '$x = 6 * 7; $x', ['42'])
    await expectOutput(terminal, '$x', ['42'])
  })

  withTerminal('the first send is a command of its own, not glued to terminal-bash\'s setup line', async terminal => {
    // `using` must come first in a script block: glued to the setup line it is refused.
    await expectOutput(terminal, 'using namespace System.Text', [])
    await expectOutput(terminal, "[StringBuilder]::new('ok').ToString()", ['ok'])
  })

  it('three pwsh terminals started at once each run their first sends apart', async () => {
    const worlds = await Promise.all([open(), open(), open()])
    try {
      await Promise.all(worlds.map(async world => {
        const terminal = await world.open({ cwd: '/tmp' })
        await expectOutput(terminal, "'x'", ['x'])
        await expectOutput(terminal, "'BBB'", ['BBB'])
        await terminal.close()
      }))
    } finally {
      await Promise.all(worlds.map(world => world.dispose()))
    }
  })

  withTerminal('Read-Host settles stdin_read, proven on the thread .NET reads the console with; the next send answers it', async terminal => {
    const asked = await terminal.send("Read-Host 'name'")
    expect(asked.waitReason).toBe('stdin_read')
    expect(asked.viewport.endsWith('name: ')).toBe(true)
    await expectOutput(terminal, 'ada', ['ada'])
  })

  withTerminal('Start-Sleep 30 cancelled returns to the prompt by a real SIGINT to the foreground group', async terminal => {
    const sleeping = terminal.startSend('Start-Sleep 30')
    // PSReadLine ends the line it accepted with a newline: Start-Sleep runs then, not before (a
    // SIGINT while the line is still being typed would cancel the line instead).
    await waitForOutput(sleeping, 'Start-Sleep 30\n', 15_000)
    expect(sleeping.cancel()).toBe(true)
    // At the prompt: Start-Sleep would have kept the send to the 30 s timeout otherwise.
    expect((await sleeping.done).waitReason).toBe('stdin_read')
    await expectOutput(terminal, '"status=$?"', ['status=False'])
  })

  withTerminal('UTF-8 output is intact', async terminal => {
    await expectOutput(terminal, "'中文 ok'", ['中文 ok'])
  })

  withTerminal('a native child reading the terminal (bash -c \'read x; echo got-$x\') settles stdin_read; the next send reaches it', async terminal => {
    await expectOutput(terminal, "bash -c 'read x; echo got-$x'", [])
    await expectOutput(terminal, 'hello', ['got-hello'])
  })

  withTerminal('exit 3 ends the session with status 3', async terminal => {
    const result = await terminal.send('exit 3')
    expect(result.waitReason).toBe('session_exit')
    expect(result.sessionStatus).toEqual({ kind: 'exited', exitCode: 3, signal: null })
  })

  withTerminal('close ends pwsh and a native program it started in the background: nothing of the session is left', async (terminal, world) => {
    await expectOutput(terminal, '$p = Start-Process -PassThru sleep 100; "started=$($p.HasExited)"', ['started=False'])
    const shell = terminal.pid!
    expect((await sessionLeftovers(world, shell)).length).toBeGreaterThanOrEqual(2)
    await terminal.close()
    expect(await sessionLeftovers(world, shell)).toEqual([])
  })
}
