/**
 * devcontainer.json without a container (src/devcontainer config.ts, variables.ts, metadata.ts):
 * JSONC parsing (comments, trailing commas), the specification's variables, what is applied,
 * taken as created, or not applied, and the metadata label merged under the file.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  DevcontainerConfigInvalidError,
  DevcontainerConfigMissingError,
  devcontainerEffect,
  devcontainerSettings,
  metadataEntries,
  parseDevcontainerJson,
  readDevcontainerSettings,
  substituteContainerEnv,
  substituteLocal,
} from '../../src/devcontainer/index.ts'
import { resolveTarget } from '../../src/cli/target.ts'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'

/** The fixture's file, as a user writes it: comments, a trailing comma, variables. */
const FIXTURE_JSON = `// The project's dev container.
{
  /* built from the project image */
  "name": "fixture",
  "image": "dsh-remote-worlds/target:bookworm",
  "remoteUser": "agent",
  "workspaceFolder": "/workspaces/\${localWorkspaceFolderBasename}",
  "remoteEnv": { "FOO": "bar", },
  "containerEnv": { "IN_CONTAINER": "1" },
  "forwardPorts": [3000],
  "postStartCommand": "echo started",
}
`

const context = { folder: '/home/me/my-app', configFile: '/home/me/my-app/.devcontainer/devcontainer.json', localEnv: { USER: 'me' } }

describe('parseDevcontainerJson', () => {
  it('reads JSONC: comments and trailing commas', () => {
    expect(parseDevcontainerJson(FIXTURE_JSON, 'f.json')).toEqual({
      name: 'fixture',
      image: 'dsh-remote-worlds/target:bookworm',
      remoteUser: 'agent',
      workspaceFolder: '/workspaces/${localWorkspaceFolderBasename}',
      remoteEnv: { FOO: 'bar' },
      containerEnv: { IN_CONTAINER: '1' },
      forwardPorts: [3000],
      postStartCommand: 'echo started',
    })
  })

  it('names the line and column of each syntax error', () => {
    expect(() => parseDevcontainerJson('{\n  "a": 1\n  "b": 2\n}', '/p/devcontainer.json')).toThrow(new DevcontainerConfigInvalidError('/p/devcontainer.json', ['line 3, column 3: CommaExpected']))
  })

  it('refuses a top level that is not an object', () => {
    const error = (() => { try { parseDevcontainerJson('[1, 2]', 'f.json') } catch (caught) { return caught } })() as DevcontainerConfigInvalidError
    expect([error.code, error.problems]).toEqual(['DEVCONTAINER_CONFIG_INVALID', ['the top level is not an object']])
  })
})

describe('devcontainerSettings', () => {
  it('applies remoteUser, workspaceFolder and remoteEnv; lists what the container got at creation and what is not applied', () => {
    expect(devcontainerSettings(parseDevcontainerJson(FIXTURE_JSON, context.configFile), context)).toEqual({
      folder: '/home/me/my-app',
      configFile: '/home/me/my-app/.devcontainer/devcontainer.json',
      remoteUser: 'agent',
      containerUser: undefined,
      workspaceFolder: '/workspaces/my-app',
      workspaceFolderSource: 'workspaceFolder',
      remoteEnv: { FOO: 'bar' },
      atCreation: ['image', 'containerEnv'],
      unsupported: ['forwardPorts', 'postStartCommand'],
    })
  })

  it('resolves ${localEnv:VAR[:default]}, ${containerWorkspaceFolder} and its basename in remoteEnv, and keeps ${containerEnv:VAR} for the container', () => {
    const settings = devcontainerSettings({
      workspaceFolder: '/src/${localWorkspaceFolderBasename}-${localEnv:USER}',
      remoteEnv: {
        WHO: '${localEnv:USER}',
        MISSING: '${localEnv:NOT_SET_ANYWHERE}',
        FALLBACK: '${localEnv:NOT_SET_ANYWHERE:a:b}',
        OLD: '${env:USER}',
        WS: '${containerWorkspaceFolder}/bin:${containerWorkspaceFolderBasename}',
        LOCAL: '${localWorkspaceFolder}',
        PATH: '${containerEnv:PATH}:/extra',
        GONE: null,
      },
    }, context)
    expect(settings.workspaceFolder).toBe('/src/my-app-me')
    expect(settings.remoteEnv).toEqual({
      WHO: 'me',
      MISSING: '',
      FALLBACK: 'a:b',
      OLD: 'me',
      WS: '/src/my-app-me/bin:my-app-me',
      LOCAL: '/home/me/my-app',
      PATH: '${containerEnv:PATH}:/extra',
      GONE: null,
    })
    expect(settings.unsupported).toEqual([])
  })

  it('names variables it cannot resolve, and leaves them as written', () => {
    const settings = devcontainerSettings({ remoteEnv: { ID: '${devcontainerId}', X: '${nope}' } }, context)
    expect(settings.remoteEnv).toEqual({ ID: '${devcontainerId}', X: '${nope}' })
    expect(settings.unsupported).toEqual(['${devcontainerId} in remoteEnv.ID', '${nope} in remoteEnv.X'])
  })

  it('defaults workspaceFolder as the Dev Containers CLI mounts: /workspaces/<git root>/<path inside it>, or / for Docker Compose', () => {
    expect(devcontainerSettings({ image: 'x' }, context)).toMatchObject({ workspaceFolder: '/workspaces/my-app', workspaceFolderSource: 'default' })
    expect(devcontainerSettings({ image: 'x' }, { ...context, folder: '/home/me/repo/svc/api', mountFolder: '/home/me/repo' }).workspaceFolder).toBe('/workspaces/repo/svc/api')
    expect(devcontainerSettings({ dockerComposeFile: 'c.yml', service: 'app' }, context).workspaceFolder).toBe('/')
  })

  it('takes containerUser when remoteUser is not set', () => {
    expect(devcontainerSettings({ containerUser: 'builder' }, context)).toMatchObject({ remoteUser: undefined, containerUser: 'builder' })
  })

  it('refuses properties it applies when their shape is wrong, naming each', () => {
    const error = (() => { try { devcontainerSettings({ remoteUser: 7, remoteEnv: { A: 1 }, workspaceFolder: 'relative/${containerEnv:HOME}' }, context) } catch (caught) { return caught } })() as DevcontainerConfigInvalidError
    expect(error).toBeInstanceOf(DevcontainerConfigInvalidError)
    expect(error.problems).toEqual([
      'remoteUser: must be a string',
      'workspaceFolder: ${containerEnv:...} is allowed in remoteEnv only (the specification\'s variables)',
      'workspaceFolder: "relative/${containerEnv:HOME}" resolves to "relative/${containerEnv:HOME}", not an absolute path in the container',
      'remoteEnv.A: must be a string (or null to unset it)',
    ])
  })
})

describe('variables', () => {
  it('substituteContainerEnv resolves ${containerEnv:VAR[:default]} only', () => {
    expect(substituteContainerEnv('${containerEnv:PATH}:/x:${containerEnv:NONE}:${containerEnv:NONE:d}:${localEnv:A}', { PATH: '/usr/bin' })).toBe('/usr/bin:/x::d:${localEnv:A}')
  })

  it('substituteLocal keeps ${containerWorkspaceFolder} while the workspace folder itself is resolved', () => {
    expect(substituteLocal('${containerWorkspaceFolder}/x', { localWorkspaceFolder: '/a', localEnv: {} })).toEqual({ value: '${containerWorkspaceFolder}/x', unresolved: ['${containerWorkspaceFolder}'] })
  })
})

describe('devcontainerEffect: the file over the container\'s devcontainer.metadata label', () => {
  const settings = devcontainerSettings({ remoteEnv: { A: 'file', P: '${containerEnv:PATH}:/x' }, forwardPorts: [1] }, context)

  it('takes the label\'s remoteUser when the file names no user, merges remoteEnv (the file wins), and names the label\'s unsupported properties once', () => {
    const { entries } = metadataEntries(JSON.stringify([{ id: 'feature', remoteUser: 'vscode', remoteEnv: { A: 'image', B: 'image', C: null }, postAttachCommand: 'x', forwardPorts: [2] }]))
    expect(devcontainerEffect(settings, entries, { PATH: '/usr/bin' }, {})).toEqual({
      user: 'vscode',
      userSource: 'remoteUser of the container\'s devcontainer.metadata label',
      remoteEnv: { A: 'file', B: 'image', P: '/usr/bin:/x' },
      unset: ['C'],
      unsupported: ['forwardPorts', 'postAttachCommand (the container\'s devcontainer.metadata label)'],
    })
  })

  it('the merged remoteUser wins over a containerUser; the file\'s own remoteUser wins over the label\'s', () => {
    const { entries } = metadataEntries('{"remoteUser":"vscode"}')
    expect(devcontainerEffect(devcontainerSettings({ containerUser: 'builder' }, context), entries, {}, {}).user).toBe('vscode')
    expect(devcontainerEffect(devcontainerSettings({ remoteUser: 'agent' }, context), entries, {}, {})).toMatchObject({ user: 'agent', userSource: 'remoteUser of devcontainer.json' })
    expect(devcontainerEffect(devcontainerSettings({}, context), [], {}, {}).user).toBeUndefined()
  })

  it('a label that is not JSON is named, not applied', () => {
    expect(metadataEntries('{oops')).toMatchObject({ entries: [], problem: expect.stringMatching(/^the container's devcontainer.metadata label is not JSON \(.*\): not applied$/) })
    expect(metadataEntries('[1]')).toEqual({ entries: [], problem: 'the container\'s devcontainer.metadata label is not an object or an array of objects: not applied' })
  })
})

describe('readDevcontainerSettings', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-devcontainer-unit-')))
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  it('reads .devcontainer/devcontainer.json, else .devcontainer.json, through the folder\'s real path', () => {
    const project = join(root, 'app')
    mkdirSync(join(project, '.devcontainer'), { recursive: true })
    writeFileSync(join(project, '.devcontainer.json'), '{ "remoteUser": "second" }')
    expect(readDevcontainerSettings(project, {}).remoteUser).toBe('second')
    writeFileSync(join(project, '.devcontainer', 'devcontainer.json'), FIXTURE_JSON)
    symlinkSync(project, join(root, 'link'))
    const settings = readDevcontainerSettings(join(root, 'link'), {})
    expect([settings.folder, settings.configFile, settings.remoteUser, settings.workspaceFolder]).toEqual([project, join(project, '.devcontainer', 'devcontainer.json'), 'agent', '/workspaces/app'])
  })

  it('defaults the workspace folder below the git root', () => {
    mkdirSync(join(root, 'repo', '.git'), { recursive: true })
    mkdirSync(join(root, 'repo', 'svc'), { recursive: true })
    writeFileSync(join(root, 'repo', 'svc', '.devcontainer.json'), '{}')
    expect(readDevcontainerSettings(join(root, 'repo', 'svc'), {}).workspaceFolder).toBe('/workspaces/repo/svc')
  })

  it('names the fix when the folder or its configuration is missing', () => {
    mkdirSync(join(root, 'bare'))
    expect(() => readDevcontainerSettings(join(root, 'bare'), {})).toThrow(new DevcontainerConfigMissingError(join(root, 'bare')))
    expect(() => readDevcontainerSettings(join(root, 'bare'), {})).toThrow(`${join(root, 'bare')} has no dev container configuration: neither ${join(root, 'bare')}/.devcontainer/devcontainer.json nor ${join(root, 'bare')}/.devcontainer.json exists`)
    expect(() => readDevcontainerSettings(join(root, 'nowhere'), {})).toThrow(new InvalidArgumentError(`dev container folder ${join(root, 'nowhere')}: no such folder`))
  })

  it('resolveTarget --devcontainer: the runtime config names the folder; workspaceFolder is the workspace root and cwd unless --workspace / --cwd are given', () => {
    const project = join(root, 'app')
    const target = resolveTarget({ devcontainer: project, start: true })
    expect([target.description, target.world.runtimeConfig, target.world.workspaceRoot, target.cwd, target.managed]).toEqual([
      `dev container of ${project}`, { devcontainer: { folder: project, start: true } }, '/workspaces/app', '/workspaces/app', false,
    ])
    const explicit = resolveTarget({ devcontainer: join(root, 'link'), user: 'root', cwd: '/tmp', workspace: '/srv', mode: 'read-only' })
    expect([explicit.world.runtimeConfig, explicit.world.workspaceRoot, explicit.world.mode, explicit.cwd]).toEqual([{ devcontainer: { folder: project }, user: 'root' }, '/srv', 'read-only', '/tmp'])
  })
})
