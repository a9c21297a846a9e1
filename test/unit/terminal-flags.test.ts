/**
 * The CLI's terminal flags (src/cli/target.ts): `--replies`, `--no-emulator` and `--scrollback`
 * become the runtime setting `terminal` of every kind of target; bad values and contradictions
 * are refused with InvalidArgumentError naming the flag.
 */
import { describe, expect, it } from 'vitest'
import { resolveTarget, terminalSettings } from '../../src/cli/target.ts'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'

describe('terminalSettings', () => {
  it('is undefined without terminal flags (commander sets emulator true without --no-emulator)', () => {
    expect(terminalSettings({})).toBeUndefined()
    expect(terminalSettings({ emulator: true })).toBeUndefined()
  })

  it('maps --replies and --scrollback', () => {
    expect(terminalSettings({ emulator: true, replies: 'off' })).toEqual({ replies: 'off' })
    expect(terminalSettings({ replies: 'answer', scrollback: '0' })).toEqual({ replies: 'answer', scrollback: 0 })
    expect(terminalSettings({ scrollback: '10000' })).toEqual({ scrollback: 10000 })
  })

  it('maps --no-emulator to emulator: false', () => {
    expect(terminalSettings({ emulator: false })).toEqual({ emulator: false })
  })

  it.each([
    [{ replies: 'yes' }, '--replies yes: use answer (the emulator answers the program\'s terminal queries) or off (nobody does)'],
    [{ scrollback: '10001' }, '--scrollback 10001: a number of lines from 0 to 10000'],
    [{ scrollback: '-1' }, '--scrollback -1: a number of lines from 0 to 10000'],
    [{ scrollback: '2.5' }, '--scrollback 2.5: a number of lines from 0 to 10000'],
    [{ scrollback: 'lots' }, '--scrollback lots: a number of lines from 0 to 10000'],
    [{ emulator: false, replies: 'off' }, '--replies and --scrollback configure the terminal emulator, and --no-emulator runs none: drop one or the other'],
    [{ emulator: false, scrollback: '10' }, '--replies and --scrollback configure the terminal emulator, and --no-emulator runs none: drop one or the other'],
  ])('refuses %j', (flags, message) => {
    expect(() => terminalSettings(flags)).toThrow(new InvalidArgumentError(message))
  })
})

describe('resolveTarget with terminal flags', () => {
  it('puts the setting into the runtime config of a managed container, an attached one and an SSH host', async () => {
    const flags = { replies: 'off', scrollback: '50' }
    const expected = { replies: 'off', scrollback: 50 }
    for (const target of await Promise.all([resolveTarget(flags), resolveTarget({ ...flags, docker: 'c1' }), resolveTarget({ ...flags, ssh: 'agent@example.invalid' })])) {
      expect((target.world.runtimeConfig as { terminal?: unknown }).terminal).toEqual(expected)
      expect(target.terminal).toEqual(expected)
    }
  })

  it('leaves the runtime config without terminal when no flag is given', async () => {
    const target = await resolveTarget({ docker: 'c1', emulator: true })
    expect(target.world.runtimeConfig).toEqual({ container: 'c1' })
    expect(target.terminal).toBeUndefined()
  })
})

describe('--shell', () => {
  it('pwsh sets terminal-bash\'s pwsh dialect and, for a managed container, the PowerShell image', async () => {
    const target = await resolveTarget({ shell: 'pwsh', user: 'agent', cwd: '/tmp' })
    expect(target.world.terminal).toEqual({ shellDialect: 'pwsh', shellPath: 'pwsh' })
    expect(target.world.runtimeConfig).toMatchObject({ image: 'dsh-remote-worlds/target-pwsh:bookworm', user: 'agent' })
    expect((await resolveTarget({ shell: 'bash', user: 'agent', cwd: '/tmp' })).world.terminal).toBeUndefined()
  })

  it('pwsh without replies is refused: PSReadLine waits for its cursor position report', async () => {
    await expect(resolveTarget({ shell: 'pwsh', replies: 'off' })).rejects.toThrow(InvalidArgumentError)
    await expect(resolveTarget({ shell: 'pwsh', emulator: false })).rejects.toThrow(/--shell pwsh needs the terminal to answer: .* with --no-emulator it never shows a prompt/)
  })
})
