#!/usr/bin/env node
/**
 * `dsh-remote-worlds`: persistent, interruptible agent shells in containers and on remote hosts.
 *   demo                   a short real agent session in a throwaway container (the default)
 *   shell                  interactive: each line is a send; Ctrl-C cancels with a real SIGINT
 *   run --script FILE|-    one send per line (directives: @raw, @cancel-after MS, @signal SIG, @screen)
 *   doctor                 what this world can prove, and why not where it cannot
 * Targets: --docker CONTAINER | --image IMAGE (default: the project image, managed) |
 *   --devcontainer [FOLDER] (with --config FILE, --start) | --ssh [user@]host[:port] (with --identity FILE,
 *   --known-hosts FILE) | --swarm ENDPOINT (with --swarm-node, --constraint, --placement-pref,
 *   --reserve-memory, --reserve-cpus, --tls-certs; --image names its image); --user; --cwd.
 * Terminal: --replies answer|off, --no-emulator, --scrollback LINES (runtime setting `terminal`).
 * Network: --network none|allow|full, --allow RULE, --deny RULE, --resolve NAME:PORT:ADDR,
 *   --egress-log FILE, --egress [WORLD_PORT:]HOST:PORT, --forward [ADDR:]PORT:WORLD_PORT (openWorld's `network`, src/network/world-network.ts).
 * @module dsh-remote-worlds/cli/main
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import { readFile } from 'node:fs/promises'
import { Command, CommanderError, Option } from 'commander'
import { runDemo } from './demo.ts'
import { formatSandboxReport, sandboxReportOf } from '../sandbox/index.ts'
import { DevcontainerUserNotFoundError } from '../devcontainer/index.ts'
import { attachedDevcontainer, devcontainerNotices, devcontainerReport, devcontainerReportOf, formatDevcontainerReport } from './devcontainer-report.ts'
import { type DoctorCheck, diagnose, formatChecks, formatLeftovers, managedSandboxReport, ownershipGap, scanLeftovers } from './doctor.ts'
import { formatRecord, runStep, sessionLeftovers } from './run.ts'
import { formatHeldShells, scanHeldShells } from './doctor-held.ts'
import { formatHeldJobs, scanHeldJobs } from './doctor-jobs.ts'
import { RemoteSubprocessRuntime } from '../providers/remote/runtime.ts'
import type { RemoteTerminalHandle } from '../providers/remote/terminal.ts'
import { parseScript } from './script.ts'
import { interactiveShell } from './shell.ts'
import { describeError, installSignalTeardown, withWorld } from './lifecycle.ts'
import { type TargetFlags, controlledRuntime, resolveTarget } from './target.ts'
import type { RemoteWorld } from '../backend/world.ts'
import { SwarmSubprocessRuntime } from '../providers/swarm/swarm-runtime.ts'
import { InvalidArgumentError } from '../providers/remote/errors.ts'

/** Commander's collector of a repeatable option. */
function collect(value: string, previous: string[] | undefined): string[] {
  return [...previous ?? [], value]
}

function targetOptions(command: Command): Command {
  return command
    .addOption(new Option('--docker <container>', 'attach to this running container (name or id)'))
    .addOption(new Option('--image <image>', 'run a managed throwaway container from this image (default: dsh-remote-worlds/target:bookworm)'))
    .addOption(new Option('--devcontainer [folder]', 'attach to the dev container of this project folder (default: the current directory), found by the Dev Containers labels; its devcontainer.json gives the user (remoteUser, else containerUser), the cwd and workspace (workspaceFolder) and remoteEnv'))
    .addOption(new Option('--config <file>', 'with --devcontainer: its devcontainer.json, as the Dev Containers CLI\'s --config (e.g. .devcontainer/python/devcontainer.json); the container must have been made from it (default: the one the folder\'s container was made from)'))
    .addOption(new Option('--start', 'with --devcontainer: start the dev container when it is stopped'))
    .addOption(new Option('--ssh <target>', 'run on a host over SSH: [user@]host[:port] or a Host alias of ~/.ssh/config'))
    .addOption(new Option('--identity <file>', 'SSH private key file (as ssh -i; default: ~/.ssh/config IdentityFile, ~/.ssh/id_*, ssh-agent)'))
    .addOption(new Option('--known-hosts <file>', 'SSH known_hosts file (default ~/.ssh/known_hosts); unknown host keys are refused'))
    .addOption(new Option('--swarm <endpoint>', 'run the world as a Docker Swarm service, made through this manager\'s engine: unix:///PATH, tcp://HOST:PORT (with --tls-certs) or ssh://USER@HOST[:PORT] (docs/swarm.md)'))
    .addOption(new Option('--swarm-node <endpoint>', 'with --swarm: a node\'s engine, matched to its node by the NodeID it reports (repeat for each node; default: the manager\'s only)').argParser(collect))
    .addOption(new Option('--constraint <expr>', 'with --swarm: a placement constraint, as docker service create takes it (node.labels.zone==a; repeatable)').argParser(collect))
    .addOption(new Option('--placement-pref <pref>', 'with --swarm: a placement preference (spread=node.labels.zone; repeatable)').argParser(collect))
    .addOption(new Option('--reserve-memory <bytes>', 'with --swarm: memory a node must have free to take the world'))
    .addOption(new Option('--reserve-cpus <cpus>', 'with --swarm: CPUs a node must have free to take the world (e.g. 0.5)'))
    .addOption(new Option('--tls-certs <dir>', 'with --swarm: ca.pem, cert.pem and key.pem of tcp:// engine endpoints (as DOCKER_CERT_PATH)'))
    .addOption(new Option('--user <user>', 'remote user (exec user in Docker, login user over SSH)'))
    .addOption(new Option('--cwd <dir>', 'working directory in the remote world'))
    .addOption(new Option('--mode <mode>', 'sandbox mode, enforced in the world or refused before the shell starts').choices(['read-only', 'workspace-write', 'danger-full-access']))
    .addOption(new Option('--workspace <dir>', 'workspace: a HOST folder mounted at /workspace in a managed container; a path in the world for --docker/--devcontainer/--ssh (a dev container\'s default: its workspaceFolder)'))
    .addOption(new Option('--locale <name>', 'LANG of the shell and its programs: auto (default: your UTF-8 LANG or C.UTF-8 when the world has it and names none), off (the world\'s own), or a locale name'))
    .addOption(new Option('--replies <answer|off>', 'answer the terminal queries programs ask (cursor position, colours, device attributes) from the terminal emulator (answer, the default), or leave them unanswered (off)'))
    .addOption(new Option('--no-emulator', 'keep no terminal emulator: no answers to terminal queries, no screen (@screen)'))
    .addOption(new Option('--scrollback <lines>', 'lines the terminal emulator keeps above the screen (0 to 10000; default 200)'))
    .addOption(new Option('--shell <dialect>', 'the terminal\'s shell: bash (default) or pwsh (PowerShell; a managed container then defaults to dsh-remote-worlds/target-pwsh:bookworm)').choices(['bash', 'pwsh']))
    .addOption(new Option('--persist <mode>', 'whether the shell outlives its connection (connection: a cut shorter than 60 s is not seen) or this client too (client: left running at exit, for a later run of the same --session; 24 h without a client ends it) or neither (off); default connection where the world can hold shells, else off (doctor says which)').choices(['off', 'connection', 'client']))
    .addOption(new Option('--network <mode>', 'the world\'s network: none (lo only; the confined modes\' default), allow (only what --allow rules let through, judged and dialed by this client; the world resolves no name), full (danger-full-access only)').choices(['none', 'allow', 'full']))
    .addOption(new Option('--allow <rule>', 'with --network allow (implied): let the world reach HOST, *.SUFFIX or an address/CIDR, each with an optional :PORT, through its HTTP(S) proxy (repeatable)').argParser(collect))
    .addOption(new Option('--deny <rule>', 'refuse HOST, *.SUFFIX or an address/CIDR (with an optional :PORT), whatever --allow says (repeatable)').argParser(collect))
    .addOption(new Option('--resolve <name:port:addr>', 'as curl\'s --resolve: this client\'s answer for NAME:PORT when the world asks for it (repeatable)').argParser(collect))
    .addOption(new Option('--egress-log <file>', 'append each egress decision (time, world, host, port, verdict, rule, bytes each way) to FILE as a JSON line'))
    .addOption(new Option('--egress <[world-port:]host:port>', 'a port on the world\'s 127.0.0.1 (default: PORT) whose connections this client dials to HOST:PORT, for what speaks no HTTP (databases); allows HOST:PORT and implies --network allow (repeatable)').argParser(collect))
    .addOption(new Option('--forward <[addr:]port:world-port>', 'as ssh -L: carry connections to this machine\'s ADDR:PORT (default 127.0.0.1; PORT 0: any free one) to WORLD-PORT on the world\'s 127.0.0.1 (repeatable; needs no network in the world)').argParser(collect))
    .addOption(new Option('--session <name>', 'with --persist client: the session the shell belongs to; a later run with the same name and target takes it back; one or more characters, none a control character or a line separator'))
}

/** The runtime's handle of the terminal with shell pid `pid`, when the runtime is one of ours. */
function heldHandleOf(world: RemoteWorld, pid: number | undefined): RemoteTerminalHandle | undefined {
  return world.runtime instanceof RemoteSubprocessRuntime && pid !== undefined ? world.runtime.terminal(pid) : undefined
}

/** `{ dropped: BYTES }` when output was dropped while a held shell was detached since the step began (its `gaps` count then). */
function droppedSince(world: RemoteWorld, pid: number | undefined, gaps: number): { dropped?: number } {
  const handle = heldHandleOf(world, pid)
  const dropped = (handle?.outputGaps ?? []).slice(gaps).reduce((sum, gap) => sum + gap.bytes, 0)
  return dropped > 0 ? { dropped } : {}
}

/**
 * Say on stderr what a spawn found instead of a held shell to take back: the shell of the session
 * that ended meanwhile, or the session's held shells of other options, which it did not take.
 */
function noteHeld(world: RemoteWorld, pid: number | undefined): void {
  const handle = heldHandleOf(world, pid)
  const ending = handle?.previousEnding
  if (ending !== undefined) {
    const { outcome, tail } = ending
    process.stderr.write(`# the held shell of this session ended while no client held it: ${outcome.signal !== null ? `killed by ${outcome.signal}` : `exit status ${outcome.exitCode}`}; its last output: ${JSON.stringify(tail.toString('utf8').slice(-500))}; this is a fresh shell\n`)
  }
  const others = handle?.otherHeldShells ?? []
  if (others.length > 0) {
    const listed = others.map(shell => `pid ${shell.pid}${shell.cwd !== undefined ? ` in ${shell.cwd}` : ''}`).join(', ')
    process.stderr.write(`# this session also holds ${others.length === 1 ? 'a shell' : `${others.length} shells`} started with other options (${listed}): a shell is taken back only by the options it started with (--cwd, --shell, --locale, --user, sandbox mode); this is a fresh shell\n`)
  }
}

/**
 * The command line that takes this run's held shell back: this one, less `--script FILE` and
 * `--json` (a later run brings its own), each word quoted for sh.
 */
function takeBackCommand(): string {
  const words: string[] = []
  const given = process.argv.slice(2)
  for (let i = 0; i < given.length; i += 1) {
    const word = given[i]!
    if (word === '--script') { i += 1; continue }
    if (word.startsWith('--script=') || word === '--json') continue
    words.push(word)
  }
  return ['dsh-remote-worlds', ...words].map(word => /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`).join(' ')
}

/** Say on stderr what of a dev container's configuration is not applied, and that --start started it (devcontainer-report.ts). */
async function noteDevcontainer(world: RemoteWorld): Promise<void> {
  const resolved = await attachedDevcontainer(world)
  if (resolved !== undefined) for (const line of devcontainerNotices(resolved)) process.stderr.write(`${line}\n`)
}

/** Say on stderr where the world's forwarded ports listen and where its proxy is (network/world-network.ts). */
function noteNetwork(world: RemoteWorld): void {
  for (const forward of world.network.forwards()) {
    const label = forward.spec.label !== undefined ? ` (${forward.spec.label})` : ''
    const taken = forward.takenPort !== undefined ? ` (port ${forward.takenPort} was taken)` : ''
    process.stderr.write(`# forwarding ${forward.host.address}:${forward.host.port} to the world's 127.0.0.1:${forward.spec.worldPort}${label}${taken}\n`)
  }
  for (const egress of world.network.egress) process.stderr.write(`# the world's 127.0.0.1:${egress.worldPort} reaches ${egress.host}:${egress.port} (--egress)\n`)
  if (world.network.proxyPort !== undefined) process.stderr.write(`# network allow: the world's HTTP(S) proxy is 127.0.0.1:${world.network.proxyPort} (HTTP_PROXY, HTTPS_PROXY)\n`)
}

/** Say on stderr what went out of a world with network allow: the run's egress counts (the log has each connection). */
function noteEgress(world: RemoteWorld): void {
  if (world.network.proxyPort === undefined) return
  const { allowed, denied, bytesUp, bytesDown } = world.network.counts()
  process.stderr.write(`# egress: ${allowed} connection(s) allowed, ${denied} refused; ${bytesUp} bytes out, ${bytesDown} bytes in\n`)
}

/** Say on stderr where a swarm world landed: its service and node. */
function noteSwarm(world: RemoteWorld): void {
  if (world.runtime instanceof SwarmSubprocessRuntime) process.stderr.write(`# ${world.runtime.describe()}\n`)
}

/** Say on stderr when this client is not registered in the world (see doctor's `session ownership`). */
async function warnUnowned(world: RemoteWorld): Promise<void> {
  const gap = ownershipGap(world, (await controlledRuntime(world).control()).info.uid)
  if (gap !== undefined) process.stderr.write(`dsh-remote-worlds: WARNING: ${gap}\n`)
}

async function readScript(source: string): Promise<string> {
  if (source !== '-') return readFile(source, 'utf8')
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

const program = new Command()
  .name('dsh-remote-worlds')
  .description('Persistent, interruptible agent shells in containers and on remote hosts (DeepSeek Harness subprocess seam).')
  .showHelpAfterError()
  // Usage errors are errors (exit 2), not "something is left" (exit 1); subcommands inherit this.
  .exitOverride()

program.command('demo', { isDefault: true })
  .description('run a short real agent session in a throwaway container and prove nothing is left running')
  .option('--image <image>', 'image to run', undefined)
  .action(async (options: { image?: string }) => {
    const clean = await runDemo(text => process.stdout.write(text), options.image)
    process.exitCode = clean ? 0 : 1
  })

targetOptions(program.command('shell'))
  .description('interactive persistent shell: each line is a send (a line @screen shows the screen instead); Ctrl-C cancels the running command')
  .action(async (flags: TargetFlags) => {
    const target = await resolveTarget(flags)
    process.stderr.write(`opening ${target.description} ...\n`)
    await withWorld(target, async world => {
      await noteDevcontainer(world)
      const terminal = await world.open({ cwd: target.cwd })
      noteSwarm(world)
      noteNetwork(world)
      noteHeld(world, terminal.pid)
      await warnUnowned(world)
      const status = await interactiveShell(terminal, process.stdin, process.stdout)
      // --persist client: a shell still running is left for the next run of its session.
      if (target.persistence === 'client' && terminal.status().kind !== 'exited') process.stderr.write(`# detached: the shell goes on in the world; \`${takeBackCommand()}\` takes it back\n`)
      else await terminal.close()
      if (typeof status === 'number') process.exitCode = status
    })
  })

targetOptions(program.command('run'))
  .description('run a script, one send per line')
  .requiredOption('--script <file>', 'script file, or - for stdin')
  .option('--json', 'print one JSON object per step: i, line, text, waitReason, sessionStatus, output, truncated, ms, events when the world counted a resource-limit kill, and screen when a program holds the alternate screen or the send settled by inferred_idle or timeout; an @screen step: i, line, text, and screen or screenError')
  .action(async (flags: TargetFlags & { script: string; json?: boolean }) => {
    const steps = parseScript(await readScript(flags.script))
    const target = await resolveTarget(flags)
    await withWorld(target, async world => {
      await noteDevcontainer(world)
      const terminal = await world.open({ cwd: target.cwd })
      noteSwarm(world)
      noteNetwork(world)
      // With --json, stdout carries only records; the header goes to stderr.
      ;(flags.json === true ? process.stderr : process.stdout).write(`# ${target.description}, shell pid ${terminal.pid}\n`)
      noteHeld(world, terminal.pid)
      await warnUnowned(world)
      let i = 0
      for (const step of steps) {
        const gaps = heldHandleOf(world, terminal.pid)?.outputGaps.length ?? 0
        const record = { ...await runStep(terminal, step, ++i), ...droppedSince(world, terminal.pid, gaps) }
        process.stdout.write(`${flags.json === true ? JSON.stringify(record) : formatRecord(record)}\n`)
        if ('sessionStatus' in record && record.sessionStatus.kind === 'exited') {
          if (i < steps.length) process.stderr.write(`# the shell exited: ${steps.length - i} remaining line(s) of the script not sent\n`)
          break
        }
      }
      const pid = terminal.pid!
      if (target.persistence === 'client' && terminal.status().kind !== 'exited') {
        process.stderr.write(`# detached: the shell (pid ${pid}) goes on in the world; \`${takeBackCommand()} --script FILE\` takes it back\n`)
        return
      }
      await terminal.close()
      const left = await sessionLeftovers(world, pid)
      process.stderr.write(left.length === 0 ? '# closed: nothing of the session is left running\n' : `# closed, but still running: ${left.join(' ')}\n`)
      noteEgress(world)
      if (left.length > 0) process.exitCode = 1
    })
  })

targetOptions(program.command('doctor'))
  .description('check what this world can prove (pid publication, foreground probing, exact stdin-wait, signal delivery, teardown, terminal replies) and list what clients that died left there')
  .option('--json', 'print the findings as JSON')
  .option('--reap', 'end what clients that died left there (their sessions; managed containers nobody holds)')
  .option('--include-persistent', 'with --reap: also end the held shells (--persist) of this user, whoever holds them')
  .option('--include-jobs', 'with --reap: also end the background jobs held in the world (--persist client) of this user')
  .action(async (flags: TargetFlags & { json?: boolean; reap?: boolean; includePersistent?: boolean; includeJobs?: boolean }) => {
    if (flags.includePersistent === true && flags.reap !== true) throw new InvalidArgumentError('--include-persistent widens --reap to the held shells: add --reap')
    if (flags.includeJobs === true && flags.reap !== true) throw new InvalidArgumentError('--include-jobs widens --reap to the held background jobs: add --reap')
    const resolved = await resolveTarget(flags)
    // Doctor lists leftovers instead of reaping them on connect (the default of every other client).
    const target = { ...resolved, world: { ...resolved.world, runtimeConfig: { ...(resolved.world.runtimeConfig as object), reapOrphans: false } } }
    try {
      await withWorld(target, async world => {
        // Held shells first: ending them makes their sessions the leftovers of gone owners, which the reap then ends.
        const held = await scanHeldShells(world, { reap: flags.reap === true && flags.includePersistent === true })
        const jobs = await scanHeldJobs(world.runtime, { reap: flags.reap === true && flags.includeJobs === true })
        const leftovers = await scanLeftovers(world, { reap: flags.reap === true })
        const checks = await diagnose(world, target.cwd, { terminal: target.terminal, shell: flags.shell })
        const inspected = sandboxReportOf(world.ctx)
        const sandbox = inspected !== undefined && target.managed ? managedSandboxReport(inspected, flags.mode ?? 'danger-full-access') : inspected
        const devcontainer = await devcontainerReport(world)
        process.stdout.write(`${flags.json === true
          ? JSON.stringify({ target: target.description, checks, ...(devcontainer !== undefined ? { devcontainer } : {}), sandbox, leftovers, held, jobs }, null, 2)
          : [
            formatChecks(target.description, checks),
            ...(devcontainer === undefined ? [] : formatDevcontainerReport(devcontainer).map(line => `  ${line}`)),
            ...(sandbox === undefined ? ['  sandbox: no ctx.sandbox provider in this world (only danger-full-access can run)'] : ['  sandbox modes this world can enforce:', ...formatSandboxReport(sandbox).map(line => `    ${line}`)]),
            '  left by clients that died:', ...formatLeftovers(leftovers).map(line => `    ${line}`),
            '  held shells (--persist; they outlive their clients):', ...formatHeldShells(held).map(line => `    ${line}`),
            '  background jobs held in the world (--persist client; they outlive their clients):', ...formatHeldJobs(jobs).map(line => `    ${line}`),
          ].join('\n')}\n`)
        process.exitCode = checks.every(check => check.ok) ? 0 : 1
      })
    } catch (error) {
      // The configured user is missing: nothing can run as it, but what the file says is known.
      if (!(error instanceof DevcontainerUserNotFoundError)) throw error
      const checks: DoctorCheck[] = [{ name: 'dev container user', ok: false, detail: error.message }]
      const devcontainer = devcontainerReportOf(error.devcontainer, undefined, { notJudged: `no process can start as ${error.user}` })
      process.stdout.write(`${flags.json === true
        ? JSON.stringify({ target: target.description, checks, devcontainer }, null, 2)
        : [formatChecks(target.description, checks), ...formatDevcontainerReport(devcontainer).map(line => `  ${line}`)].join('\n')}\n`)
      process.exitCode = 1
    }
  })

installSignalTeardown()
program.parseAsync(process.argv).catch((error: unknown) => {
  // commander printed the usage error (or the help) already.
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : 2)
  process.stderr.write(`dsh-remote-worlds: ${describeError(error)}\n`)
  // A world whose teardown failed (e.g. a paused container) may still hold sockets open;
  // the error is reported and the world's state named in it, so the CLI ends here.
  process.exit(2)
})
