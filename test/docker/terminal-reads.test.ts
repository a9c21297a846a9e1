/**
 * Terminal reads beyond fd 0 in the Docker world (test/helpers/terminal-read-cases.ts), as the
 * image's unprivileged user.
 */
import { describe } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { terminalReadCases } from '../helpers/terminal-read-cases.ts'
import { IMAGE } from './helpers.ts'

describe('terminal reads through /dev/tty in a Docker container, as agent', () => {
  terminalReadCases(() => openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE, user: 'agent' }, workspaceRoot: '/tmp' }))
})
