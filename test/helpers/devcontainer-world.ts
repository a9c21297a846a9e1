/**
 * Dev container fixtures: a project folder with a devcontainer.json, and containers carrying
 * the labels the Dev Containers CLI sets on the containers it creates
 * (`devcontainer.local_folder`, `devcontainer.config_file`, `devcontainer.metadata`), from the
 * project image, with NetworkMode none, an init and `sleep infinity` (startTestContainer), the
 * folder bind-mounted at `/workspaces/<folder name>` as that CLI mounts it.
 *
 * Every container carries `dsh-remote-worlds.test=devcontainer` and the creating process's pid,
 * so containers a crashed run left are swept ({@link sweepDevcontainerFixtures}) without
 * touching another live run's.
 */
import { chownSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import type Docker from 'dockerode'
import { IMAGE, docker, startTestContainer } from '../docker/helpers.ts'

/** Label of every fixture container (value `devcontainer`). */
export const FIXTURE_LABEL = 'dsh-remote-worlds.test'
/** Label naming the pid of the process that created the fixture container. */
export const FIXTURE_PID_LABEL = 'dsh-remote-worlds.test.pid'

/** The fixture's devcontainer.json: comments, a trailing comma, a forwarded port with its label, and what is not applied (postStartCommand). */
export const FIXTURE_JSON = `// A project's dev container, as a user writes it.
{
  /* the image the container was created from */
  "image": "${IMAGE}",
  "remoteUser": "agent",
  "workspaceFolder": "/workspaces/\${localWorkspaceFolderBasename}",
  "remoteEnv": { "FOO": "bar" },
  "forwardPorts": [3000],
  "portsAttributes": { "3000": { "label": "App" } },
  "postStartCommand": "echo started", // not run by dsh-remote-worlds
}
`

/** The `devcontainer.metadata` label the Dev Containers CLI writes for {@link FIXTURE_JSON} (its label-able properties). */
export const FIXTURE_METADATA = JSON.stringify([{ remoteUser: 'agent', remoteEnv: { FOO: 'bar' }, forwardPorts: [3000], portsAttributes: { 3000: { label: 'App' } }, postStartCommand: 'echo started' }])

/** A project folder on this machine. */
export interface ProjectFolder {
  /** Its real path (what the labels name). */
  folder: string
  /** Its name: the workspace is `/workspaces/<basename>`. */
  basename: string
  /** Its `.devcontainer/devcontainer.json`. */
  configFile: string
}

const folders: string[] = []

/**
 * A temporary project folder with `.devcontainer/devcontainer.json` = `json`, owned by uid 1000
 * (the image's `agent`), so the agent may write in the mounted workspace.
 */
export function makeProjectFolder(json: string = FIXTURE_JSON): ProjectFolder {
  const folder = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-devcontainer-')))
  folders.push(folder)
  mkdirSync(join(folder, '.devcontainer'))
  const configFile = join(folder, '.devcontainer', 'devcontainer.json')
  writeFileSync(configFile, json)
  for (const path of [folder, join(folder, '.devcontainer'), configFile]) chownSync(path, 1000, 1000)
  return { folder, basename: basename(folder), configFile }
}

/** Write another configuration file of `project` (e.g. `.devcontainer/python/devcontainer.json`), owned by uid 1000; returns its path. */
export function addConfigFile(project: ProjectFolder, relativePath: string, json: string): string {
  const path = join(project.folder, relativePath)
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, json)
  chownSync(path, 1000, 1000)
  return path
}

/** A symlink to `target` in the temporary folder (removed with the fixtures; swept like project folders). */
export function linkTo(target: string): string {
  const link = join(realpathSync(tmpdir()), `dsh-devcontainer-link-${process.pid}-${folders.length}`)
  symlinkSync(target, link)
  folders.push(link)
  return link
}

/** How a fixture container is labelled and mounted, where it differs from what the Dev Containers CLI does for `project`. */
export interface DevcontainerFixtureOptions {
  /** Its environment (`NAME=value`). */
  env?: string[]
  /** Its `devcontainer.metadata` label (default {@link FIXTURE_METADATA}). */
  metadata?: string
  /** Its `devcontainer.local_folder` label (default the project's real path); the folder is mounted at `/workspaces/<its basename>`. */
  localFolder?: string
  /** Its `devcontainer.config_file` label (default the project's configuration file); null: none, as made before that label existed. */
  configFile?: string | null
}

/** The labels the Dev Containers CLI sets on a container of `project`, plus the fixture's sweep labels. */
export function devcontainerLabels(project: ProjectFolder, options: DevcontainerFixtureOptions = {}): Record<string, string> {
  const metadata = 'metadata' in options ? options.metadata : FIXTURE_METADATA
  const configFile = options.configFile === undefined ? project.configFile : options.configFile
  return {
    'devcontainer.local_folder': options.localFolder ?? project.folder,
    ...(configFile !== null ? { 'devcontainer.config_file': configFile } : {}),
    ...(metadata !== undefined ? { 'devcontainer.metadata': metadata } : {}),
    [FIXTURE_LABEL]: 'devcontainer',
    [FIXTURE_PID_LABEL]: String(process.pid),
  }
}

/** The bind mount the Dev Containers CLI makes: the folder at `/workspaces/<basename of the folder as it was given>`. */
function workspaceBind(project: ProjectFolder, options: DevcontainerFixtureOptions): string {
  return `${project.folder}:/workspaces/${basename(options.localFolder ?? project.folder)}`
}

/** Start a labelled dev container of `project` (running), its folder at `/workspaces/<basename>`. */
export async function startDevcontainer(project: ProjectFolder, options: DevcontainerFixtureOptions = {}): Promise<Docker.Container> {
  return startTestContainer({
    Labels: devcontainerLabels(project, options),
    ...(options.env !== undefined ? { Env: options.env } : {}),
    HostConfig: { Binds: [workspaceBind(project, options)] },
  })
}

/** Create a labelled dev container of `project` without starting it (state `created`). */
export async function createDevcontainer(project: ProjectFolder, name: string, options: DevcontainerFixtureOptions = {}): Promise<Docker.Container> {
  return docker.createContainer({
    name,
    Image: IMAGE,
    Cmd: ['sleep', 'infinity'],
    Labels: devcontainerLabels(project, options),
    HostConfig: { Init: true, NetworkMode: 'none', Binds: [workspaceBind(project, options)] },
  })
}

/** Remove the containers (forced) and every project folder made by this process. */
export async function removeFixtures(containers: readonly (Docker.Container | undefined)[]): Promise<void> {
  await Promise.all(containers.map(container => container?.remove({ force: true }).catch(() => undefined)))
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
}

/** True when a process with this pid exists on this machine. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Remove fixture containers whose creating process is gone (a crashed run), and their folders. */
export async function sweepDevcontainerFixtures(): Promise<void> {
  const listed = await docker.listContainers({ all: true, filters: { label: [`${FIXTURE_LABEL}=devcontainer`] } })
  for (const info of listed) {
    const pid = Number(info.Labels[FIXTURE_PID_LABEL])
    if (Number.isInteger(pid) && pid > 0 && alive(pid)) continue
    await docker.getContainer(info.Id).remove({ force: true }).catch(() => undefined)
    const folder = info.Labels['devcontainer.local_folder']
    if (folder !== undefined && basename(folder).startsWith('dsh-devcontainer-') && dirname(folder) === realpathSync(tmpdir())) rmSync(folder, { recursive: true, force: true })
  }
}
