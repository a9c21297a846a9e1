/**
 * The agent-session-basic case (test/fixtures, a copy of ../shared/cases) through the real
 * `dsh-remote-worlds run --json` CLI, and its checks, shared by every world: each step must settle with
 * a wait reason the case allows and print what the case requires; after the session no process
 * of it may be left in the world.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect } from 'vitest'

interface Expectation { i: number; wait?: string[]; contains?: string; not_contains?: string; signal?: boolean; max_ms?: number; min_ms?: number }
/** One `--json` record of `dsh-remote-worlds run`. */
export interface StepRecord { i: number; text: string; waitReason?: string; output?: string; signal?: string; targetPgid?: number; sessionStatus?: { kind: string; exitCode?: number | null }; ms: number }

const root = fileURLToPath(new URL('../..', import.meta.url))
/** The handed case (bash), or its PowerShell equivalent (`--shell pwsh`). */
export type AgentSessionCase = 'basic' | 'pwsh'
const scriptOf = (name: AgentSessionCase): string => fileURLToPath(new URL(`../fixtures/agent-session-${name}.txt`, import.meta.url))
const expectationsOf = (name: AgentSessionCase): Expectation[] => JSON.parse(readFileSync(new URL(`../fixtures/agent-session-${name}.expect.json`, import.meta.url), 'utf8')) as Expectation[]
const expectations = expectationsOf('basic')

/**
 * Run the case with `dsh-remote-worlds run --script CASE --json` plus the target flags.
 * @param targetArgs - e.g. `['--user', 'agent', '--cwd', '/tmp']` or `['--ssh', 'agent@127.0.0.1:2222', ...]`.
 * @param name - the case: `basic` (bash) or `pwsh` (run with `--shell pwsh`).
 */
export async function runAgentSessionCase(targetArgs: readonly string[], name: AgentSessionCase = 'basic'): Promise<{ records: StepRecord[]; stderr: string }> {
  const shell = name === 'pwsh' ? ['--shell', 'pwsh'] : []
  const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'run', ...shell, ...targetArgs, '--script', scriptOf(name), '--json'], { cwd: root, maxBuffer: 64 << 20 })
  return { records: stdout.trim().split('\n').map(line => JSON.parse(line) as StepRecord), stderr }
}

/**
 * Bash prints a background job's "Terminated" notification between PROMPT_COMMAND (the OSC 133
 * marker) and PS1 when the job dies before bash reads its next line, so upstream terminal-bash
 * cannot see the prompt tail and falls back to the 3 s silence rule. This is bash's ordering,
 * not the provider's; it is the ONLY deviation tolerated, and only with its evidence in the output.
 */
function bashJobNotificationRace(expectation: Expectation, record: StepRecord): boolean {
  return expectation.i === 13 && record.waitReason === 'inferred_idle' && /\[1\]\+\s+Terminated\s+sleep 100\ndsh> $/.test(record.output ?? '')
}

/**
 * Each step's record against its expectation: the signal, the wait reason (unless `tolerated`
 * says this record is a known deviation), what the output must and must not contain.
 */
function checkSteps(records: readonly StepRecord[], expected: readonly Expectation[], tolerated: (expectation: Expectation, record: StepRecord) => boolean = () => false): void {
  expect(records.map(record => record.i)).toEqual(expected.map(expectation => expectation.i))
  for (const expectation of expected) {
    const record = records.find(candidate => candidate.i === expectation.i)!
    const context = `step ${expectation.i}: ${record.text}\n${JSON.stringify(record)}`
    if (expectation.signal === true) {
      expect(record.signal, context).toBe('SIGINT')
      continue
    }
    if (!tolerated(expectation, record)) expect(expectation.wait, context).toContain(record.waitReason)
    if (expectation.contains !== undefined) expect(record.output, context).toContain(expectation.contains)
    if (expectation.not_contains !== undefined) expect(record.output, context).not.toContain(expectation.not_contains)
  }
}

/** Check a run of the case against test/fixtures/agent-session-basic.expect.json and .expect.md. */
export function checkAgentSessionCase(records: readonly StepRecord[], stderr: string): void {
  checkSteps(records, expectations, bashJobNotificationRace)
  // Step 8's SIGINT reached cat's process group, not the shell's: the shell's group is its pid,
  // which the prompt-time probe reports; cat runs in its own group (job control).
  const signal = records.find(record => record.i === 8)!
  const shellPid = Number(/shell pid (\d+)/.exec(stderr)?.[1])
  expect(shellPid).toBeGreaterThan(0)
  expect(signal.targetPgid).toBeGreaterThan(0)
  expect(signal.targetPgid).not.toBe(shellPid)
  // Step 7's text reached cat and came back: cat, not bash, echoed it a second time.
  expect(records.find(record => record.i === 7)!.output!.split('line typed into cat').length - 1).toBe(2)
  // Step 14: the forged marker printed by a foreground program did not settle the send early.
  expect(records.find(record => record.i === 14)!.output).toMatch(/after-fake-2\n/)
  // Step 17: the session ended with the shell's own status.
  expect(records.find(record => record.i === 17)!.sessionStatus).toEqual({ kind: 'exited', exitCode: 3, signal: null })
  expect(stderr).toContain('# closed: nothing of the session is left running')
}

/**
 * Check a run of the pwsh equivalent against test/fixtures/agent-session-pwsh.expect.json, and
 * what differs from bash by design: pwsh keeps native programs in its own process group (no job
 * control), so step 8's SIGINT goes to the shell's group, which cat is in.
 */
export function checkPwshAgentSessionCase(records: readonly StepRecord[], stderr: string): void {
  checkSteps(records, expectationsOf('pwsh'))
  const shellPid = Number(/shell pid (\d+)/.exec(stderr)?.[1])
  expect(shellPid).toBeGreaterThan(0)
  expect(records.find(record => record.i === 8)!.targetPgid).toBe(shellPid)
  expect(records.find(record => record.i === 16)!.sessionStatus).toEqual({ kind: 'exited', exitCode: 3, signal: null })
  expect(stderr).toContain('# closed: nothing of the session is left running')
}
