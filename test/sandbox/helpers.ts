/**
 * Shared helpers of the sandbox suites: real worlds on the real engine, exact shell transcripts.
 */
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { expect } from 'vitest'
import type { WorldTerminal } from '../../src/backend/world.ts'
import { type TestContainerOptions, startTestContainer } from '../docker/helpers.ts'

/** The project's target image (docker/ensure-world.sh builds it). */
export const IMAGE = process.env.DSH_REMOTE_IMAGE ?? 'dsh-remote-worlds/target:bookworm'

/** The image's non-root user. */
export const AGENT_UID = 1000

/** The engine connection (dockerode defaults: DOCKER_HOST or /var/run/docker.sock). */
export const docker = new Docker()

/** A host temp folder owned by the image's agent user, with `hello.txt`. */
export function hostWorkspace(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'dsh-sandbox-ws-'))
  writeFileSync(join(path, 'hello.txt'), 'hello from the host\n')
  chownSync(path, AGENT_UID, AGENT_UID)
  chownSync(join(path, 'hello.txt'), AGENT_UID, AGENT_UID)
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) }
}

/**
 * Send one command line and return what it printed: the viewport minus the echoed command
 * line and the final prompt (both asserted exactly). Keep commands shorter than the 160 columns.
 */
export async function run(terminal: WorldTerminal, command: string): Promise<string> {
  const result = await terminal.send(command)
  expect(result.waitReason).not.toBe('timeout')
  const viewport = result.viewport.replaceAll('\r', '')
  expect(viewport.startsWith(`${command}\n`)).toBe(true)
  expect(viewport.endsWith('dsh> ')).toBe(true)
  return viewport.slice(command.length + 1, -'dsh> '.length).replace(/\n$/, '')
}

/** Start a container the tests attach to (test/docker/helpers.ts; removed by the returned function). */
export async function startContainer(options: TestContainerOptions): Promise<{ id: string; remove(): Promise<void> }> {
  const container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'sandbox' }, ...options })
  return { id: container.id, remove: async () => { await container.remove({ force: true }) } }
}
