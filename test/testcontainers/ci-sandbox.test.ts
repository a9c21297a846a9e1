// The README's "In CI with testcontainers" file, as a user copies it (README and this file are
// kept identical by test/testcontainers/readme.test.ts; only the import path differs).
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { DshWorldContainer, type StartedDshWorldContainer } from '../../src/testcontainers/index.ts'

let workspace: string
let container: StartedDshWorldContainer

beforeAll(async () => {
  // A host folder the agent may write (confined shells never run as root).
  workspace = mkdtempSync(join(tmpdir(), 'agent-ws-'))
  chmodSync(workspace, 0o777)
  container = await new DshWorldContainer()
    .withUser('1000:1000')
    .withSandbox({ mode: 'workspace-write', workspace })
    .start()
}, 120_000)

afterAll(async () => {
  await container?.stop()
  rmSync(workspace, { recursive: true, force: true })
})

it('runs an agent session in a workspace-write sandbox', async () => {
  const world = await container.openWorld()
  try {
    const shell = await world.open()
    // A command that waits for input settles as soon as it is PROVEN blocked reading the terminal.
    const cat = await shell.send('cat')
    expect(cat.waitReason).toBe('stdin_read')
    // Ctrl-C is a real SIGINT to the foreground process group.
    await shell.signal('SIGINT')
    const written = await shell.send('echo "from the agent" > note.txt && pwd')
    expect(written.viewport).toContain('/workspace')
    // Outside the workspace the container refuses writes.
    const refused = await shell.send('touch /etc/agent-was-here')
    expect(refused.viewport).toContain('Read-only file system')
    await shell.close()
  } finally {
    await world.dispose()
  }
  // What the agent wrote is on the host.
  expect(readFileSync(join(workspace, 'note.txt'), 'utf8')).toBe('from the agent\n')
})
