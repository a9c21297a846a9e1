/**
 * The terminal protocol in the Docker world (test/helpers/terminal-protocol-cases.ts): terminal
 * queries answered and screens shown by each terminal's emulator, as the image's unprivileged user.
 */
import { describe } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { terminalProtocolCases } from '../helpers/terminal-protocol-cases.ts'
import { IMAGE } from './helpers.ts'

describe('terminal queries and screens in a Docker container, as agent', () => {
  terminalProtocolCases(settings => openWorld({
    runtime: DockerSubprocessRuntime,
    runtimeConfig: { image: IMAGE, user: 'agent', ...(settings !== undefined ? { terminal: settings } : {}) },
    workspaceRoot: '/tmp',
    terminal: { rows: 24 },
  }))
})
