/**
 * What the CLI says of a dev container target: `doctor`'s section (what of the devcontainer.json
 * is applied, its forwarded ports among it, and what is not), and the lines `run` and `shell` print on stderr when they open
 * one (a container `--start` started, what of remoteEnv is not applied).
 * @module dsh-remote-worlds/cli/devcontainer-report
 */
import type { RemoteWorld } from '../backend/world.ts'
import type { ResolvedDevcontainer } from '../devcontainer/index.ts'
import { DockerSubprocessRuntime } from '../providers/docker/docker-runtime.ts'
import { scrubKind } from '../providers/remote/environment.ts'
import { sandboxReportOf } from '../sandbox/companion.ts'

/**
 * What doctor says of a dev container target: what of its devcontainer.json is applied, and
 * what is not. The shared fields mean what they mean on {@link ResolvedDevcontainer}, but
 * `container` is the 12-digit id and `user`/`userSource` are the effective ones (`--user` wins).
 */
export interface DevcontainerReport extends Pick<ResolvedDevcontainer, 'folder' | 'configFile' | 'container' | 'name' | 'started' | 'user' | 'userSource' | 'workspaceFolder' | 'workspaceFolderSource' | 'forwardPorts'> {
  /** remoteEnv names terminals and spawned processes get. */
  remoteEnv: string[]
  /** Properties the container got when it was created, taken as they are. */
  atCreation: string[]
  /**
   * What is not applied: unsupported properties and variables; remoteEnv entries using a
   * `${localEnv:VAR}` this client never passes on ({@link ResolvedDevcontainer.withheld}); and
   * remoteEnv names the ambient scrub drops (credential-shaped or `DSH_*`: the harness's rule
   * for every world's environment).
   */
  notApplied: string[]
  /** Confined modes the container enforces (judged like any attached container). */
  enforces: string[]
  /** Confined modes it does not enforce: refused before a shell starts. */
  refuses: string[]
  /** Why the sandbox modes were not judged, when they were not (e.g. the user does not exist). */
  sandboxNotJudged?: string
}

/**
 * What of a resolved dev container's environment is not applied, one sentence each: the
 * withheld remoteEnv entries, then the names the ambient scrub drops.
 * @example environmentNotApplied(resolved) // ['remoteEnv.HARMLESS uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client', 'remoteEnv.GITHUB_TOKEN: a credential-shaped name, scrubbed like the container\'s own environment']
 */
export function environmentNotApplied(resolved: ResolvedDevcontainer): string[] {
  const scrubbed = Object.keys(resolved.remoteEnv).flatMap(name => {
    const kind = scrubKind(name)
    return kind === undefined ? [] : [`remoteEnv.${name}: a ${kind} name, scrubbed like the container's own environment`]
  })
  return [...resolved.withheld, ...scrubbed]
}

/**
 * The dev container report of a resolved dev container.
 * @param explicitUser - the runtime's `user` (`--user`), which wins over the file's.
 * @param modes - the world's sandbox modes (its `ctx.sandbox` report), or a reason they were not judged.
 */
export function devcontainerReportOf(resolved: ResolvedDevcontainer, explicitUser: string | undefined, modes: { mode: string; available: boolean }[] | { notJudged: string }): DevcontainerReport {
  const confined = Array.isArray(modes) ? modes.filter(mode => mode.mode !== 'danger-full-access') : []
  return {
    folder: resolved.folder,
    configFile: resolved.configFile,
    container: resolved.container.slice(0, 12),
    name: resolved.name,
    started: resolved.started,
    user: explicitUser ?? resolved.user,
    userSource: explicitUser !== undefined ? `given explicitly (--user, the runtime's \`user\`), which wins over ${resolved.user === undefined ? 'the container\'s own user' : `${resolved.userSource} (${resolved.user})`}` : resolved.userSource,
    workspaceFolder: resolved.workspaceFolder,
    workspaceFolderSource: resolved.workspaceFolderSource,
    remoteEnv: Object.keys(resolved.remoteEnv).filter(name => scrubKind(name) === undefined),
    forwardPorts: resolved.forwardPorts,
    atCreation: resolved.atCreation,
    notApplied: [...resolved.unsupported, ...environmentNotApplied(resolved)],
    enforces: confined.filter(mode => mode.available).map(mode => mode.mode),
    refuses: confined.filter(mode => !mode.available).map(mode => mode.mode),
    ...(Array.isArray(modes) ? {} : { sandboxNotJudged: modes.notJudged }),
  }
}

/** The dev container a world attached to (`--devcontainer`), once it is open; undefined for any other world. */
export async function attachedDevcontainer(world: RemoteWorld): Promise<ResolvedDevcontainer | undefined> {
  if (!(world.runtime instanceof DockerSubprocessRuntime)) return undefined
  await world.runtime.world()
  return world.runtime.devcontainer
}

/**
 * The dev container report of a world opened with `--devcontainer`; undefined for any other
 * world. The sandbox half comes from the world's `ctx.sandbox` report (the inspector judges the
 * dev container like any attached container).
 */
export async function devcontainerReport(world: RemoteWorld): Promise<DevcontainerReport | undefined> {
  const resolved = await attachedDevcontainer(world)
  if (resolved === undefined) return undefined
  return devcontainerReportOf(resolved, (world.runtime as DockerSubprocessRuntime).config.user, sandboxReportOf(world.ctx)?.modes ?? [])
}

/**
 * Render a dev container report for humans (lines to indent under the checks). The forwarded
 * ports are each `PORT (LABEL)`: forwarded from this machine's 127.0.0.1 on the same port (any
 * free one when it is taken) while `run` or `shell` holds the world.
 */
export function formatDevcontainerReport(report: DevcontainerReport): string[] {
  const list = (names: readonly string[]): string => names.length === 0 ? 'none' : names.join('; ')
  return [
    `dev container of ${report.folder}: docker container ${report.container} (${report.name})${report.started ? ', started by --start' : ''}, configured by ${report.configFile}`,
    `  user: ${report.user ?? '(the container\'s own)'} (${report.userSource})`,
    `  workspace: ${report.workspaceFolder} (${report.workspaceFolderSource === 'workspaceFolder' ? 'workspaceFolder' : 'workspaceFolder not set: the specification\'s default'}), the shell's cwd and the sandbox's workspace root`,
    `  remoteEnv for terminals and spawned processes: ${list(report.remoteEnv)}`,
    `  forwarded ports: ${list(report.forwardPorts.map(forward => forward.label !== undefined ? `${forward.port} (${forward.label})` : String(forward.port)))}`,
    `  as the container was created: ${list(report.atCreation)}`,
    `  not applied: ${list(report.notApplied)}`,
    report.sandboxNotJudged !== undefined
      ? `  sandbox: not judged (${report.sandboxNotJudged})`
      : `  sandbox: judged like any attached container; enforces ${report.enforces.length === 0 ? 'no confined mode' : report.enforces.join(' and ')}${report.refuses.length === 0 ? '' : `; ${report.refuses.join(' and ')} ${report.refuses.length === 1 ? 'is' : 'are'} refused before the shell starts`}`,
  ]
}

/**
 * What `run` and `shell` say on stderr once a dev container world is open, one line each: that
 * `--start` started the container, and each part of remoteEnv not applied ({@link environmentNotApplied}).
 * @example devcontainerNotices(resolved) // ['dsh-remote-worlds: --start started the dev container 0123456789ab (app_devcontainer-app-1)', 'dsh-remote-worlds: WARNING: not applied: remoteEnv.HARMLESS uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client']
 */
export function devcontainerNotices(resolved: ResolvedDevcontainer): string[] {
  return [
    ...(resolved.started ? [`dsh-remote-worlds: --start started the dev container ${resolved.container.slice(0, 12)} (${resolved.name})`] : []),
    ...environmentNotApplied(resolved).map(item => `dsh-remote-worlds: WARNING: not applied: ${item}`),
  ]
}
