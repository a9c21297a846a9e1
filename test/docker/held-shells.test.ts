/**
 * Held shells in an attached Docker container (issue 22): the world-neutral cases of
 * test/helpers/held-shell-cases.ts, the clients reaching the engine through a Unix-socket proxy
 * this test can cut (a 5 s outage drops every exec stream and refuses new ones), plus a
 * restarted container. The soak-length cases run in test/long/held-shells-soak.test.ts.
 * Persistence 'client' is refused for a managed container (it ends with its client), with the
 * reason.
 */
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { PersistenceUnavailableError } from '../../src/providers/remote/errors.ts'
import { heldShellCases } from '../helpers/held-shell-cases.ts'
import { dockerHeldWorld } from '../helpers/held-worlds.ts'
import { IMAGE } from './helpers.ts'

const docker = dockerHeldWorld()

describe('held shells in an attached Docker container, as agent', () => {
  heldShellCases(docker.world, 'agent', { restart: docker.restart })
})

describe('persistence in a managed container', () => {
  it("'client' is refused with the reason (the container ends with its client); 'connection' is accepted", () => {
    expect(() => new DockerSubprocessRuntime(new Context(), { image: IMAGE, persistence: 'client' })).toThrow(PersistenceUnavailableError)
    expect(() => new DockerSubprocessRuntime(new Context(), { image: IMAGE, persistence: 'client' })).toThrow(`a managed container (image ${IMAGE}) ends with its client, so its shells cannot outlive it: persistence 'client' needs an attached container (\`container\`), a dev container or an SSH host; 'connection' works here`)
    expect(() => new DockerSubprocessRuntime(new Context(), { image: IMAGE, persistence: 'connection' })).not.toThrow()
  })
})
