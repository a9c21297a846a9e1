/**
 * The path of docs/dsh-cli.md, done as a new user does it, with the real dsh CLI
 * (`@deepseek-ai/dsh@0.1.0-rc.8`): pnpm installs it into a scratch folder (with the page's
 * package.json, which pins cordis-plugin-hmr), `npm pack` makes this package's tarball,
 * `dsh plugin --profile headless add ./dsh-remote-worlds-0.1.0.tgz` adds it to the headless
 * profile, the page's `cordis.patch.yml` is written there, and `dsh --profile headless "TASK"`
 * runs with `DSH_REMOTE_DOCKER_IMAGE` and `DSH_REMOTE_USER=agent` in a project folder.
 *
 * The model is the only stand-in: an HTTP server on 127.0.0.1 speaking what dsh's
 * `@deepseek-ai/dsh-llm-deepseek` adapter sends (`POST $DEEPSEEK_BASE_URL/chat/completions`,
 * OpenAI-style chat completions streamed as server-sent events, bearer `$DEEPSEEK_API_KEY`).
 * It answers with scripted tool calls, and what it receives back (the `role: tool` messages)
 * is what this file asserts on:
 * - the one-shot `bash` tool ran in the managed container (its `hostname` is the container's,
 *   found through the Docker engine by its label and the workspace bind while dsh runs), as
 *   `agent`, in the project folder;
 * - the persistent terminal (`@deepseek-ai/dsh-tool-bash-persistent`) ran there too, as
 *   `agent`, one shell keeping its directory and variables between calls;
 * - after dsh exits, that container is gone and no host process of the run is left;
 * - under a Node older than 22.19, the boot's stderr names the required version (the upstream
 *   loader catches the import error and prints nothing of it).
 *
 * Needs the npm registry (pnpm resolves dsh there; its store then serves the packages) and the
 * Docker engine with the project image (`npm test` runs docker/ensure-world.sh first).
 */
import { execFile } from 'node:child_process'
import { chownSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { IMAGE, docker } from '../docker/helpers.ts'
import { ROOT, packedTarball } from '../helpers/built-package.ts'
import { MANAGED_LABEL } from '../../src/providers/docker/docker-world.ts'
import { nodeVersionMessage } from '../../src/node-version.ts'

const run = promisify(execFile)
/** The dsh release this path is written for (docs/dsh-cli.md). */
const DSH_VERSION = '0.1.0-rc.8'
const DOCS = readFileSync(join(ROOT, 'docs/dsh-cli.md'), 'utf8')
const tmp = mkdtempSync(join(tmpdir(), 'dsh-remote-cli-'))
/** `$DSH_HOME`: the profiles, sessions and settings of this run only. */
const home = join(tmp, 'dsh-home')
/** Where dsh is installed (the page's `~/dsh`). */
const install = join(tmp, 'dsh')
/** `pnpm` on PATH, as the page's `npm install -g pnpm@10` puts it: this project's devDependency. */
const bin = join(tmp, 'bin')
const profile = join(home, 'profiles', 'headless')
/** What the scripted model answers last; the headless runner prints it. */
const FINAL = 'scripted run finished'
/** The task; the scripted model ignores it. */
const TASK = 'Run hostname and id -un with the bash tool, and tell me what they print.'

/** What the adapter posts (the fields this file reads). */
interface ChatRequest {
  model: string
  stream: boolean
  messages: { role: string; content?: string; tool_call_id?: string }[]
  tools?: { type: string; function: { name: string; description: string; parameters: { properties: Record<string, unknown>; required?: string[] } } }[]
}

/** A scripted tool call: the tool's name and its arguments. */
interface ScriptedCall { name: string; arguments: Record<string, unknown> }

/** A model endpoint on 127.0.0.1 that answers every agent request with the next scripted call. */
interface ScriptedModel {
  /** The `DEEPSEEK_BASE_URL` to give dsh. */
  url: string
  /** Every request body, in arrival order (the session-title request included). */
  requests: ChatRequest[]
  close(): Promise<void>
}

/**
 * Start the scripted model. A request with tools is the agent's: with N tool results in its
 * history it gets `calls[N]` (one `tool_calls` chunk, `finish_reason: tool_calls`), and once
 * every call has its result, the text {@link FINAL}. A request without tools (dsh's
 * session-title request) gets a short title. `beforeAnswer` runs before the reply to each
 * agent request, while dsh waits for it (so its world is up).
 */
async function scriptedModel(calls: readonly ScriptedCall[], beforeAnswer: (request: ChatRequest) => Promise<void>): Promise<ScriptedModel> {
  const requests: ChatRequest[] = []
  const server: Server = createServer((request, response) => {
    let body = ''
    request.setEncoding('utf8')
    request.on('data', (chunk: string) => { body += chunk })
    request.on('end', () => {
      void (async () => {
        if (request.method !== 'POST' || request.url !== '/chat/completions') {
          response.writeHead(404).end()
          return
        }
        const chat = JSON.parse(body) as ChatRequest
        requests.push(chat)
        const agent = (chat.tools ?? []).length > 0
        if (agent) await beforeAnswer(chat)
        const step = chat.messages.filter(message => message.role === 'tool').length
        const call = agent ? calls[step] : undefined
        const delta = call !== undefined
          ? { role: 'assistant', tool_calls: [{ index: 0, id: `call-${step}`, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.arguments) } }] }
          : { role: 'assistant', content: agent ? FINAL : 'dsh-cli test' }
        response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
        const event = (data: unknown): boolean => response.write(`data: ${JSON.stringify(data)}\n\n`)
        event({ id: `scripted-${requests.length}`, object: 'chat.completion.chunk', model: chat.model, choices: [{ index: 0, delta, finish_reason: null }] })
        event({ id: `scripted-${requests.length}`, object: 'chat.completion.chunk', model: chat.model, choices: [{ index: 0, delta: {}, finish_reason: call !== undefined ? 'tool_calls' : 'stop' }] })
        event({ id: `scripted-${requests.length}`, object: 'chat.completion.chunk', model: chat.model, choices: [], usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 } })
        response.end('data: [DONE]\n\n')
      })().catch((error: unknown) => {
        response.destroy(error as Error)
      })
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>(resolve => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

/**
 * The body of the heredoc `cat > TARGET <<'EOF'` in the first sh block of docs/dsh-cli.md
 * after `after` (the page's text is what the user copies, so it is what is tested).
 */
function docsHeredoc(after: string, target: string): string {
  const start = DOCS.indexOf(after)
  expect(start, `docs/dsh-cli.md has ${after}`).toBeGreaterThanOrEqual(0)
  const block = /```sh\n([\s\S]*?)```/.exec(DOCS.slice(start))![1]!
  const open = `cat > ${target} <<'EOF'\n`
  const from = block.indexOf(open)
  expect(from, `the block after ${after} writes ${target}`).toBeGreaterThanOrEqual(0)
  const body = block.slice(from + open.length)
  return body.slice(0, body.indexOf('\nEOF\n') + 1)
}

/** The environment of a user's shell: the caller's, without npm's, dsh's or vitest's own variables, with `extra`. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // npm_config_* would steer pnpm as well (pnpm reads them), NODE_OPTIONS is the runner's.
  const inherited = Object.entries(process.env).filter(([name]) => !/^(npm_|DSH_|DEEPSEEK_|VITEST|NODE_OPTIONS$)/i.test(name))
  return {
    ...Object.fromEntries(inherited),
    // dsh's own bin first, then pnpm, then this Node 22 (the bins run `node` from PATH).
    PATH: [join(install, 'node_modules/.bin'), bin, dirname(process.execPath), process.env.PATH ?? ''].join(delimiter),
    DSH_HOME: home,
    ...extra,
  }
}

/** What a finished `dsh` run printed. */
interface DshRun { code: number; stdout: string; stderr: string; ms: number }

/** Run `dsh ARGS` in `cwd` with `env`; resolves when it exits (killed after `timeoutMs`), never rejects. */
async function dsh(args: readonly string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 90_000): Promise<DshRun> {
  const started = Date.now()
  return run('dsh', [...args], { cwd, env, timeout: timeoutMs, maxBuffer: 16 << 20 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr, ms: Date.now() - started }),
    (error: { code?: number | string; stdout?: string; stderr?: string }) => ({ code: typeof error.code === 'number' ? error.code : -1, stdout: error.stdout ?? '', stderr: `${error.stderr ?? ''}${typeof error.code === 'number' ? '' : `\n[${String(error.code)}]`}`, ms: Date.now() - started }),
  )
}

/** The managed containers whose workspace bind is `workspace` (the ones a run in that folder made). */
async function managedContainersOf(workspace: string): Promise<Docker.ContainerInspectInfo[]> {
  const listed = await docker.listContainers({ all: true, filters: { label: [`${MANAGED_LABEL}=true`] } })
  const mine = listed.filter(info => info.Mounts.some(mount => mount.Source === workspace && mount.Destination === workspace))
  return Promise.all(mine.map(info => docker.getContainer(info.Id).inspect()))
}

/** Host processes whose environment holds this run's `DSH_HOME` (dsh and anything it started): `PID COMMAND`. */
function hostProcessesOfRun(): string[] {
  const found: string[] = []
  for (const pid of readdirSync('/proc').filter(name => /^\d+$/.test(name))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`DSH_HOME=${home}`)) {
        found.push(`${pid} ${readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim()}`)
      }
    } catch {
      // Gone meanwhile, or another user's: not this run's.
    }
  }
  return found
}

/** The tool results of a request's history, in order. */
function toolResults(request: ChatRequest | undefined): (string | undefined)[] {
  return (request?.messages ?? []).filter(message => message.role === 'tool').map(message => message.content)
}

/** The `bash` tool the agent offered the model. */
function bashTool(request: ChatRequest | undefined): NonNullable<ChatRequest['tools']>[number]['function'] | undefined {
  return request?.tools?.find(tool => tool.function.name === 'bash')?.function
}

/** A project folder for one run: not below /tmp (the container's /tmp is its own), the agent's (uid 1000). */
function projectFolder(): string {
  const folder = mkdtempSync('/var/tmp/dsh-remote-cli-project-')
  // As root (CI), give it to the image's agent, as docs/dsh-cli.md says; a user's own folder is theirs.
  if (process.getuid?.() === 0) chownSync(folder, 1000, 1000)
  return folder
}

const folders: string[] = []
const containers: string[] = []
const servers: ScriptedModel[] = []
/** How long each step took, for the report at the end. */
const timings: Record<string, number> = {}

/** A step of the setup, run as the page writes it, timed; fails with its output. */
async function step(name: string, start: (options: { cwd: string; env: NodeJS.ProcessEnv; timeout: number; maxBuffer: number }) => Promise<{ stdout: string }>, cwd: string, timeoutMs: number): Promise<string> {
  const started = Date.now()
  const result = await start({ cwd, env: userEnv(), timeout: timeoutMs, maxBuffer: 64 << 20 }).catch((error: { message: string; stdout?: string; stderr?: string }) => {
    throw new Error(`${name} failed: ${error.message}\n${error.stdout ?? ''}\n${error.stderr ?? ''}`)
  })
  timings[name] = Date.now() - started
  return result.stdout
}

beforeAll(async () => {
  mkdirSync(bin)
  symlinkSync(join(ROOT, 'node_modules/pnpm/bin/pnpm.cjs'), join(bin, 'pnpm'))
  // docs/dsh-cli.md step 2: dsh with pnpm, the page's package.json pinning cordis-plugin-hmr.
  mkdirSync(install)
  writeFileSync(join(install, 'package.json'), docsHeredoc('## 2. Install dsh', 'package.json'))
  // Step 3's tarball (its prepack builds dist/) at the same time: pnpm waits on the network,
  // the build on the CPU, and each takes about half a minute.
  const [, packed] = await Promise.all([
    step('pnpm add @deepseek-ai/dsh', options => run('pnpm', ['add', `@deepseek-ai/dsh@${DSH_VERSION}`], options), install, 240_000),
    packedTarball(),
  ])
  copyFileSync(packed.path, join(tmp, packed.filename))
  expect((await step('dsh --version', options => run('dsh', ['--version'], options), install, 30_000)).trim()).toBe(DSH_VERSION)
  // The override held: the hmr that still has registerConfig.
  expect(readdirSync(join(install, 'node_modules/.pnpm')).filter(name => name.startsWith('@deepseek-ai+cordis-plugin-hmr@')).map(name => name.split('_')[0]))
    .toEqual(['@deepseek-ai+cordis-plugin-hmr@1.0.17'])
  expect(packed.filename).toBe('dsh-remote-worlds-0.1.0.tgz')
  // Step 3: added to the headless profile from the folder that holds the tarball, by the
  // relative path the page uses.
  await step('dsh plugin add', options => run('dsh', ['plugin', '--profile', 'headless', 'add', './dsh-remote-worlds-0.1.0.tgz'], options), tmp, 240_000)
  expect((JSON.parse(readFileSync(join(profile, 'package.json'), 'utf8')) as { dsh: { profile: { bundles: string[] } } }).dsh.profile.bundles)
    .toEqual(['@deepseek-ai/dsh-base', '@deepseek-ai/dsh-headless', 'dsh-remote-worlds'])
}, 600_000)

afterAll(async () => {
  await Promise.all(servers.map(server => server.close()))
  // Only after a failure is anything still here; the assertions name it.
  await Promise.all(containers.map(id => docker.getContainer(id).remove({ force: true }).catch(() => undefined)))
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
  rmSync(tmp, { recursive: true, force: true })
  console.info(`dsh-cli steps (ms): ${JSON.stringify(timings)}`)
}, 60_000)

/**
 * One `dsh --profile headless` run in a new project folder, with the world chosen as the page
 * does and the model scripted with `calls`. Returns the run, the model's requests, and the
 * managed containers of that folder as they were while the model waited for its answer to the
 * first tool result.
 */
async function headlessRun(name: string, calls: readonly ScriptedCall[], extraEnv: Record<string, string> = {}): Promise<{ run: DshRun; workspace: string; requests: ChatRequest[]; during: Docker.ContainerInspectInfo[] }> {
  const workspace = projectFolder()
  folders.push(workspace)
  let during: Docker.ContainerInspectInfo[] = []
  const model = await scriptedModel(calls, async request => {
    if (toolResults(request).length !== 1) return
    during = await managedContainersOf(workspace)
    containers.push(...during.map(info => info.Id))
  })
  servers.push(model)
  const result = await dsh(['--profile', 'headless', TASK], workspace, userEnv({
    DEEPSEEK_BASE_URL: model.url,
    DEEPSEEK_API_KEY: 'sk-scripted-model',
    DSH_REMOTE_DOCKER_IMAGE: IMAGE,
    DSH_REMOTE_USER: 'agent',
    ...extraEnv,
  }))
  timings[name] = result.ms
  return { run: result, workspace, requests: model.requests, during }
}

/** Nothing of a run is left once dsh has exited: not its container, not a process. */
async function expectNothingLeft(workspace: string, containerId: string | undefined): Promise<void> {
  if (containerId !== undefined) await expect(docker.getContainer(containerId).inspect()).rejects.toMatchObject({ statusCode: 404 })
  expect((await managedContainersOf(workspace)).map(info => info.Id)).toEqual([])
  expect(hostProcessesOfRun()).toEqual([])
}

describe('the dsh CLI with this package in its headless profile (docs/dsh-cli.md)', () => {
  it('runs the one-shot bash tool in the managed container, as agent, in the project folder, and leaves nothing', async () => {
    writeFileSync(join(profile, 'cordis.patch.yml'), docsHeredoc('writes this file: one-shot bash', '"${DSH_HOME:-$HOME/.dsh}/profiles/headless/cordis.patch.yml"'))
    const { run: result, workspace, requests, during } = await headlessRun('one-shot run', [
      { name: 'bash', arguments: { command: 'echo "host=$(hostname) user=$(id -un) pwd=$PWD"', description: 'Show where commands run' } },
    ])
    const diagnosis = `dsh exited ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`
    expect(result.code, diagnosis).toBe(0)
    expect(result.stdout, diagnosis).toBe(`${FINAL}\n`)
    // One managed container for this folder while the tool ran: the world.
    expect(during.map(info => info.Config.Image), diagnosis).toEqual([IMAGE])
    const container = during[0]!
    const hostname = container.Config.Hostname
    expect(container.Id.startsWith(hostname)).toBe(true)
    expect(container.HostConfig.ReadonlyRootfs).toBe(true)
    // The model was offered dsh-base's one-shot bash tool (a description is required of each call) ...
    const agentRequests = requests.filter(request => (request.tools ?? []).length > 0)
    expect(bashTool(agentRequests[0])?.parameters.required).toEqual(['command', 'description'])
    // ... and the result it got back comes from the container, as agent, in the project folder.
    expect(agentRequests.map(request => toolResults(request).length)).toEqual([0, 1])
    expect(toolResults(agentRequests.at(-1))).toEqual([`host=${hostname} user=agent pwd=${workspace}\n`])
    await expectNothingLeft(workspace, container.Id)
  }, 150_000)

  it('runs the persistent terminal in the managed container, as agent, one shell across calls, and leaves nothing', async () => {
    writeFileSync(join(profile, 'cordis.patch.yml'), docsHeredoc('writes this file: persistent terminal', '"${DSH_HOME:-$HOME/.dsh}/profiles/headless/cordis.patch.yml"'))
    const { run: result, workspace, requests, during } = await headlessRun('persistent run', [
      { name: 'bash', arguments: { command: 'cd /tmp && export MARK=kept && echo "host=$(hostname) user=$(id -un) shell=$$"' } },
      { name: 'bash', arguments: { command: 'echo "host=$(hostname) pwd=$PWD mark=$MARK shell=$$"' } },
    ])
    const diagnosis = `dsh exited ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`
    expect(result.code, diagnosis).toBe(0)
    expect(result.stdout, diagnosis).toBe(`${FINAL}\n`)
    expect(during.map(info => info.Config.Image), diagnosis).toEqual([IMAGE])
    const hostname = during[0]!.Config.Hostname
    const agentRequests = requests.filter(request => (request.tools ?? []).length > 0)
    // The model was offered the persistent shell, not the one-shot tool.
    expect(bashTool(agentRequests[0])?.description).toBe('Run commands in a persistent bash shell. State, including the current directory and exported environment variables, persists across calls for this agent.')
    expect(bashTool(agentRequests[0])?.parameters.required).toEqual(['command'])
    expect(agentRequests.map(request => toolResults(request).length)).toEqual([0, 1, 2])
    const results = toolResults(agentRequests.at(-1))
    const shell = /^host=[0-9a-f]{12} user=agent shell=(\d+)$/.exec(results[0] ?? '')?.[1]
    expect(results).toEqual([
      `host=${hostname} user=agent shell=${shell}`,
      // The second call ran in the same shell: its directory and variable, and its pid.
      `host=${hostname} pwd=/tmp mark=kept shell=${shell}`,
    ])
    await expectNothingLeft(workspace, during[0]!.Id)
  }, 150_000)

  it('names the required Node on stderr when dsh runs on a Node older than 22.19 (the loader itself prints nothing of it)', async () => {
    // A preload that makes the Node running dsh report 22.12.0: old enough for this package,
    // new enough for dsh's loader to import profile plugins (under Node 20 it resolves none).
    const preload = join(tmp, 'old-node.mjs')
    writeFileSync(preload, "Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '22.12.0' } })\n")
    const { run: result, workspace } = await headlessRun('old-node run', [], { NODE_OPTIONS: `--import=${pathToFileURL(preload).href}` })
    expect(result.code, result.stderr).toBe(1)
    expect(result.stderr.split('\n')[0]).toBe(nodeVersionMessage('22.12.0', process.execPath))
    expect(result.stderr).toContain('plugin(s) failed to load: dsh-remote-worlds/docker, dsh-remote-worlds/docker/sandbox, dsh-remote-worlds/fs')
    await expectNothingLeft(workspace, undefined)
  }, 120_000)
})
