/**
 * dsh-remote-worlds/testcontainers: remote worlds as testcontainers containers, for CI
 * sandboxes. See README "In CI with testcontainers".
 * @module dsh-remote-worlds/testcontainers
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'

export { DSH_WORLD_IMAGE, DEFAULT_WORKSPACE_ROOT, DshWorldContainer, StartedDshWorldContainer, type OpenContainerWorldOptions, type WorldSandbox } from './world-container.ts'
export { SshdContainer, StartedSshdContainer } from './sshd-container.ts'
export { WorldReadyWaitStrategy } from './world-ready.ts'
export { disableRyukWhenAbsent } from './ryuk.ts'
