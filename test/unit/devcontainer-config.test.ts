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
  type DevcontainerCandidate,
  DevcontainerAmbiguousError,
  DevcontainerConfigInvalidError,
  DevcontainerConfigMissingError,
  DevcontainerNotFoundError,
  DevcontainerUserNotFoundError,
  type ResolvedDevcontainer,
  chooseDevcontainer,
  devcontainerEffect,
  devcontainerForwardPorts,
  devcontainerId,
  forwardPortEntry,
  devcontainerSettings,
  metadataEntries,
  parseDevcontainerJson,
  projectFolder,
  readDevcontainerSettings,
  substituteContainerEnv,
  substituteLocal,
} from '../../src/devcontainer/index.ts'
import { createServer } from 'node:net'
import { once } from 'node:events'
import { devcontainerForwards, resolveTarget } from '../../src/cli/target.ts'
import { parseForwardSpec, startPortForward } from '../../src/network/port-forward.ts'
import { scrubKind } from '../../src/providers/remote/environment.ts'
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

const context = { folder: '/home/me/my-app', configFile: '/home/me/my-app/.devcontainer/devcontainer.json', localEnv: { USER: 'me', EMPTY: '' } }

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
      forwardPorts: [{ port: 3000 }],
      portLabels: {},
      atCreation: ['image', 'containerEnv'],
      unsupported: ['postStartCommand'],
      withheld: [],
    })
  })

  it('resolves ${localEnv:VAR[:default]}, ${containerWorkspaceFolder} and its basename in remoteEnv, and keeps ${containerEnv:VAR} for the container', () => {
    const settings = devcontainerSettings({
      workspaceFolder: '/src/${localWorkspaceFolderBasename}-${localEnv:USER}',
      remoteEnv: {
        WHO: '${localEnv:USER}',
        MISSING: '${localEnv:NOT_SET_ANYWHERE}',
        FALLBACK: '${localEnv:NOT_SET_ANYWHERE:a:b}',
        EMPTY_SET: '${localEnv:EMPTY:d}',
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
      // The first default part, as the reference CLI (its test: `${localEnv:baz:default:a:b:c}` is `default`).
      FALLBACK: 'a',
      // Set to the empty string is set: no default.
      EMPTY_SET: '',
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

describe('devcontainerSettings: forwardPorts and portsAttributes', () => {
  const not = (entry: string): string => `forwardPorts entry ${entry}: only a port of the container's own loopback is forwarded (N, "localhost:N" or "127.0.0.1:N", N 1..65535)`

  it('a port number 1..65535, or "N", "localhost:N", "127.0.0.1:N"; anything else is named as not applied', () => {
    expect([3000, '8080', 'localhost:9229', '127.0.0.1:5000', 1, 65_535].map(forwardPortEntry)).toEqual([3000, 8080, 9229, 5000, 1, 65_535])
    expect([0, 65_536, 3000.5, -1, 'db:5432', '0.0.0.0:3000', 'localhost:', '03000', ' 3000', null, { port: 3000 }].map(forwardPortEntry)).toEqual(Array(11).fill(undefined))
    const settings = devcontainerSettings({ forwardPorts: [3000, 'localhost:3000', '8080', 'db:5432', 70_000, '127.0.0.1:9229'] }, context)
    expect([settings.forwardPorts, settings.unsupported]).toEqual([
      [{ port: 3000 }, { port: 8080 }, { port: 9229 }],
      [not('"db:5432"'), not('70000')],
    ])
  })

  it('portsAttributes gives labels by port; its other fields, and keys that are not one port, are named as not applied', () => {
    const settings = devcontainerSettings({
      forwardPorts: [3000, 5432],
      portsAttributes: { 3000: { label: 'App', onAutoForward: 'notify' }, '5432': { protocol: 'tcp' }, '4000-4010': { label: 'Range' }, 9229: { label: 'Debugger' } },
    }, context)
    expect([settings.forwardPorts, settings.portLabels, settings.unsupported]).toEqual([
      [{ port: 3000, label: 'App' }, { port: 5432 }],
      { 3000: 'App', 9229: 'Debugger' },
      ['portsAttributes.3000.onAutoForward', 'portsAttributes.5432.protocol', 'portsAttributes "4000-4010": only a single port\'s attributes object is applied'],
    ])
    expect(settings.unsupported).not.toContain('forwardPorts')
  })

  it('forwardPorts that is not an array, or portsAttributes that is not an object, is refused naming the file', () => {
    expect(() => devcontainerSettings({ forwardPorts: 3000, portsAttributes: [] }, context)).toThrow(new DevcontainerConfigInvalidError(context.configFile, [
      'forwardPorts: must be an array of ports or "host:port" strings',
      'portsAttributes: must be an object keyed by port',
    ]))
  })
})

describe('devcontainerForwards: a dev container\'s ports as forwards into the world', () => {
  it('forwards 127.0.0.1 on the same port, with the label; the spec passes parseForwardSpec as it is', () => {
    const [spec] = devcontainerForwards([{ port: 3000, label: 'App' }])! as unknown as [object]
    expect(spec).toEqual({ hostAddress: '127.0.0.1', hostPort: 3000, worldPort: 3000, anyPortIfTaken: true, label: 'App' })
    expect(parseForwardSpec(spec as never)).toEqual(spec)
    expect(() => parseForwardSpec({ hostAddress: 'localhost', hostPort: 1, worldPort: 1 })).toThrow('"localhost" is not an IP address')
  })

  it('when the host port is taken, any free port is taken instead and the forward says which was taken; without anyPortIfTaken it is EADDRINUSE', async () => {
    const holder = createServer()
    holder.listen(0, '127.0.0.1')
    await once(holder, 'listening')
    const taken = (holder.address() as { port: number }).port
    const noWorld = async (): Promise<never> => { throw new Error('no world here') }
    try {
      const forward = await startPortForward({ hostAddress: '127.0.0.1', hostPort: taken, worldPort: taken, anyPortIfTaken: true, label: 'App' }, noWorld)
      expect([forward.host.address, forward.host.port === taken, forward.host.port > 0, forward.takenPort, forward.spec.label]).toEqual(['127.0.0.1', false, true, taken, 'App'])
      await forward.close()
      await expect(startPortForward({ hostAddress: '127.0.0.1', hostPort: taken, worldPort: taken }, noWorld)).rejects.toMatchObject({ code: 'EADDRINUSE' })
    } finally {
      holder.close()
    }
  })
})

describe('variables', () => {
  it('substituteContainerEnv resolves ${containerEnv:VAR[:default]} only', () => {
    expect(substituteContainerEnv('${containerEnv:PATH}:/x:${containerEnv:NONE}:${containerEnv:NONE:d}:${localEnv:A}', { PATH: '/usr/bin' })).toBe('/usr/bin:/x::d:${localEnv:A}')
  })

  it('substituteLocal keeps ${containerWorkspaceFolder} while the workspace folder itself is resolved', () => {
    expect(substituteLocal('${containerWorkspaceFolder}/x', { localWorkspaceFolder: '/a', localEnv: {} })).toEqual({ value: '${containerWorkspaceFolder}/x', unresolved: ['${containerWorkspaceFolder}'], withheld: [] })
  })
})

describe('devcontainerSettings: the client\'s secrets never cross through ${localEnv:...}', () => {
  const secrets = { ...context.localEnv, DEEPSEEK_API_KEY: 'sk-secret', DSH_HOME: '/home/me/.dsh', github_token: 'ghp-secret', PLAIN: 'ok' }

  it('scrubKind names why a variable is dropped: credential-shaped first, then DSH_*', () => {
    expect(['DEEPSEEK_API_KEY', 'github_token', 'DSH_HOME', 'dsh_token', 'PLAIN'].map(scrubKind)).toEqual(['credential-shaped', 'credential-shaped', 'DSH_*', 'credential-shaped', undefined])
  })

  it('a remoteEnv value using a scrubbed ${localEnv:NAME} (or ${env:NAME}) is not set, and is named', () => {
    const settings = devcontainerSettings({
      remoteEnv: {
        HARMLESS: '${localEnv:DEEPSEEK_API_KEY}',
        WITH_DEFAULT: 'x-${localEnv:github_token:none}',
        HOME_OF_DSH: '${env:DSH_HOME}',
        FINE: '${localEnv:PLAIN}',
      },
    }, { ...context, localEnv: secrets })
    expect(settings.remoteEnv).toEqual({ FINE: 'ok' })
    expect(settings.withheld).toEqual([
      'remoteEnv.HARMLESS uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client',
      'remoteEnv.WITH_DEFAULT uses ${localEnv:github_token:none}, a credential-shaped variable of this client',
      'remoteEnv.HOME_OF_DSH uses ${env:DSH_HOME}, a DSH_* variable of this client',
    ])
    expect(settings.unsupported).toEqual([])
  })

  it('workspaceFolder, remoteUser and containerUser using one are refused, naming the file and each property', () => {
    const error = (() => { try { devcontainerSettings({ workspaceFolder: '/w/${localEnv:DEEPSEEK_API_KEY}', remoteUser: '${localEnv:DSH_HOME}', containerUser: '${localEnv:github_token}' }, { ...context, localEnv: secrets }) } catch (caught) { return caught } })() as DevcontainerConfigInvalidError
    expect(error).toBeInstanceOf(DevcontainerConfigInvalidError)
    expect(error.message).toBe(`${context.configFile} is not a usable dev container configuration: remoteUser: uses \${localEnv:DSH_HOME}, a DSH_* variable of this client, which never crosses into a world; write the value itself; containerUser: uses \${localEnv:github_token}, a credential-shaped variable of this client, which never crosses into a world; write the value itself; workspaceFolder: uses \${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client, which never crosses into a world; write the value itself (fix the file; it is JSON with comments and trailing commas allowed)`)
  })

  it('substituteLocal gives the empty string for a withheld reference, never the value', () => {
    expect(substituteLocal('a${localEnv:DEEPSEEK_API_KEY}b', { localWorkspaceFolder: '/a', localEnv: secrets })).toEqual({ value: 'ab', unresolved: [], withheld: ['${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client'] })
  })
})

describe('devcontainerSettings: remoteEnv names and values an environment can carry', () => {
  it('refuses a name that is empty or holds "=" or NUL, and a value holding NUL, naming the file and each key', () => {
    const error = (() => { try { devcontainerSettings({ remoteEnv: { 'A=B': 'x', '': 'y', 'C\0D': 'z', E: 'nul\0here', F: 'fine' } }, context) } catch (caught) { return caught } })() as DevcontainerConfigInvalidError
    expect(error).toBeInstanceOf(DevcontainerConfigInvalidError)
    expect(error.problems).toEqual([
      'remoteEnv key "A=B": a name holding "=" cannot name an environment variable',
      'remoteEnv key "": an empty name cannot name an environment variable',
      'remoteEnv key "C\\u0000D": a name holding NUL cannot name an environment variable',
      'remoteEnv.E: the value holds NUL, which no environment variable can carry',
    ])
    expect(error.message.startsWith(`${context.configFile} is not a usable dev container configuration: remoteEnv key "A=B": a name holding "="`)).toBe(true)
  })
})

describe('devcontainerSettings: users', () => {
  it('an empty remoteUser or containerUser is not set (as the reference CLI ignores it)', () => {
    expect(devcontainerSettings({ remoteUser: '', containerUser: '' }, context)).toMatchObject({ remoteUser: undefined, containerUser: undefined })
    expect(devcontainerSettings({ remoteUser: '${localEnv:NOT_SET_ANYWHERE}' }, context).remoteUser).toBeUndefined()
  })

  it('keeps ${containerEnv:VAR} in remoteUser for the container (no longer refused nor passed literally)', () => {
    expect(devcontainerSettings({ remoteUser: '${containerEnv:DEV_USER}' }, context)).toMatchObject({ remoteUser: '${containerEnv:DEV_USER}', unsupported: [] })
  })
})

describe('${devcontainerId}', () => {
  const labels = { 'devcontainer.local_folder': '/home/me/app', 'devcontainer.config_file': '/home/me/app/.devcontainer/devcontainer.json' }

  it('is the specification\'s label-based id: sorted-key JSON, SHA-256, base 32 padded to 52 (values computed independently)', () => {
    expect(devcontainerId(labels)).toBe('06ou05jej6pk8hg0eislv526p6don3sk9be0m6di1v7t6jd8ojii')
    expect(devcontainerId({ 'devcontainer.config_file': labels['devcontainer.config_file'], 'devcontainer.local_folder': labels['devcontainer.local_folder'] })).toBe('06ou05jej6pk8hg0eislv526p6don3sk9be0m6di1v7t6jd8ojii')
    expect(devcontainerId({ 'devcontainer.local_folder': '/home/me/app' })).toBe('164ls7m7bebb1eav3mpntaq8p80hb9udqt333gfnlimvr4mj90v5')
  })

  it('resolves in workspaceFolder and remoteEnv once the container is known, and is not named as unsupported then', () => {
    const id = devcontainerId(labels)
    const settings = devcontainerSettings({ workspaceFolder: '/w/${devcontainerId}', remoteEnv: { ID: '${devcontainerId}' } }, { ...context, devcontainerId: id })
    expect([settings.workspaceFolder, settings.remoteEnv, settings.unsupported]).toEqual([`/w/${id}`, { ID: id }, []])
  })
})

describe('devcontainerEffect: the file over the container\'s devcontainer.metadata label', () => {
  const settings = devcontainerSettings({ remoteEnv: { A: 'file', P: '${containerEnv:PATH}:/x' }, forwardPorts: [1] }, context)

  it('takes the label\'s remoteUser when the file names no user, merges remoteEnv (the file wins), and names the label\'s unsupported properties once', () => {
    const { entries } = metadataEntries(JSON.stringify([{ id: 'feature', remoteUser: 'vscode', remoteEnv: { A: 'image', B: 'image', C: null }, postAttachCommand: 'x', forwardPorts: [2] }]))
    expect(devcontainerEffect(settings, entries, { PATH: '/usr/bin' }, {})).toEqual({
      user: 'vscode',
      userSource: 'remoteUser of the container\'s devcontainer.metadata label',
      userOrigin: { property: 'remoteUser', from: 'label' },
      remoteEnv: { A: 'file', B: 'image', P: '/usr/bin:/x' },
      unset: ['C'],
      forwardPorts: [{ port: 2 }, { port: 1 }],
      unsupported: ['postAttachCommand (the container\'s devcontainer.metadata label)'],
      withheld: [],
    })
  })

  it('forwardPorts: the label\'s entries then the file\'s, their union in order without repeats; portsAttributes labels merged, the file\'s last', () => {
    const file = devcontainerSettings({ forwardPorts: [8080, 3000], portsAttributes: { 3000: { label: 'App' }, 9229: { label: 'Debugger' } } }, context)
    const { entries } = metadataEntries(JSON.stringify([
      { forwardPorts: [3000, 9229], portsAttributes: { 3000: { label: 'Image app' }, 8080: { label: 'Web' } } },
      { forwardPorts: ['localhost:9229', 'db:5432'], portsAttributes: { 9229: { onAutoForward: 'silent' } } },
    ]))
    const effect = devcontainerEffect(file, entries, {}, {})
    expect(effect.forwardPorts).toEqual([{ port: 3000, label: 'App' }, { port: 9229, label: 'Debugger' }, { port: 8080, label: 'Web' }])
    expect(effect.unsupported).toEqual([
      'forwardPorts entry "db:5432" (the container\'s devcontainer.metadata label): only a port of the container\'s own loopback is forwarded (N, "localhost:N" or "127.0.0.1:N", N 1..65535)',
      'portsAttributes.9229.onAutoForward (the container\'s devcontainer.metadata label)',
    ])
    expect(devcontainerForwardPorts(file, entries)).toEqual({ forwardPorts: effect.forwardPorts, unsupported: effect.unsupported })
  })

  it('forwardPorts of a label that is not an array is named, not applied, and the file\'s still are', () => {
    const { entries } = metadataEntries('{"forwardPorts":"3000"}')
    expect(devcontainerForwardPorts(devcontainerSettings({ forwardPorts: [4000] }, context), entries)).toEqual({
      forwardPorts: [{ port: 4000 }],
      unsupported: ['forwardPorts (the container\'s devcontainer.metadata label): must be an array of ports or "host:port" strings'],
    })
  })

  it('the merged remoteUser wins over a containerUser; the file\'s own remoteUser wins over the label\'s', () => {
    const { entries } = metadataEntries('{"remoteUser":"vscode"}')
    expect(devcontainerEffect(devcontainerSettings({ containerUser: 'builder' }, context), entries, {}, {}).user).toBe('vscode')
    expect(devcontainerEffect(devcontainerSettings({ remoteUser: 'agent' }, context), entries, {}, {})).toMatchObject({ user: 'agent', userSource: 'remoteUser of devcontainer.json', userOrigin: { property: 'remoteUser', from: 'file' } })
    expect(devcontainerEffect(devcontainerSettings({}, context), [], {}, {})).toMatchObject({ user: undefined, userOrigin: undefined })
  })

  it('an empty remoteUser in the file leaves the label\'s user in force', () => {
    const { entries } = metadataEntries('[{"remoteUser":"vscode"},{"remoteUser":""}]')
    expect(devcontainerEffect(devcontainerSettings({ remoteUser: '' }, context), entries, {}, {})).toMatchObject({ user: 'vscode', userOrigin: { property: 'remoteUser', from: 'label' } })
  })

  it('${containerEnv:VAR} in remoteUser is read from the container\'s environment; resolving to nothing, it is not set', () => {
    const file = devcontainerSettings({ remoteUser: '${containerEnv:DEV_USER}', containerUser: '${containerEnv:NONE}' }, context)
    expect(devcontainerEffect(file, [], { DEV_USER: 'vscode' }, {})).toMatchObject({ user: 'vscode', userSource: 'remoteUser of devcontainer.json' })
    expect(devcontainerEffect(file, [], {}, {})).toMatchObject({ user: undefined, userOrigin: undefined })
  })

  it('the label\'s remoteEnv: a withheld ${localEnv:...} and a name no environment can carry are not applied, and named', () => {
    const { entries } = metadataEntries(JSON.stringify([{ remoteUser: '${localEnv:DSH_USER}', remoteEnv: { TOKEN_COPY: '${localEnv:DEEPSEEK_API_KEY}', 'X=Y': 'v', OK: 'yes' } }]))
    expect(devcontainerEffect(devcontainerSettings({}, context), entries, {}, { DEEPSEEK_API_KEY: 'sk-secret', DSH_USER: 'x' })).toEqual({
      user: undefined,
      userSource: 'the container\'s own user (neither devcontainer.json nor the container\'s metadata names remoteUser or containerUser)',
      userOrigin: undefined,
      remoteEnv: { OK: 'yes' },
      unset: [],
      forwardPorts: [],
      unsupported: ['remoteEnv key "X=Y" (the container\'s devcontainer.metadata label): a name holding "=" cannot name an environment variable'],
      withheld: [
        'remoteUser of the container\'s devcontainer.metadata label uses ${localEnv:DSH_USER}, a DSH_* variable of this client',
        'remoteEnv.TOKEN_COPY of the container\'s devcontainer.metadata label uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client',
      ],
    })
  })

  it('a label that is not JSON is named, not applied', () => {
    expect(metadataEntries('{oops')).toMatchObject({ entries: [], problem: expect.stringMatching(/^the container's devcontainer.metadata label is not JSON \(.*\): not applied$/) })
    expect(metadataEntries('[1]')).toEqual({ entries: [], problem: 'the container\'s devcontainer.metadata label is not an object or an array of objects: not applied' })
  })
})

describe('readDevcontainerSettings', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-devcontainer-unit-')))
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  it('reads .devcontainer/devcontainer.json, else .devcontainer.json', () => {
    const project = join(root, 'app')
    mkdirSync(join(project, '.devcontainer'), { recursive: true })
    writeFileSync(join(project, '.devcontainer.json'), '{ "remoteUser": "second" }')
    expect(readDevcontainerSettings(project, {}).remoteUser).toBe('second')
    writeFileSync(join(project, '.devcontainer', 'devcontainer.json'), FIXTURE_JSON)
    expect(readDevcontainerSettings(project, {}).remoteUser).toBe('agent')
  })

  it('a folder reached through a symlink keeps the link\'s path, as the reference CLI (path.resolve): /workspaces/<link name>', () => {
    symlinkSync(join(root, 'app'), join(root, 'link'))
    const settings = readDevcontainerSettings(join(root, 'link'), {})
    expect([settings.folder, settings.configFile, settings.workspaceFolder]).toEqual([join(root, 'link'), join(root, 'link', '.devcontainer', 'devcontainer.json'), '/workspaces/link'])
    expect(devcontainerSettings({ remoteEnv: { L: '${localWorkspaceFolder}' } }, { ...context, folder: settings.folder }).remoteEnv).toEqual({ L: join(root, 'link') })
    expect(readDevcontainerSettings(join(root, 'link'), {}, { config: join(root, 'app', '.devcontainer.json') })).toMatchObject({ configFile: join(root, 'app', '.devcontainer.json'), remoteUser: 'second', workspaceFolder: '/workspaces/link' })
  })

  it('defaults the workspace folder below the git root', () => {
    mkdirSync(join(root, 'repo', '.git'), { recursive: true })
    mkdirSync(join(root, 'repo', 'svc'), { recursive: true })
    writeFileSync(join(root, 'repo', 'svc', '.devcontainer.json'), '{}')
    expect(readDevcontainerSettings(join(root, 'repo', 'svc'), {}).workspaceFolder).toBe('/workspaces/repo/svc')
  })

  it('names the fix when the folder, its configuration or the --config file is missing', () => {
    mkdirSync(join(root, 'bare'))
    expect(() => readDevcontainerSettings(join(root, 'bare'), {})).toThrow(new DevcontainerConfigMissingError(join(root, 'bare')))
    expect(() => readDevcontainerSettings(join(root, 'bare'), {})).toThrow(`${join(root, 'bare')} has no dev container configuration: neither ${join(root, 'bare')}/.devcontainer/devcontainer.json nor ${join(root, 'bare')}/.devcontainer.json exists (pass the folder that holds it, --config FILE for one elsewhere such as ${join(root, 'bare')}/.devcontainer/<name>/devcontainer.json, or attach to a container with --docker CONTAINER)`)
    expect(() => readDevcontainerSettings(join(root, 'nowhere'), {})).toThrow(new InvalidArgumentError(`dev container folder ${join(root, 'nowhere')}: no such folder`))
    expect(() => readDevcontainerSettings(join(root, 'bare'), {}, { config: join(root, 'bare', 'nope.json') })).toThrow(`the dev container configuration ${join(root, 'bare', 'nope.json')} does not exist (pass --config the devcontainer.json a container of ${join(root, 'bare')} was made from; the runtime's \`devcontainer.config\`)`)
  })

  it('resolveTarget: --config without --devcontainer is a usage error', async () => {
    await expect(resolveTarget({ docker: 'c1', config: 'x.json' })).rejects.toThrow(new InvalidArgumentError('--config applies to --devcontainer targets only'))
  })
})

describe('chooseDevcontainer: which container of a folder, and which file applies', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-devcontainer-choose-')))
  afterAll(() => rmSync(root, { recursive: true, force: true }))
  const app = join(root, 'app')
  mkdirSync(join(app, '.devcontainer', 'python'), { recursive: true })
  const main = join(app, '.devcontainer', 'devcontainer.json')
  const python = join(app, '.devcontainer', 'python', 'devcontainer.json')
  writeFileSync(main, '{}')
  writeFileSync(python, '{}')
  // A shared configuration, linked into the project.
  writeFileSync(join(root, 'shared.json'), '{}')
  symlinkSync(join(root, 'shared.json'), join(app, '.devcontainer', 'shared.json'))
  symlinkSync(app, join(root, 'link'))
  const folder = projectFolder(app)
  const candidate = (id: string, configFile: string | undefined): DevcontainerCandidate => ({ id: id.padEnd(64, '0'), name: `c-${id}`, state: 'running', localFolder: app, configFile })

  it('projectFolder keeps a symlinked folder\'s path beside its real path', () => {
    expect(projectFolder(join(root, 'link'))).toEqual({ folder: join(root, 'link'), real: app })
  })

  it('prefers the container made from the default file over one made from another', () => {
    const other = candidate('aaa', python)
    const wanted = candidate('bbb', main)
    expect(chooseDevcontainer(folder, [other, wanted], { defaultConfig: main })).toEqual({ candidate: wanted, configFile: main })
  })

  it('a container made before the config_file label existed takes the default file', () => {
    const legacy = candidate('ccc', undefined)
    expect(chooseDevcontainer(folder, [legacy, candidate('aaa', join(root, 'gone.json'))], { defaultConfig: main })).toEqual({ candidate: legacy, configFile: main })
  })

  it('without --config, the only container of the folder is read with THE file it was made from', () => {
    const only = candidate('aaa', python)
    expect(chooseDevcontainer(folder, [only], { defaultConfig: main })).toEqual({ candidate: only, configFile: python })
    expect(chooseDevcontainer(folder, [only], {})).toEqual({ candidate: only, configFile: python })
  })

  it('--config picks by the file, compared through realpath on both sides (a folder link, a config link)', () => {
    const viaLink = candidate('aaa', join(root, 'link', '.devcontainer', 'python', 'devcontainer.json'))
    const shared = candidate('bbb', join(app, '.devcontainer', 'shared.json'))
    expect(chooseDevcontainer(folder, [viaLink, shared, candidate('ccc', main)], { config: python, defaultConfig: main })).toEqual({ candidate: viaLink, configFile: python })
    expect(chooseDevcontainer(folder, [viaLink, shared], { config: join(root, 'shared.json') })).toEqual({ candidate: shared, configFile: join(root, 'shared.json') })
  })

  it('--config matching none: the error lists the folder\'s containers with the file each was made from', () => {
    const containers = [candidate('aaa', main), candidate('bbb', join(root, 'gone.json'))]
    const error = (() => { try { chooseDevcontainer(folder, containers, { config: python, defaultConfig: main }) } catch (caught) { return caught } })() as DevcontainerNotFoundError
    expect(error).toBeInstanceOf(DevcontainerNotFoundError)
    expect(error.message).toBe([
      `no dev container of ${app} was made from ${python}: 2 containers carry the label devcontainer.local_folder=${app} with another devcontainer.config_file:`,
      `  aaa000000000  c-aaa  running  config ${main}`,
      `  bbb000000000  c-bbb  running  config ${join(root, 'gone.json')}`,
      `attach to one with --config FILE naming its configuration (the runtime's \`devcontainer.config\`), or start one from ${python} with \`devcontainer up --workspace-folder ${app} --config ${python}\``,
    ].join('\n'))
  })

  it('several made from other files: ambiguous, naming --config', () => {
    const containers = [candidate('aaa', python), candidate('bbb', join(app, '.devcontainer', 'shared.json'))]
    expect(() => chooseDevcontainer(folder, containers, { defaultConfig: main })).toThrow(new DevcontainerAmbiguousError(app, containers))
    expect(new DevcontainerAmbiguousError(app, containers).message.split('\n').at(-1)).toBe('pick one by the configuration it was made from with --config FILE, remove the ones no longer used (docker rm -f ID), or attach to one with --docker ID')
  })

  it('no configuration file and no container naming one: the configuration is missing', () => {
    expect(() => chooseDevcontainer(folder, [candidate('ccc', undefined)], {})).toThrow(new DevcontainerConfigMissingError(app))
  })
})

describe('DevcontainerUserNotFoundError', () => {
  const resolved: ResolvedDevcontainer = {
    folder: '/home/me/app', configFile: '/home/me/app/.devcontainer/devcontainer.json', container: '0123456789abcdef', name: 'app-dev', started: false,
    user: 'vscode', userSource: 'remoteUser of the container\'s devcontainer.metadata label', userOrigin: { property: 'remoteUser', from: 'label' },
    workspaceFolder: '/workspaces/app', workspaceFolderSource: 'default', remoteEnv: {}, unset: [], forwardPorts: [], atCreation: [], unsupported: [], withheld: [],
  }

  it('names the metadata label when the user comes from it, and where to set another', () => {
    const error = new DevcontainerUserNotFoundError(resolved, 'vscode', 'unable to find user vscode: no matching entries in passwd file')
    expect([error.code, error.message]).toEqual(['DEVCONTAINER_USER_NOT_FOUND', 'the dev container of /home/me/app, 0123456789ab (app-dev), has no user vscode (the engine says: unable to find user vscode: no matching entries in passwd file); vscode is the remoteUser of the container\'s devcontainer.metadata label (its image\'s or a Feature\'s): set remoteUser in /home/me/app/.devcontainer/devcontainer.json to a user the container has, or pass --user USER (the runtime\'s `user`) to run as another one'])
  })

  it('names the file and containerUser when that is the property', () => {
    const error = new DevcontainerUserNotFoundError({ ...resolved, user: 'builder', userOrigin: { property: 'containerUser', from: 'file' } }, 'builder', 'unable to find user builder: no matching entries in passwd file')
    expect(error.message).toBe('the dev container of /home/me/app, 0123456789ab (app-dev), has no user builder (the engine says: unable to find user builder: no matching entries in passwd file); builder is the containerUser of /home/me/app/.devcontainer/devcontainer.json: set containerUser there to a user the container has, or pass --user USER (the runtime\'s `user`) to run as another one')
  })
})
