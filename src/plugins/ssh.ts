/**
 * `dsh-remote-worlds/ssh`: the SSH world as a cordis plugin, mountable by the upstream loader
 * from a `cordis.patch.yml` entry. It provides `ctx.subprocess` (an
 * {@link SshSubprocessRuntime}) on a host reached over SSH, with the same trust and
 * credential options as OpenSSH (known_hosts or a pinned host key, identity files, the agent,
 * the ssh config file, ProxyJump). Pair it with `dsh-remote-worlds/ssh/sandbox` for
 * `ctx.sandbox` (bubblewrap on the host).
 *
 * Disposal of the plugin ends every process and terminal it started (through the control
 * channel: closing a channel stops nothing), removes its spill directory, and closes the
 * connections.
 * @module dsh-remote-worlds/plugins/ssh
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import type { Context } from '@deepseek-ai/cordis'
import z from '@deepseek-ai/schemastery'
import type { TerminalEmulatorSettings } from '../emulator/settings.ts'
import { SshSubprocessRuntime, type SshRuntimeConfig } from '../providers/ssh/ssh-runtime.ts'
import { defined } from './defined.ts'
import { TerminalSetting, terminalSetting } from './terminal-setting.ts'

/** Cordis plugin name. */
export const name = 'dsh-remote-worlds-ssh'

/** Plugin config: see {@link SshRuntimeConfig} (the same fields). */
export interface Config {
  target: string
  user?: string
  port?: number
  identity?: string | string[]
  passphrase?: string
  password?: string
  agent?: string | false
  knownHosts?: string | string[]
  hostKeyFingerprint?: string | string[]
  sshConfig?: string | false
  proxyJump?: string
  maxSessions?: number
  idleMs?: number
  connectTimeoutMs?: number
  keepaliveIntervalMs?: number
  keepaliveCountMax?: number
  maxConcurrentConnects?: number
  reapOrphans?: boolean
  /** Each terminal's emulator: `{ emulator?, replies?: 'answer' | 'off', scrollback? }` (src/emulator/settings.ts). */
  terminal?: TerminalEmulatorSettings
}

const stringOrList = z.union([z.string(), z.array(z.string())])

/** Schema of {@link Config}, validated by cordis (and the loader) before {@link apply}. */
export const Config: z<Config> = z.object({
  target: z.string().required().description('`[user@]host[:port]`, or a Host alias of the ssh config file.'),
  user: z.string().description('Login user (overrides the target and the config file).'),
  port: z.natural().description('Port (overrides the target and the config file).'),
  identity: stringOrList.description('Private key files to offer (as OpenSSH -i).'),
  passphrase: z.string().role('secret').description('Passphrase of encrypted private keys.'),
  password: z.string().role('secret').description('Password (also answers keyboard-interactive prompts).'),
  agent: z.union([z.string(), z.const(false)]).description('ssh-agent socket (default SSH_AUTH_SOCK); false disables it. Never forwarded.'),
  knownHosts: stringOrList.description('known_hosts files (default ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts).'),
  hostKeyFingerprint: stringOrList.description('Pinned host-key fingerprint(s) SHA256:...; known_hosts is then not consulted.'),
  sshConfig: z.union([z.string(), z.const(false)]).description('ssh config file (default ~/.ssh/config); false ignores config files.'),
  proxyJump: z.string().description('Jump hosts (ProxyJump syntax, or none).'),
  maxSessions: z.natural().description("The server's MaxSessions (channels per connection; default 10)."),
  idleMs: z.natural().description('Close a connection this long after its last channel closed (ms).'),
  connectTimeoutMs: z.natural().description('Bound of the TCP connect and of the handshake with authentication (ms).'),
  keepaliveIntervalMs: z.natural().description('Keepalive interval (ms).'),
  keepaliveCountMax: z.natural().description('Unanswered keepalives before the connection counts as lost.'),
  maxConcurrentConnects: z.natural().description('SSH handshakes in flight at once.'),
  reapOrphans: z.boolean().description('End what clients that died left on the host when this one connects (default true).'),
  terminal: TerminalSetting,
})

/**
 * Register the SSH runtime as `ctx.subprocess`. No connection is made until first use. Awaited,
 * so a config the runtime refuses (e.g. a target with a bad port) fails this entry with the
 * runtime's own error, not as a `subprocess` service that never appears.
 * @throws InvalidArgumentError (from the runtime) for a config or target it cannot use.
 */
export async function apply(ctx: Context, config: Config): Promise<void> {
  const { terminal, ...rest } = config
  const runtimeConfig = { ...defined(rest), ...terminalSetting(terminal) } as SshRuntimeConfig
  await ctx.plugin(SshSubprocessRuntime, runtimeConfig)
}
