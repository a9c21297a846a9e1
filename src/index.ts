/**
 * dsh-remote-worlds: DSH's subprocess seam for remote worlds (Docker containers, swarm services, SSH hosts).
 * @module dsh-remote-worlds
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import './node-version.ts'
export { DockerSubprocessRuntime, DockerRuntimeConfig } from './providers/docker/docker-runtime.ts'
export { DockerWorld, MANAGED_LABEL } from './providers/docker/docker-world.ts'
export { SshSubprocessRuntime, SshRuntimeConfig } from './providers/ssh/ssh-runtime.ts'
export { SwarmSubprocessRuntime, SwarmRuntimeConfig } from './providers/swarm/swarm-runtime.ts'
export { SwarmCleanupUnprovenError, SwarmNodeLostError, SwarmNodeUnreachableError, SwarmNotManagerError, SwarmTaskFailedError, SwarmTaskUnschedulableError } from './providers/swarm/errors.ts'
export { ControlChannel } from './providers/remote/control-channel.ts'
export type { ControlInfo, ControlTransport, ForegroundFacts, ProcessIdentity, RemoteProcess } from './providers/remote/control-channel.ts'
export * from './providers/remote/errors.ts'
export { shQuote, shQuoteArgv, shQuoteEnvEntry } from './providers/remote/quote.ts'
export { RemoteTerminalHandle, startRemoteTerminal } from './providers/remote/terminal.ts'
export type { RemoteProcessHandle, RemoteSubprocessOutcome, RemoteTerminateOptions } from './providers/remote/process.ts'
export type { RemoteTerminalStart, TerminalTransport } from './providers/remote/terminal.ts'
export { terminateSession, sessionMembers } from './providers/remote/teardown.ts'
export { resolveDevcontainer, planDevcontainer, readDevcontainerSettings, findDevcontainers, chooseDevcontainer, selectDevcontainer, locateDevcontainer, projectFolder, devcontainerId, LOCAL_FOLDER_LABEL, CONFIG_FILE_LABEL, METADATA_LABEL, DevcontainerAmbiguousError, DevcontainerConfigInvalidError, DevcontainerConfigMissingError, DevcontainerNotFoundError, DevcontainerStoppedError, DevcontainerUserNotFoundError } from './devcontainer/index.ts'
export type { DevcontainerCandidate, DevcontainerChoice, DevcontainerPlan, DevcontainerSettings, DevcontainerUserOrigin, ProjectFolder, ResolveDevcontainerOptions, ResolvedDevcontainer } from './devcontainer/index.ts'
export { TerminalEmulatorSettings, DEFAULT_SCROLLBACK_LINES, MAX_SCROLLBACK_LINES } from './emulator/settings.ts'
export type { TerminalScreen } from './emulator/screen.ts'
export { openWorld } from './backend/world.ts'
export type { OpenWorldOptions, RemoteWorld, WorldTerminal, TerminalTuning } from './backend/world.ts'
export * from './sandbox/index.ts'
