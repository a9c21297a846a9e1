/**
 * `dsh-remote-worlds doctor`: what this world can PROVE, each fact checked for real on a scratch
 * terminal, with the reason where something is not provable.
 * @module dsh-remote-worlds/cli/doctor
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { SubprocessTerminalHandle } from '@deepseek-ai/dsh-subprocess'
import type { RemoteWorld } from '../backend/world.ts'
import type { TerminalEmulatorSettings } from '../emulator/settings.ts'
import { DockerSubprocessRuntime } from '../providers/docker/docker-runtime.ts'
import { SwarmSubprocessRuntime } from '../providers/swarm/swarm-runtime.ts'
import { managedLeftovers } from '../providers/docker/docker-world.ts'
import { reapOrphans } from '../providers/remote/ownership.ts'
import { RemoteSubprocessRuntime } from '../providers/remote/runtime.ts'
import { ResourceWatch, type ResourceWatchReport, formatBytes } from '../providers/remote/resource-events.ts'
import type { WorldSandboxReport } from '../sandbox/report.ts'
import { terminalHolder } from '../providers/remote/pty-holder/holder-install.ts'
import { worldOwnerOf } from '../providers/remote/world-owner.ts'
import { filesChecks } from './doctor-files.ts'
import { networkCheck } from './doctor-network.ts'
import { sessionLeftovers } from './run.ts'
import { controlledRuntime } from './target.ts'

/** One doctor finding. */
export interface DoctorCheck {
  /** Short name, e.g. `exact stdin-wait`. */
  name: string
  /** True when the fact was proven on this world. */
  ok: boolean
  /** What was observed, or why it is not provable. */
  detail: string
}

const BASH_ARGV = ['/bin/bash', '--noprofile', '--norc', '-i']
const BASH_ENV = { TERM: 'dumb', PS1: 'dsh> ', PROMPT_COMMAND: 'printf "\\033]133;D;%s\\007" "$?"' }

async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined || Date.now() >= deadline) return value
    await delay(20)
  }
}

/**
 * Which PTY the world's terminals get: dsh-pty, their world-side parent (true wait status,
 * bounded output in flight; providers/remote/pty-holder/), or, where it cannot run, the one the
 * engine or sshd allocates, with the reason.
 */
async function terminalParentCheck(world: RemoteWorld): Promise<DoctorCheck> {
  const owner = worldOwnerOf(world.runtime)
  if (owner === undefined) return { name: 'terminal parent', ok: false, detail: 'not a remote world of this package' }
  const holder = await terminalHolder(owner)
  if ('path' in holder) return { name: 'terminal parent', ok: true, detail: `dsh-pty ${holder.path} owns each terminal's PTY and reaps its shell: a signal death is reported as the signal, an exit code as the code, and output in flight is bounded by the reader; persistence ('connection', 'client'): held by dsh-pty's holder (dsh-held), the one holder tier this package ships (copied in by content hash, so no script(1), busybox or python3 is needed)` }
  return { name: 'terminal parent', ok: false, detail: `terminals get the PTY the engine or sshd allocates (${holder.unavailable}): in Docker a shell killed by signal N reads as exit code 128+N; a given persistence ('connection', 'client') is refused here for the same reason (its holder is dsh-pty's, dsh-held), and the default one degrades to off` }
}

/**
 * The persistence the world's terminals get (providers/remote/pty-holder/persistence.ts, the
 * default rule): as given, or the default 'connection', or 'off' where that default degraded
 * because dsh-pty cannot run here. Not ok only for a degraded default: the user did not ask for
 * 'off', and a cut connection ends the shell.
 */
export async function persistenceCheck(world: RemoteWorld): Promise<DoctorCheck> {
  const runtime = world.runtime
  if (!(runtime instanceof RemoteSubprocessRuntime)) return { name: 'persistence', ok: false, detail: 'not a remote world of this package' }
  const effect = await runtime.persistenceInEffect()
  if (effect.degraded !== undefined) return { name: 'persistence', ok: false, detail: `off: the default 'connection' degraded here, since dsh-pty cannot hold a shell (${effect.degraded}); a cut connection ends the shell` }
  if (runtime instanceof SwarmSubprocessRuntime) return { name: 'persistence', ok: true, detail: 'off: a swarm world has no persistence setting (its service ends with its client)' }
  const how = effect.defaulted ? 'the default; --persist off opts out' : 'as given'
  if (effect.mode === 'off') return { name: 'persistence', ok: true, detail: `off (${how}): a cut connection ends the shell` }
  if (effect.mode === 'connection') return { name: 'persistence', ok: true, detail: `connection (${how}): a transport cut shorter than the reconnect deadline is not seen by the shell` }
  return { name: 'persistence', ok: true, detail: `client (${how}): shells outlive the connection and this client` }
}

/**
 * Run every check on `world` (scratch terminals are opened in `cwd` and closed).
 * @param options.terminal - the runtime setting `terminal` the world was opened with (the
 *   CLI's `--replies`, `--no-emulator`, `--scrollback`), for the `terminal replies` check.
 * @returns the findings in order; a check that could not run is reported as not ok.
 */
export async function diagnose(world: RemoteWorld, cwd: string, options: { terminal?: TerminalEmulatorSettings | undefined; shell?: 'bash' | 'pwsh' | undefined } = {}): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = []
  const runtime = controlledRuntime(world)
  const control = await runtime.control()
  const pingStarted = performance.now()
  const samples: number[] = []
  for (let index = 0; index < 20; index += 1) {
    const started = performance.now()
    await control.request('ping')
    samples.push(performance.now() - started)
  }
  samples.sort((a, b) => a - b)
  checks.push({ name: 'control channel', ok: true, detail: `uid ${control.info.uid}, arch ${control.info.arch}, median round trip ${samples[10]!.toFixed(2)} ms (20 pings in ${(performance.now() - pingStarted).toFixed(1)} ms)` })
  const unowned = ownershipGap(world, control.info.uid)
  checks.push({ name: 'session ownership', ok: unowned === undefined, detail: unowned ?? `registered in /tmp/dsh-remote-owners-${control.info.uid}: if this client dies, the next client (as uid ${control.info.uid}) finds and ends what it left` })
  const resources = await (await ResourceWatch.of(control)).report()
  checks.push({ name: 'resource events', ok: resources.watched, detail: resourceWatchDetail(resources) })

  checks.push(await terminalParentCheck(world))
  checks.push(await persistenceCheck(world))

  const environment = await runtime.userEnvironment()
  checks.push({ name: 'locale', ok: environment.locale.effective, detail: environment.locale.reason })
  checks.push({
    name: 'home',
    ok: environment.ambient.HOME !== undefined && environment.ambient.HOME !== '/',
    detail: environment.privateHome !== undefined
      ? `uid ${control.info.uid} has no passwd entry: HOME=${environment.privateHome}, a private directory made for it (the world's HOME=${control.info.home ?? '(unset)'} is not writable for dotfiles)`
      : environment.refusedHome !== undefined
        ? `HOME=${environment.ambient.HOME ?? '(unset)'}: uid ${control.info.uid} has no passwd entry, and ${environment.refusedHome} is not a directory of its own (another user's, a symlink, or not a directory), so no private HOME was made`
        : `HOME=${environment.ambient.HOME ?? '(unset)'}`,
  })

  let terminal: SubprocessTerminalHandle | undefined
  try {
    terminal = await world.runtime.spawnTerminal({ argv: BASH_ARGV, cwd, env: BASH_ENV, rows: 40, cols: 160, graceMs: 3_000 })
    const shell = terminal.pid
    terminal.output.resume()
    const stat = await control.stat(shell)
    const leader = stat !== undefined && stat.session === shell && stat.ttyNr !== 0
    checks.push({ name: 'pid publication', ok: leader, detail: leader ? `remote pid ${shell} is a session leader with a controlling tty (tty_nr ${stat.ttyNr})` : `remote pid ${shell}: ${stat === undefined ? 'not visible to the control channel' : `session ${stat.session}, tty_nr ${stat.ttyNr}`}` })

    const idle = await waitFor(async () => {
      const facts = await terminal!.inspectForeground()
      return facts?.processGroupId === shell ? facts : undefined
    }, 3_000)
    checks.push({ name: 'foreground probing', ok: idle !== undefined, detail: idle !== undefined ? `tpgid of the shell's tty is the shell's group ${shell} at the prompt` : 'the foreground group never matched the shell at the prompt' })

    await terminal.write('cat\r')
    const catGroup = await waitFor(async () => {
      const facts = await terminal!.inspectForeground()
      return facts !== undefined && facts.processGroupId !== shell ? facts.processGroupId : undefined
    }, 3_000)
    const waiting = catGroup === undefined ? undefined : await waitFor(async () => (await terminal!.inspectForeground())?.inputWaiting === true ? true : undefined, 2_000)
    checks.push({
      name: 'exact stdin-wait',
      ok: waiting === true,
      detail: waiting === true
        ? `cat (group ${catGroup}) proven blocked in read of the terminal via /proc/PID/task/TID/syscall`
        : control.info.arch === 'unknown'
          ? 'not provable: unknown architecture (no syscall table); sends to waiting programs settle by the 3 s silence fallback'
          : `not provable: the control channel (uid ${control.info.uid}) cannot read the foreground process's /proc/PID/task/TID/syscall (needs ptrace-attach rights: same uid, a dumpable process, Yama ptrace_scope 0 or CAP_SYS_PTRACE); sends to waiting programs settle by the 3 s silence fallback`,
    })

    if (catGroup !== undefined) {
      const target = await terminal.signalForeground('SIGINT')
      const back = await waitFor(async () => (await terminal!.inspectForeground())?.processGroupId === shell ? true : undefined, 3_000)
      checks.push({ name: 'signal delivery', ok: target === catGroup && back === true, detail: `SIGINT delivered to group ${target} (cat's group ${catGroup}); ${back === true ? 'the shell is foreground again' : 'cat did not exit'}` })
    } else {
      checks.push({ name: 'signal delivery', ok: false, detail: 'not checked: cat never became the foreground group' })
    }

    // Pagers, password prompts and editors read /dev/tty on a descriptor other than 0; the
    // upstream local provider proves reads on fd 0 only (they settle by silence there).
    await terminal.write("bash -c 'read -u 3 x' 3</dev/tty\r")
    const ttyGroup = await waitFor(async () => {
      const facts = await terminal!.inspectForeground()
      return facts !== undefined && facts.processGroupId !== shell && facts.inputWaiting ? facts.processGroupId : undefined
    }, 3_000)
    checks.push({
      name: 'terminal reads beyond fd 0',
      ok: ttyGroup !== undefined,
      detail: ttyGroup !== undefined
        ? `a read of /dev/tty on fd 3 (group ${ttyGroup}) is proven too: pagers, password prompts and editors settle as stdin_read, not by the 3 s silence (the upstream local provider proves fd 0 only)`
        : 'a read of /dev/tty on fd 3 was not proven: pagers, password prompts and editors settle by the 3 s silence fallback',
    })
    await terminal.signalForeground('SIGINT').catch(() => undefined)
    await waitFor(async () => (await terminal!.inspectForeground())?.processGroupId === shell ? true : undefined, 3_000)

    await terminal.write('sh -c \'trap "" TERM; sleep 300\' & sleep 300 & kill -STOP $!\r')
    await delay(300)
    const before = (await sessionLeftovers(world, shell)).length
    const started = performance.now()
    await terminal.terminate()
    const ms = performance.now() - started
    const after = await sessionLeftovers(world, shell)
    terminal = undefined
    checks.push({ name: 'teardown proof', ok: after.length === 0, detail: after.length === 0 ? `${before} session members (a TERM-ignoring child and a stopped job included) stopped and proven gone in ${ms.toFixed(0)} ms` : `survivors (pid:state): ${after.join(', ')}` })
  } catch (error) {
    checks.push({ name: 'terminal', ok: false, detail: `could not run the checks: ${(error as Error).message}` })
  } finally {
    await terminal?.terminate().catch(() => undefined)
  }
  checks.push(await terminalRepliesCheck(world, cwd, options.terminal, options.shell).catch((error: unknown) => ({ name: 'terminal replies', ok: false, detail: `could not run the check: ${(error as Error).message}` })))
  checks.push(...await filesChecks(world, cwd))
  checks.push(await networkCheck(world, cwd))
  return checks
}

/** The question of the `terminal replies` check: a cursor position query (DSR 6), then the answer's length. */
const CURSOR_QUERY = 'printf \'\\033[6n\'; read -rs -d R pos; echo "got-${#pos}"'
/** The same question from a pwsh shell: asked by a native bash (the query needs bash's read -d). */
const PWSH_CURSOR_QUERY = 'bash -c \'printf "\\033[6n"; read -rs -d R pos; echo "got-${#pos}"\''

/**
 * The CLI flag that keeps a world's terminals from answering terminal queries, or undefined
 * when they answer (the default).
 */
function repliesOffFlag(settings: TerminalEmulatorSettings | undefined): string | undefined {
  if (settings?.emulator === false) return '--no-emulator'
  if (settings?.replies === 'off') return '--replies off'
  return undefined
}

/**
 * The `terminal replies` check: on a fresh shell of the world (terminal-bash, in `cwd`), a
 * cursor position query must be answered: the send prints `got-N` with N > 0 and settles
 * `stdin_read` at the prompt (a pwsh shell asks through a native `bash -c`). Without replies (`--replies off`, `--no-emulator`) nothing is
 * asked, and the check is not ok, naming the flag.
 * @returns the finding; `detail` e.g. `cursor position report answered in 170 ms (xterm.js headless emulator)`,
 *   the time of the whole send (query, answer, `echo`, back at the prompt).
 * @throws the world's errors opening, using or closing the shell.
 */
export async function terminalRepliesCheck(world: RemoteWorld, cwd: string, settings: TerminalEmulatorSettings | undefined, shell: 'bash' | 'pwsh' = 'bash'): Promise<DoctorCheck> {
  const name = 'terminal replies'
  const off = repliesOffFlag(settings)
  if (off !== undefined) return { name, ok: false, detail: `not answered (${off}): programs that ask the terminal something (a cursor position, colours, device attributes) wait for an answer that never comes` }
  const terminal = await world.open({ cwd })
  try {
    const result = await terminal.send(shell === 'pwsh' ? PWSH_CURSOR_QUERY : CURSOR_QUERY)
    const length = Number(/^got-(\d+)\r?$/m.exec(result.viewport)?.[1] ?? 0)
    const ms = Math.round(result.ms)
    return length > 0 && result.waitReason === 'stdin_read'
      ? { name, ok: true, detail: `cursor position report answered in ${ms} ms (xterm.js headless emulator)` }
      : { name, ok: false, detail: `a cursor position query was not answered: the send settled ${result.waitReason} after ${ms} ms with output ${JSON.stringify(result.viewport)}; programs that ask the terminal something wait` }
  } finally {
    await terminal.close()
  }
}

/**
 * The `resource events` check's detail: which cgroup files a send's and a process's `events`
 * come from, v1 or v2, and the limits now; or why the world reports none.
 */
export function resourceWatchDetail(report: ResourceWatchReport): string {
  if (!report.watched) return `not watched: sends and processes report no OOM kills or refused forks (${report.reason ?? 'no readable cgroup counters'})`
  const limits = [
    ...(report.memoryLimit !== undefined ? [report.memoryLimit === null ? 'no memory limit' : `memory limit ${formatBytes(report.memoryLimit)}`] : []),
    ...(report.pidsLimit !== undefined ? [report.pidsLimit === null ? 'no pids limit' : `pids limit ${report.pidsLimit}`] : []),
  ]
  return `cgroup ${report.version === 'mixed' ? 'v1 and v2' : `v${report.version}`}: watching ${report.files.join(' and ')}; ${limits.join(', ')}`
}

/** What gone clients left in a world, as `doctor` reports it (and `doctor --reap` ends it). */
export interface LeftoverReport {
  /** Sessions a gone client left running in this world, as this world's user. */
  sessions: { client: string; processes: { pid: number; starttime: number; tag: string }[] }[]
  /** Managed containers of gone clients the engine did not remove (Docker engines only). */
  containers: { id: string; state: string; image: string }[]
  /** Swarm worlds nobody holds (swarm worlds only; providers/swarm/reap.ts), with why, and their scratch volumes. */
  services?: { service: string; owner: string; why: string }[] | undefined
  volumes?: string[] | undefined
  /** True when they were ended (`--reap`). */
  reaped: boolean
  /** With `--reap`: every process the ladder ended (the tagged ones, and what shared their sessions). */
  ended: number[]
  /** Why the scan is incomplete, when it is (e.g. the ownership registry is unusable). */
  gaps: string[]
}

/**
 * Find what clients that died left in this world: tagged sessions of clients whose every
 * control program is gone (providers/remote/ownership.ts), and, on a Docker engine, managed
 * containers nobody holds; in a swarm, services nobody holds and their scratch volumes
 * (providers/swarm/reap.ts). With `reap`, end them (teardown ladder; containers, services and
 * volumes removed).
 * @throws CleanupFailedError naming survivors of a reap; the engine and channel errors.
 */
export async function scanLeftovers(world: RemoteWorld, options: { reap: boolean }): Promise<LeftoverReport> {
  const runtime = controlledRuntime(world)
  const control = await runtime.control()
  const report = await reapOrphans(control, { graceMs: 3_000, dryRun: !options.reap })
  const gaps: string[] = []
  const unavailable = ownershipGap(world, control.info.uid)
  if (unavailable !== undefined) gaps.push(unavailable)
  let containers: LeftoverReport['containers'] = []
  if (world.runtime instanceof DockerSubprocessRuntime) {
    const docker = (await world.runtime.world()).docker
    const found = await managedLeftovers(docker)
    if (options.reap) await Promise.all(found.map(info => docker.getContainer(info.Id).remove({ force: true }).catch(() => undefined)))
    containers = found.map(info => ({ id: info.Id.slice(0, 12), state: info.State, image: info.Image }))
  }
  let swarm: Pick<LeftoverReport, 'services' | 'volumes'> = {}
  if (world.runtime instanceof SwarmSubprocessRuntime) {
    const found = await world.runtime.reapSwarm({ dryRun: !options.reap })
    gaps.push(...found.unjudged, ...found.failures)
    swarm = { services: found.leftovers.map(({ service, owner, why }) => ({ service, owner, why })), volumes: found.volumes }
  }
  return {
    ...swarm,
    sessions: report.orphans.filter(orphan => orphan.processes.length > 0).map(orphan => ({ client: orphan.client, processes: orphan.processes.map(({ pid, starttime, tag }) => ({ pid, starttime, tag })) })),
    containers,
    reaped: options.reap,
    ended: report.ended.map(identity => identity.pid),
    gaps,
  }
}

/**
 * Why this client is not registered in the world's ownership registry for `uid`, with what
 * follows from it, or undefined when it is (remote/ownership.ts).
 */
export function ownershipGap(world: RemoteWorld, uid: number): string | undefined {
  const unavailable = controlledRuntime(world).ownership.unavailable(uid)
  return unavailable === undefined ? undefined : `${unavailable}: what a client that dies leaves here cannot be found by the next one, and what others left is not seen`
}

/** Render a leftover report for humans (indented lines). */
export function formatLeftovers(report: LeftoverReport): string[] {
  const verb = report.reaped ? 'ended' : 'still running (end them with doctor --reap)'
  const lines = [
    ...report.sessions.map(session => `sessions of gone client ${session.client} ${verb}: pids ${session.processes.map(process => process.pid).join(', ')}`),
    ...(report.reaped && report.ended.length > 0 ? [`ended ${report.ended.length} processes in all (with the members of those sessions): pids ${report.ended.join(', ')}`] : []),
    ...report.containers.map(container => `managed container ${container.id} (${container.state}, ${container.image}) of a gone client ${report.reaped ? 'removed' : 'left (remove it with doctor --reap)'}`),
    ...(report.services ?? []).map(service => `swarm service ${service.service} of gone client ${service.owner} (${service.why}) ${report.reaped ? 'removed' : 'left (remove it with doctor --reap)'}`),
    ...(report.volumes ?? []).map(volume => `scratch volume ${volume} of a gone swarm world ${report.reaped ? 'removed' : 'left (remove it with doctor --reap)'}`),
    ...report.gaps,
  ]
  return lines.length === 0 ? ['nothing left by gone clients (of this uid: other users\' clients are seen with --user)'] : lines
}

/**
 * A managed container is created for the mode it is asked for: one created for another mode
 * does not enforce a confined mode, yet `--mode MODE --workspace HOST_DIR` gets a container
 * that does. Say that instead of "not available".
 */
export function managedSandboxReport(report: WorldSandboxReport, currentMode: string): WorldSandboxReport {
  return {
    ...report,
    modes: report.modes.map(mode => mode.available ? mode : { ...mode, needs: `--mode ${mode.mode} --workspace HOST_DIR (a managed container is then created from that mode's policy, with the folder at /workspace; this one was created for ${currentMode})` }),
  }
}

/** Render findings for humans. */
export function formatChecks(description: string, checks: readonly DoctorCheck[]): string {
  return [`dsh-remote-worlds doctor: ${description}`, ...checks.map(check => `  ${check.ok ? 'ok  ' : 'FAIL'} ${check.name.padEnd(26)} ${check.detail}`)].join('\n')
}
