/**
 * The SSH runtime's configuration schema, in a room below the runtime and the sandbox
 * companion that both read it (so neither imports the other for it).
 * @module dsh-remote-worlds/providers/ssh/ssh-config
 */
import { z } from 'zod'
import { PersistenceSetting } from '../remote/pty-holder/persistence.ts'
import { TerminalEmulatorSettings } from '../../emulator/settings.ts'
import { LocaleSettingSchema } from '../remote/environment.ts'

const stringOrList = z.union([z.string().min(1), z.array(z.string().min(1))])

/** Configuration of the SshSubprocessRuntime (src/providers/ssh); validated with zod at construction. */
export const SshRuntimeConfig = z.object({
  /** `[user@]host[:port]`, or a Host alias of the ssh config file. */
  target: z.string().min(1),
  /** Login user (overrides the target's and the config file's). */
  user: z.string().min(1).optional(),
  /** Port (overrides the target's and the config file's). */
  port: z.number().int().min(1).max(65535).optional(),
  /**
   * The locale of terminals and spawned programs (remote/environment.ts `chooseLocale`):
   * `'auto'` (default) sets LANG to the caller's UTF-8 LANG when the world has it, else to
   * C.UTF-8 when the world has it, and only when the world's own environment names no locale;
   * a locale name sets LANG to it; `false` keeps the world's environment as it is.
   */
  locale: LocaleSettingSchema.optional(),
  /**
   * Each terminal's emulator (emulator/settings.ts): `{ emulator?: boolean, replies?: 'answer' |
   * 'off', scrollback?: lines }`; default: an emulator that answers terminal queries, 200 lines
   * of scrollback.
   */
  terminal: TerminalEmulatorSettings.optional(),
  /** Private key files to offer (as OpenSSH `-i`); default: the config's IdentityFile, else ~/.ssh/id_{ed25519,ecdsa,rsa} that exist. */
  identity: stringOrList.optional(),
  /** Passphrase of encrypted private keys. */
  passphrase: z.string().optional(),
  /** Password (also answers keyboard-interactive password prompts). */
  password: z.string().optional(),
  /** ssh-agent socket; default `SSH_AUTH_SOCK`; `false` disables the agent. Never forwarded. */
  agent: z.union([z.string().min(1), z.literal(false)]).optional(),
  /** known_hosts files (as `UserKnownHostsFile`); default: the config's, else ~/.ssh/known_hosts, plus /etc/ssh/ssh_known_hosts. */
  knownHosts: stringOrList.optional(),
  /** Pinned host-key fingerprint(s) `SHA256:...`; when set, known_hosts is not consulted. */
  hostKeyFingerprint: stringOrList.optional(),
  /** ssh config file; default ~/.ssh/config; `false` ignores config files. */
  sshConfig: z.union([z.string().min(1), z.literal(false)]).optional(),
  /** Jump hosts (`ProxyJump` syntax, or `none`); default: the config's. Jump hops use the same credentials and trust. */
  proxyJump: z.string().min(1).optional(),
  /** The server's MaxSessions (channels per connection, the control channel counts). */
  maxSessions: z.number().int().min(2).default(10),
  /** Close a connection this long after its last terminal closed (ms). */
  idleMs: z.number().int().min(0).default(15_000),
  /** Bound of the TCP connect, and of the SSH handshake with authentication (ms). */
  connectTimeoutMs: z.number().int().min(1).default(5_000),
  /** Keepalive interval (ms); a dead peer is detected within interval x (countMax + 1). */
  keepaliveIntervalMs: z.number().int().min(1).default(1_000),
  keepaliveCountMax: z.number().int().min(1).default(3),
  /** SSH handshakes in flight at once (OpenSSH's MaxStartups starts dropping at 10). */
  maxConcurrentConnects: z.number().int().min(1).default(4),
  /**
   * End what clients that died left running on the host (their tagged sessions, see
   * remote/ownership.ts) when this client first connects. Default true; off lists them without
   * ending them (`dsh-remote-worlds doctor`).
   */
  reapOrphans: z.boolean().optional(),
  /**
   * Whether terminals' shells outlive their connection (`'connection'`) or their client
   * (`'client'`), held on the host by dsh-pty (remote/pty-holder/persistence.ts), or neither
   * (`'off'`). Default `'connection'` where dsh-pty can run on the host, else `'off'` (reported by
   * `persistenceInEffect()` and `doctor`); a given mode is kept, and refused where it cannot hold.
   */
  persistence: PersistenceSetting.optional(),
}).strict()

/** Input shape of {@link SshRuntimeConfig}. */
export type SshRuntimeConfig = z.input<typeof SshRuntimeConfig>
