/**
 * The REAL, UNCHANGED upstream file tools over a world's `ctx.fs` and `ctx.subprocess`, called
 * through cordis exactly as a DSH agent calls them (`ctx.tools.execute` with an agent whose
 * session cwd is the workspace folder), world-neutral: `@deepseek-ai/dsh-tool-fs` (read, write,
 * edit) with `@deepseek-ai/dsh-fs-observation-policy`, `@deepseek-ai/dsh-tool-fs-search` (glob,
 * grep: the packaged ripgrep's host path runs as the world's rg) and
 * `@deepseek-ai/dsh-tool-str-replace-editor`. Every result is asserted as the tool renders it
 * (text, and the FsError code the registry exposes); the world's files are set up and checked
 * through the same world's persistent terminal or a SEPARATE `docker exec` (never the file
 * server under test).
 */
import { randomUUID } from 'node:crypto'
import type { Context } from '@deepseek-ai/cordis'
import type { Agent } from '@deepseek-ai/dsh-agent'
import * as FsObservationPolicy from '@deepseek-ai/dsh-fs-observation-policy'
import { CallId } from '@deepseek-ai/dsh-llm'
import SystemPrompt from '@deepseek-ai/dsh-system-prompt'
import * as ToolFs from '@deepseek-ai/dsh-tool-fs'
import * as ToolFsSearch from '@deepseek-ai/dsh-tool-fs-search'
import * as ToolStrReplaceEditor from '@deepseek-ai/dsh-tool-str-replace-editor'
import ToolRuntime, { type ToolExecutionResult } from '@deepseek-ai/dsh-tools'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, type WorldTerminal, ownerAgent } from '../../src/backend/world.ts'
import { hangGuard, waitFor } from '../docker/helpers.ts'
import { run } from '../sandbox/helpers.ts'
import { codeOf, inWorld } from './fs-cases.ts'

/**
 * The workspace root in the worlds. Absent on the test machine: upstream's sandbox policy
 * canonicalizes a workspace root (and a session cwd) with the LOCAL realpath when it exists here.
 */
export const WORKSPACE = '/dsh-ws-tools'

/** What `hello.txt` in a read-only world's workspace holds. */
export const READ_ONLY_HELLO = 'hello from the host\n'

/** The tool plugins, in upstream's order, as `openWorld({ plugins })` loads them (after ctx.fs). */
export const TOOL_PLUGINS: readonly ((ctx: Context) => Promise<unknown>)[] = [
  async ctx => ctx.plugin(SystemPrompt),
  async ctx => ctx.plugin(ToolRuntime),
  async ctx => ctx.plugin(FsObservationPolicy),
  async ctx => ctx.plugin(ToolFs),
  async ctx => ctx.plugin(ToolFsSearch, { sampleOverCapGlobResults: true }),
  async ctx => ctx.plugin(ToolStrReplaceEditor),
]

/** A read-only world with {@link WORKSPACE}/hello.txt holding {@link READ_ONLY_HELLO}. */
export interface ReadOnlyWorld {
  world: RemoteWorld
  /** The container its files live in (checked as root through a separate exec). */
  containerId: string
  dispose(): Promise<void>
}

/** What a world supplies to the suite. */
export interface FsToolWorld {
  /** `docker` or `ssh`, for test names. */
  name: string
  /** The container the full-access world's files live in. */
  containerId(): string
  /** A world (openWorld, danger-full-access) running as `agent`, workspace {@link WORKSPACE}, with `plugins`. */
  open(plugins: readonly ((ctx: Context) => Promise<unknown>)[]): Promise<RemoteWorld>
  /** A world composed with `mode: 'read-only'` whose sandbox really confines (its own container). */
  openReadOnly(plugins: readonly ((ctx: Context) => Promise<unknown>)[]): Promise<ReadOnlyWorld>
}

/**
 * An agent like openWorld's owner agent (src/backend/world.ts `ownerAgent`), but whose session
 * header carries `cwd`: the tools resolve relative paths against `exec.agent.session.header.cwd`,
 * ripgrep runs there, and the observation policy keys what was read by this session.
 */
export function toolAgent(world: RemoteWorld, cwd: string): Agent {
  return ownerAgent(world.ctx, `fs-tools-${randomUUID()}`, { cwd })
}

let calls = 0

/** One tool call, as the agent loop makes it. */
export function callTool(world: RemoteWorld, agent: Agent, name: string, args: Record<string, unknown>): Promise<ToolExecutionResult> {
  calls += 1
  return world.ctx.tools.execute({ signal: new AbortController().signal, callId: CallId(`call-${calls}`), name, arguments: args, agent })
}

/** The one text block of a result. */
export function textOf(result: ToolExecutionResult): string {
  expect(result.content.length).toBe(1)
  const block = result.content[0]!
  expect(block.type).toBe('text')
  return (block as { text: string }).text
}

/** A successful result showing exactly `text`. */
export function expectShows(result: ToolExecutionResult, text: string): void {
  expect(result.isError, textOf(result)).toBe(false)
  expect(textOf(result)).toBe(text)
}

/** A failed result: an FsError with `code` (as the registry exposes it), shown as `Error: <message>`. */
export function expectFsError(result: ToolExecutionResult, code: string, message: string | RegExp): void {
  expect(result.isError, textOf(result)).toBe(true)
  expect(result).toMatchObject({ error: { info: { name: 'FsError', code } } })
  if (typeof message === 'string') {
    expect(textOf(result)).toBe(`Error: ${message}`)
    expect((result as { error: { message: string } }).error.message).toBe(message)
  } else {
    expect(textOf(result)).toMatch(message)
  }
}

/** The canonical value of a successful result. */
export function valueOf<T>(result: ToolExecutionResult): T {
  expect(result.isError, textOf(result)).toBe(false)
  return (result as unknown as { value: T }).value
}

/** dsh-tool-fs's read envelope of a whole file shown from line 1 (formatReadOutput). */
export function wholeFile(path: string, lines: readonly string[]): string {
  const body = lines.length === 0 ? '' : `${lines.map((line, index) => `${index + 1}: ${line}`).join('\n')}\n\n`
  return `<path>${path}</path>\n<type>file</type>\n<content>\n${body}(End of file - total ${lines.length} lines)\n</content>`
}

/** dsh-tool-fs's write envelope (formatWriteOutput). */
export function written(path: string, operation: 'Created' | 'Updated'): string {
  return `<path>${path}</path>\n<type>file</type>\n<content>\n${operation} file\n</content>`
}

/** The two lines dsh-tool-fs shows for a FS_SANDBOX_DENIED (dsh-sandbox's marker and escalation hint). */
export function sandboxDenied(mode: string): string {
  return `[sandbox: file access denied under ${mode} mode]\n[sandbox: escalation available — retry this exact operation once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]`
}

/** 50 MiB of text: 524288 lines of 100 bytes (`NNNNNNN ` and 91 `x`, then LF). */
const BIG_LINES = 524_288
const bigLine = (n: number): string => `${String(n).padStart(7, '0')} ${'x'.repeat(91)}`
const BIG_SCRIPT = `import sys\nw = sys.stdout.write\nfor i in range(1, ${BIG_LINES + 1}):\n    w('%07d ' % i + 'x' * 91 + '\\n')`

let nextDir = 0

/** Register the suite. */
export function fsToolCases(world: FsToolWorld): void {
  describe(`the upstream file tools in the ${world.name} world`, () => {
    let remote: RemoteWorld
    /** A script in the world, outside the file server (as agent: the files it makes are agent's). */
    const sh = (script: string, user = 'agent'): Promise<string> => inWorld(world.containerId(), script, user)

    /** A fresh workspace folder (agent's) and an agent whose session cwd is that folder. */
    const fresh = async (): Promise<{ dir: string; agent: Agent; call: (name: string, args: Record<string, unknown>) => Promise<ToolExecutionResult> }> => {
      nextDir += 1
      const dir = `${WORKSPACE}/t${process.pid}-${nextDir}`
      await sh(`mkdir -p ${dir} && chown agent:agent ${dir}`, 'root')
      const agent = toolAgent(remote, dir)
      return { dir, agent, call: (name, args) => callTool(remote, agent, name, args) }
    }

    /** A persistent shell of the same world in `cwd`, closed after `body`. */
    const withTerminal = async <T>(cwd: string, body: (terminal: WorldTerminal) => Promise<T>): Promise<T> => {
      const terminal = await remote.open({ cwd })
      try {
        return await body(terminal)
      } finally {
        await terminal.close()
      }
    }

    beforeAll(async () => {
      remote = await world.open(TOOL_PLUGINS)
      await sh(`mkdir -p ${WORKSPACE} && chown agent:agent ${WORKSPACE}`, 'root')
    })

    afterAll(async () => {
      await remote?.dispose()
    })

    describe('write and read beside the persistent terminal', () => {
      it('the terminal cats exactly what write created and replaced; read shows exactly what the terminal wrote', async () => {
        const { dir, call } = await fresh()
        const content = 'first line\n  second: "quoted" $HOME ü\nthird\n'
        expectShows(await call('write', { file_path: 'notes/hello.txt', content }), written(`${dir}/notes/hello.txt`, 'Created'))
        expect(await sh(`cat ${dir}/notes/hello.txt; stat -c '%U %a' ${dir}/notes/hello.txt`)).toBe(`${content}agent 644\n`)
        await withTerminal(dir, async terminal => {
          expect(await run(terminal, 'cat notes/hello.txt')).toBe('first line\n  second: "quoted" $HOME ü\nthird')
          // The write recorded the version it published, so a second write replaces without a read.
          expectShows(await call('write', { file_path: 'notes/hello.txt', content: 'replaced\n' }), written(`${dir}/notes/hello.txt`, 'Updated'))
          expect(await run(terminal, 'cat notes/hello.txt')).toBe('replaced')

          expect(await run(terminal, 'printf \'from the shell\\nline two ü\\n\' > shell.txt')).toBe('')
        })
        expectShows(await call('read', { file_path: 'shell.txt' }), wholeFile(`${dir}/shell.txt`, ['from the shell', 'line two ü']))
        expectShows(await call('read', { file_path: `${dir}/shell.txt`, offset: 1, limit: 1 }),
          `<path>${dir}/shell.txt</path>\n<type>file</type>\n<content>\n1: from the shell\n\n(Showing lines 1-1 of 2. Use offset=2 to continue.)\n</content>`)
        expectShows(await call('read', { file_path: 'shell.txt', offset: 2 }),
          `<path>${dir}/shell.txt</path>\n<type>file</type>\n<content>\n2: line two ü\n\n(End of file - total 2 lines)\n</content>`)
        expectFsError(await call('read', { file_path: 'shell.txt', offset: 3 }), 'FS_NOT_FOUND', `offset 3 is out of range for "${dir}/shell.txt" (2 lines)`)
      })
    })

    describe('edit and the observation policy', () => {
      it('edit after read changes the file in the world; the recorded version lets a second edit follow', async () => {
        const { dir, call } = await fresh()
        await sh(`printf 'alpha\\nbeta\\ngamma\\n' > ${dir}/code.txt`)
        expectShows(await call('read', { file_path: 'code.txt' }), wholeFile(`${dir}/code.txt`, ['alpha', 'beta', 'gamma']))
        expectShows(await call('edit', { file_path: 'code.txt', old_string: 'beta', new_string: 'BETA' }), `The file ${dir}/code.txt has been updated successfully.`)
        expect(await sh(`cat ${dir}/code.txt`)).toBe('alpha\nBETA\ngamma\n')
        expectShows(await call('edit', { file_path: 'code.txt', old_string: 'a', new_string: 'A', replace_all: true }), `The file ${dir}/code.txt has been updated. All occurrences were successfully replaced.`)
        expect(await sh(`cat ${dir}/code.txt`)).toBe('AlphA\nBETA\ngAmmA\n')
        expectFsError(await call('edit', { file_path: 'code.txt', old_string: 'A', new_string: 'a' }), 'FS_AMBIGUOUS_EDIT',
          `old_string matched 5 times in "${dir}/code.txt"; provide a more specific old_string or set replace_all to true`)
        expectFsError(await call('edit', { file_path: 'code.txt', old_string: 'delta', new_string: 'x' }), 'FS_EDIT_NOT_FOUND', `old_string was not found in "${dir}/code.txt"`)
        expect(await sh(`cat ${dir}/code.txt`)).toBe('AlphA\nBETA\ngAmmA\n')
      })

      it('a file this session just created needs no read before edit (the version write recorded is the file\'s)', async () => {
        const { dir, call } = await fresh()
        expectShows(await call('write', { file_path: 'made.txt', content: 'draft one\n' }), written(`${dir}/made.txt`, 'Created'))
        expectShows(await call('edit', { file_path: 'made.txt', old_string: 'one', new_string: 'two' }), `The file ${dir}/made.txt has been updated successfully.`)
        expectShows(await call('write', { file_path: 'made.txt', content: 'final\n' }), written(`${dir}/made.txt`, 'Updated'))
        expect(await sh(`cat ${dir}/made.txt; ls -A ${dir}`)).toBe('final\nmade.txt\n')
      })

      it('edit and write of a file this session never read are refused (FS_NOT_OBSERVED); the file is unchanged', async () => {
        const { dir, call } = await fresh()
        await sh(`printf 'keep me\\n' > ${dir}/untouched.txt`)
        expectFsError(await call('edit', { file_path: 'untouched.txt', old_string: 'keep', new_string: 'lose' }), 'FS_NOT_OBSERVED',
          `edit requires reading "${dir}/untouched.txt" first — read the file, then retry`)
        expectFsError(await call('write', { file_path: 'untouched.txt', content: 'clobbered\n' }), 'FS_NOT_OBSERVED',
          `cannot overwrite existing "${dir}/untouched.txt" without reading it first — read the file, then retry`)
        expect(await sh(`cat ${dir}/untouched.txt; ls -A ${dir}`)).toBe('keep me\nuntouched.txt\n')
        // Another session's read does not count for this one.
        const other = toolAgent(remote, dir)
        expect((await callTool(remote, other, 'read', { file_path: 'untouched.txt' })).isError).toBe(false)
        expectFsError(await call('edit', { file_path: 'untouched.txt', old_string: 'keep', new_string: 'lose' }), 'FS_NOT_OBSERVED',
          `edit requires reading "${dir}/untouched.txt" first — read the file, then retry`)
      })

      it('after a read, the shell changes the file: edit and write are refused as stale and the shell\'s content stays; a re-read lets the edit through', async () => {
        const { dir, call } = await fresh()
        await sh(`printf 'original\\n' > ${dir}/stale.txt`)
        expectShows(await call('read', { file_path: 'stale.txt' }), wholeFile(`${dir}/stale.txt`, ['original']))
        await withTerminal(dir, async terminal => {
          expect(await run(terminal, 'printf \'changed by the shell\\n\' > stale.txt')).toBe('')
        })
        expectFsError(await call('edit', { file_path: 'stale.txt', old_string: 'original', new_string: 'edited' }), 'FS_STALE_VERSION',
          `cannot edit "${dir}/stale.txt": file changed since it was read — re-read the file, then retry`)
        expectFsError(await call('write', { file_path: 'stale.txt', content: 'overwritten\n' }), 'FS_STALE_VERSION',
          `cannot write "${dir}/stale.txt": file changed since it was read — re-read the file, then retry`)
        expect(await sh(`cat ${dir}/stale.txt; ls -A ${dir}`)).toBe('changed by the shell\nstale.txt\n')
        expectShows(await call('read', { file_path: 'stale.txt' }), wholeFile(`${dir}/stale.txt`, ['changed by the shell']))
        expectShows(await call('edit', { file_path: 'stale.txt', old_string: 'shell', new_string: 'edit tool' }), `The file ${dir}/stale.txt has been updated successfully.`)
        expect(await sh(`cat ${dir}/stale.txt`)).toBe('changed by the edit tool\n')
      })

      it('str_replace_editor: view, str_replace, create, and a stale str_replace after the shell changed the file', async () => {
        const { dir, call } = await fresh()
        await sh(`printf 'one\\ntwo\\n' > ${dir}/editor.txt`)
        expectShows(await call('str_replace_editor', { command: 'view', path: `${dir}/editor.txt` }),
          `Here's the content of ${dir}/editor.txt with line numbers (which has a total of 3 lines):\n     1  one\n     2  two\n     3  \n`)
        expectShows(await call('str_replace_editor', { command: 'str_replace', path: `${dir}/editor.txt`, old_str: 'two', new_str: 'TWO' }), `The file ${dir}/editor.txt has been edited successfully.`)
        expect(await sh(`cat ${dir}/editor.txt`)).toBe('one\nTWO\n')
        expectShows(await call('str_replace_editor', { command: 'create', path: `${dir}/made/new.txt`, file_text: 'made\n' }), `New file created successfully at: ${dir}/made/new.txt`)
        expect(await sh(`cat ${dir}/made/new.txt`)).toBe('made\n')
        await sh(`printf 'one\\nTWO by the shell\\n' > ${dir}/editor.txt`)
        expectFsError(await call('str_replace_editor', { command: 'str_replace', path: `${dir}/editor.txt`, old_str: 'one', new_str: 'ONE' }), 'FS_STALE_VERSION',
          `cannot write "${dir}/editor.txt": file changed since it was read`)
        expect(await sh(`cat ${dir}/editor.txt`)).toBe('one\nTWO by the shell\n')
      })
    })

    describe('glob and grep (the world\'s ripgrep) over what the shell made', () => {
      it('find exactly the shell\'s files, and read opens every path they return', async () => {
        const { dir, call } = await fresh()
        const files: Record<string, string> = {
          'src/app.ts': 'import { util } from \'./lib/util\'\n// TODO: wire the app\n',
          'src/lib/util.ts': 'export function util() {}\n// TODO: test util\n',
          'src/lib/deep/inner.ts': 'export const inner = \'no marker here\'\n',
          '.hidden/secret.ts': '// TODO: hidden\n',
          'docs/guide.md': '# Guide\nTODO: write the guide\n',
        }
        await withTerminal(dir, async terminal => {
          expect(await run(terminal, 'mkdir -p src/lib/deep docs .hidden')).toBe('')
          for (const [path, content] of Object.entries(files)) {
            // A double-quoted printf format: the shell keeps \n for printf, which prints a newline.
            expect(await run(terminal, `printf ${JSON.stringify(content)} > ${path}`)).toBe('')
          }
          // Distinct modification times, oldest first: glob lists by modification time.
          expect(await run(terminal, 'touch -d "2020-01-01 00:00:01" src/app.ts; touch -d "2020-01-01 00:00:02" src/lib/util.ts')).toBe('')
          expect(await run(terminal, 'touch -d "2020-01-01 00:00:03" src/lib/deep/inner.ts; touch -d "2020-01-01 00:00:04" .hidden/secret.ts')).toBe('')
          expect(await run(terminal, 'touch -d "2020-01-01 00:00:05" docs/guide.md')).toBe('')
        })
        for (const [path, content] of Object.entries(files)) expect(await sh(`cat ${dir}/${path}`)).toBe(content)

        const all = await call('glob', { pattern: '**/*.ts' })
        expectShows(all, 'src/app.ts\nsrc/lib/util.ts\nsrc/lib/deep/inner.ts\n.hidden/secret.ts')
        expect(valueOf<{ root: string; paths: string[] }>(all)).toEqual({ root: '.', paths: ['src/app.ts', 'src/lib/util.ts', 'src/lib/deep/inner.ts', '.hidden/secret.ts'] })
        expectShows(await call('glob', { pattern: '*.ts', path: 'src/lib' }), 'src/lib/util.ts\nsrc/lib/deep/inner.ts')
        expectShows(await call('glob', { pattern: '*', path: `${dir}/docs` }), 'docs/guide.md')
        expectShows(await call('glob', { pattern: '*.rs' }), 'No files found')

        // grep: ripgrep searches files in parallel, so files come in no promised order; within a
        // file, matches come in line order. Hidden files are not searched (no --hidden).
        const grep = await call('grep', { pattern: 'TODO' })
        const grepText = textOf(grep)
        expect(grepText.startsWith('Found 3 matches\n\n')).toBe(true)
        expect(grepText.slice('Found 3 matches\n\n'.length).split('\n\n').sort()).toEqual([
          'docs/guide.md\nLine 2: TODO: write the guide',
          'src/app.ts\nLine 2: // TODO: wire the app',
          'src/lib/util.ts\nLine 2: // TODO: test util',
        ])
        const matches = valueOf<{ matches: { path: string; lineNumber: number; line: string }[] }>(grep).matches
        expect([...matches].sort((a, b) => a.path.localeCompare(b.path))).toEqual([
          { path: 'docs/guide.md', lineNumber: 2, line: 'TODO: write the guide' },
          { path: 'src/app.ts', lineNumber: 2, line: '// TODO: wire the app' },
          { path: 'src/lib/util.ts', lineNumber: 2, line: '// TODO: test util' },
        ])
        expectShows(await call('grep', { pattern: 'TODO', include: '*.md' }), 'Found 1 match\n\ndocs/guide.md\nLine 2: TODO: write the guide')
        expectShows(await call('grep', { pattern: 'util\\(\\)', path: 'src/lib' }), 'Found 1 match\n\nsrc/lib/util.ts\nLine 1: export function util() {}')
        expectShows(await call('grep', { pattern: 'no such text' }), 'No matches found')
        const invalid = await call('grep', { pattern: '(' })
        expect(invalid).toMatchObject({ isError: true, error: { info: { name: 'SearchError', code: 'SEARCH_INVALID_PATTERN' } } })
        expect(textOf(invalid).startsWith('Error: grep pattern rejected by ripgrep: regex parse error:')).toBe(true)

        const returned = new Set([...valueOf<{ paths: string[] }>(all).paths, ...matches.map(match => match.path)])
        expect(returned.size).toBe(5)
        for (const path of returned) {
          const lines = files[path]!.replace(/\n$/, '').split('\n')
          expectShows(await call('read', { file_path: path }), wholeFile(`${dir}/${path}`, lines))
        }
      })
    })

    describe('a read-only world', () => {
      let readOnly: ReadOnlyWorld
      beforeAll(async () => { readOnly = await world.openReadOnly(TOOL_PLUGINS) })
      afterAll(async () => { await readOnly?.dispose() })

      it('read works; write, edit and str_replace_editor are refused with the sandbox marker; nothing changed in the world', async () => {
        const ro = readOnly.world
        expect(ro.fs!.sandboxMode).toBe('read-only')
        const agent = toolAgent(ro, WORKSPACE)
        const call = (name: string, args: Record<string, unknown>): Promise<ToolExecutionResult> => callTool(ro, agent, name, args)
        const before = await inWorld(readOnly.containerId, `ls -lA --time-style=+%s.%N ${WORKSPACE}; sha256sum ${WORKSPACE}/hello.txt`)
        expectShows(await call('read', { file_path: 'hello.txt' }), wholeFile(`${WORKSPACE}/hello.txt`, ['hello from the host']))
        expectFsError(await call('write', { file_path: 'hello.txt', content: 'changed\n' }), 'FS_SANDBOX_DENIED', sandboxDenied('read-only'))
        expectFsError(await call('write', { file_path: 'new/created.txt', content: 'new\n' }), 'FS_SANDBOX_DENIED', sandboxDenied('read-only'))
        expectFsError(await call('edit', { file_path: 'hello.txt', old_string: 'hello', new_string: 'bye' }), 'FS_SANDBOX_DENIED', sandboxDenied('read-only'))
        expectFsError(await call('str_replace_editor', { command: 'create', path: `${WORKSPACE}/made.txt`, file_text: 'x' }), 'FS_SANDBOX_DENIED', '[sandbox: file access denied under read-only mode]')
        expectFsError(await call('str_replace_editor', { command: 'str_replace', path: `${WORKSPACE}/hello.txt`, old_str: 'hello', new_str: 'bye' }), 'FS_SANDBOX_DENIED', '[sandbox: file access denied under read-only mode]')
        expectShows(await call('grep', { pattern: 'host' }), 'Found 1 match\n\nhello.txt\nLine 1: hello from the host')
        expect(await inWorld(readOnly.containerId, `ls -lA --time-style=+%s.%N ${WORKSPACE}; sha256sum ${WORKSPACE}/hello.txt`)).toBe(before)
        expect(await inWorld(readOnly.containerId, `cat ${WORKSPACE}/hello.txt; ls -A ${WORKSPACE}`)).toBe(`${READ_ONLY_HELLO}hello.txt\n`)
      })
    })

    describe('inputs through the tools', () => {
      it('a CRLF file: read shows its lines, edit keeps CRLF on disk', async () => {
        const { dir, call } = await fresh()
        await sh(`printf 'one\\r\\ntwo\\r\\nthree\\r\\n' > ${dir}/crlf.txt`)
        expectShows(await call('read', { file_path: 'crlf.txt' }), wholeFile(`${dir}/crlf.txt`, ['one', 'two', 'three']))
        expectShows(await call('edit', { file_path: 'crlf.txt', old_string: 'two\n', new_string: 'TWO\nextra\n' }), `The file ${dir}/crlf.txt has been updated successfully.`)
        expect(await sh(`od -An -c ${dir}/crlf.txt | tr -s ' ' | tr -d '\\n'`)).toBe(' o n e \\r \\n T W O \\r \\n e x t r a \\r \\n t h r e e \\r \\n')
        expectShows(await call('read', { file_path: 'crlf.txt' }), wholeFile(`${dir}/crlf.txt`, ['one', 'TWO', 'extra', 'three']))
      })

      it('invalid UTF-8 and a binary file: read gives FS_NOT_TEXT', async () => {
        const { dir, call } = await fresh()
        await sh(`printf 'ok \\377\\376\\n' > ${dir}/latin.txt && printf 'a\\000b\\n' > ${dir}/bin.dat && head -c 4096 /dev/urandom > ${dir}/random.bin && printf '\\000' >> ${dir}/random.bin`)
        expectFsError(await call('read', { file_path: 'latin.txt' }), 'FS_NOT_TEXT', `cannot read "${dir}/latin.txt": invalid UTF-8 text`)
        expectFsError(await call('read', { file_path: 'bin.dat' }), 'FS_NOT_TEXT', `cannot read "${dir}/bin.dat": binary file`)
        expect(codeOfResult(await call('read', { file_path: 'random.bin' }))).toBe('FS_NOT_TEXT')
      })

      it('a 50 MB text file: read returns the first window and, at an offset, the last line', async () => {
        const { dir, call } = await fresh()
        await sh(`python3 -c "${BIG_SCRIPT}" > ${dir}/big.txt && stat -c %s ${dir}/big.txt`).then(out => expect(out).toBe('52428800\n'))
        // 512 lines of 99 characters fill the 50 KiB window (99 + 511 * 100 bytes).
        const window = Array.from({ length: 512 }, (_, index) => `${index + 1}: ${bigLine(index + 1)}`).join('\n')
        expectShows(await call('read', { file_path: 'big.txt' }), `<path>${dir}/big.txt</path>\n<type>file</type>\n<content>\n${window}\n\n(Output capped. Showing lines 1-512. Use offset=513 to continue.)\n</content>`)
        expectShows(await call('read', { file_path: 'big.txt', offset: BIG_LINES }),
          `<path>${dir}/big.txt</path>\n<type>file</type>\n<content>\n${BIG_LINES}: ${bigLine(BIG_LINES)}\n\n(End of file - total ${BIG_LINES} lines)\n</content>`)
      }, 180_000)

      it('a path with spaces, quotes, a newline and non-ASCII: write, read, edit', async () => {
        const { dir, call } = await fresh()
        const name = 'we\'ird "name"\nwith ü and $HOME.txt'
        expectShows(await call('write', { file_path: name, content: 'odd\n' }), written(`${dir}/${name}`, 'Created'))
        expect(await sh(`python3 -c 'import json, os; print(json.dumps(sorted(os.listdir("${dir}")), ensure_ascii=False))'`)).toBe(`${JSON.stringify([name])}\n`)
        expect(await sh(`cat "${dir}/we'ird \\"name\\""*`)).toBe('odd\n')
        expectShows(await call('read', { file_path: name }), wholeFile(`${dir}/${name}`, ['odd']))
        expectShows(await call('edit', { file_path: `${dir}/${name}`, old_string: 'odd', new_string: 'even' }), `The file ${dir}/${name} has been updated successfully.`)
        expect(await sh(`cat "${dir}/we'ird \\"name\\""*`)).toBe('even\n')
      })

      it('a symlink loop is FS_NOT_FOUND naming the loop, for read and write alike', async () => {
        const { dir, call } = await fresh()
        await sh(`cd ${dir} && ln -s loop-b loop-a && ln -s loop-a loop-b`)
        const message = `cannot resolve "${dir}/loop-a": too many levels of symbolic links (a symlink loop)`
        expectFsError(await call('read', { file_path: 'loop-a' }), 'FS_NOT_FOUND', message)
        expectFsError(await call('write', { file_path: 'loop-a', content: 'x' }), 'FS_NOT_FOUND', message)
        expect(await sh(`ls -A ${dir}; readlink ${dir}/loop-a ${dir}/loop-b`)).toBe('loop-a\nloop-b\nloop-b\nloop-a\n')
      })

      it('a file deleted between resolve and read (ctx.fs), and between read and edit (the tools)', async () => {
        const { dir, call } = await fresh()
        await sh(`printf 'soon gone\\n' > ${dir}/gone.txt`)
        const fs = remote.fs!
        const target = await fs.resolve('gone.txt', { cwd: dir })
        await sh(`rm ${dir}/gone.txt`)
        expect(await codeOf(fs.readText(target))).toBe('FS_NOT_FOUND')
        await expect(fs.readText(target)).rejects.toThrow(`cannot read "${dir}/gone.txt": not found`)

        await sh(`printf 'soon gone\\n' > ${dir}/gone.txt`)
        expectShows(await call('read', { file_path: 'gone.txt' }), wholeFile(`${dir}/gone.txt`, ['soon gone']))
        await sh(`rm ${dir}/gone.txt`)
        expectFsError(await call('edit', { file_path: 'gone.txt', old_string: 'soon', new_string: 'now' }), 'FS_STALE_VERSION',
          `cannot edit "${dir}/gone.txt": file changed since it was read — re-read the file, then retry`)
        expectFsError(await call('read', { file_path: 'gone.txt' }), 'FS_NOT_FOUND', `cannot read "${dir}/gone.txt": not found`)
        // The policy recorded the absence: edit says so before asking the world.
        expectFsError(await call('edit', { file_path: 'gone.txt', old_string: 'soon', new_string: 'now' }), 'FS_NOT_FOUND', `cannot edit "${dir}/gone.txt": not found`)
        expect(await sh(`ls -A ${dir}`)).toBe('')
        // An absence observed lets write create it.
        expectShows(await call('write', { file_path: 'gone.txt', content: 'back\n' }), written(`${dir}/gone.txt`, 'Created'))
        expect(await sh(`cat ${dir}/gone.txt`)).toBe('back\n')
      })

      it('a directory where a file was expected, and a file where a directory was expected', async () => {
        const { dir, call } = await fresh()
        await sh(`mkdir ${dir}/adir && printf 'plain\\n' > ${dir}/plain`)
        expectFsError(await call('read', { file_path: 'adir' }), 'FS_NOT_REGULAR_FILE', `cannot read "${dir}/adir": not a regular file`)
        expectFsError(await call('write', { file_path: 'adir', content: 'x' }), 'FS_NOT_REGULAR_FILE', `cannot write "${dir}/adir": not a regular file`)
        expectFsError(await call('write', { file_path: 'plain/child.txt', content: 'x' }), 'FS_NOT_FOUND', `cannot resolve "${dir}/plain/child.txt": a parent path segment is not a directory`)
        expectFsError(await call('read', { file_path: 'plain/child.txt' }), 'FS_NOT_FOUND', `cannot resolve "${dir}/plain/child.txt": a parent path segment is not a directory`)
        expect(await sh(`ls -A ${dir} ${dir}/adir; cat ${dir}/plain`)).toBe(`${dir}:\nadir\nplain\n\n${dir}/adir:\nplain\n`)
      })

      it('the file server dies during a 50 MB write: the call fails with FS_IO_ERROR and the file keeps its old content; the next call works', async () => {
        const { dir, call } = await fresh()
        await sh(`printf 'old content\\n' > ${dir}/big.txt`)
        expectShows(await call('read', { file_path: 'big.txt' }), wholeFile(`${dir}/big.txt`, ['old content']))
        // Hold the directory's flock (the server takes it to publish): the server stages the
        // whole content in its unnamed file (O_TMPFILE), then waits, and dies there; no timing
        // decides it.
        // The holder is a session of its own (setsid), ended by its process group id.
        const holder = (await inWorld(world.containerId(), `setsid flock -o ${dir} sleep 120 </dev/null >/dev/null 2>&1 & echo $!; for i in $(seq 200); do flock -n ${dir} true || exit 0; sleep 0.05; done; exit 1`, 'root')).trim()
        expect(holder).toMatch(/^\d+$/)
        try {
          const content = 'y'.repeat(52_428_799) + '\n'
          const writing = call('write', { file_path: 'big.txt', content })
          // The staged file, seen through the server's own descriptors (as agent: another uid's
          // /proc/PID/fd needs ptrace rights).
          const staging = `for p in $(pgrep -x dsh-fsd); do for f in /proc/$p/fd/*; do case $(readlink "$f") in "${dir}/#"*) stat -L -c %s "$f" ;; esac; done; done 2>/dev/null || true`
          const staged = await waitFor(() => inWorld(world.containerId(), staging, 'agent'), out => out.trim() === '52428800', 60_000, 50)
          expect(staged.trim()).toBe('52428800')
          // '[d]' keeps the pattern from matching this command's own shell.
          await inWorld(world.containerId(), 'pkill -KILL -x dsh-fsd', 'root')
          const result = await hangGuard(writing, 30_000, 'the write whose server was killed')
          expectFsError(result, 'FS_IO_ERROR', new RegExp(`^Error: cannot write "${dir}/big\\.txt": the world's file server was lost \\(`))
        } finally {
          await inWorld(world.containerId(), `kill -TERM -${holder} 2>/dev/null || true`, 'root')
        }
        // Nothing published, and nothing left in the folder (the staged file had no name).
        expect(await sh(`cat ${dir}/big.txt; stat -c %s ${dir}/big.txt; ls -A ${dir} | grep -c dsh- || true`)).toBe('old content\n12\n0\n')
        // A new server serves the next calls; the write's version guard still holds.
        expectShows(await call('read', { file_path: 'big.txt' }), wholeFile(`${dir}/big.txt`, ['old content']))
        expectShows(await call('write', { file_path: 'big.txt', content: 'new content\n' }), written(`${dir}/big.txt`, 'Updated'))
        expect(await sh(`cat ${dir}/big.txt`)).toBe('new content\n')
      }, 180_000)
    })
  })
}

/** The FsError code of a failed result. */
function codeOfResult(result: ToolExecutionResult): string | undefined {
  expect(result.isError).toBe(true)
  return (result as { error: { info?: { code: string } } }).error.info?.code
}
