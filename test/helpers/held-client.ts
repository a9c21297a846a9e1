/**
 * A client of a held shell as its own process, for the cases that kill a client with SIGKILL
 * (held-shell-cases.ts): it composes a world with persistence 'client' for a named DSH session,
 * opens a terminal, says the shell's pid, starts one send, says READY once the tty echoed it, and
 * waits to be killed.
 *
 * Run as `node --import tsx test/helpers/held-client.ts JSON`, JSON being a {@link HeldClientPlan}.
 * Lines on stdout: `PID <pid>` then `READY`; a failure is `FAILED <message>` and exit code 1.
 */
import { openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime, type DockerRuntimeConfig } from '../../src/providers/docker/docker-runtime.ts'
import { SshSubprocessRuntime, type SshRuntimeConfig } from '../../src/providers/ssh/ssh-runtime.ts'

/** What the client does (JSON on its command line). */
export interface HeldClientPlan {
  world: { runtime: 'docker'; config: DockerRuntimeConfig } | { runtime: 'ssh'; config: SshRuntimeConfig }
  session: string
  workspaceRoot: string
  /** The send started (not awaited) before READY. */
  send: string
}

const plan = JSON.parse(process.argv[2] ?? '{}') as HeldClientPlan
const tuning = { pollIntervalMs: 50, exactProbeAfterMs: 150, idleSilenceMs: 3000 }
try {
  const world = plan.world.runtime === 'docker'
    ? await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: plan.world.config, workspaceRoot: plan.workspaceRoot, session: plan.session, terminal: tuning })
    : await openWorld({ runtime: SshSubprocessRuntime, runtimeConfig: plan.world.config, workspaceRoot: plan.workspaceRoot, session: plan.session, terminal: tuning })
  const terminal = await world.open()
  const said = await terminal.send('echo "PID=$$"')
  const pid = /PID=(\d+)/.exec(said.viewport)?.[1]
  if (pid === undefined) throw new Error(`no pid in ${JSON.stringify(said.viewport)}`)
  process.stdout.write(`PID ${pid}\n`)
  terminal.startSend(plan.send).done.catch(() => undefined)
  // READY only once the tty echoed the send: its bytes reached the shell, so a SIGKILL from
  // here on cannot take them with it (the write is otherwise still in flight, more so over SSH).
  const deadline = Date.now() + 30_000
  while (!terminal.read().text.includes(plan.send)) {
    if (Date.now() > deadline) throw new Error(`the send was never echoed: ${JSON.stringify(terminal.read().text)}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  process.stdout.write('READY\n')
  await new Promise(() => undefined)
} catch (error) {
  process.stdout.write(`FAILED ${(error as Error).message.replaceAll('\n', ' ')}\n`)
  process.exit(1)
}
