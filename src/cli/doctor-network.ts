/**
 * doctor's network check (src/network/world-network.ts): the policy in force, proven in the
 * world by a program of the world's user: the interfaces it sees, a name lookup (which must
 * find nothing in a confined world), and under 'allow' the proxy's answer for a name no rule
 * allows (403) and for the first rule that names one host (what the user allowed).
 * @module dsh-remote-worlds/cli/doctor-network
 */
import type { RemoteWorld } from '../backend/world.ts'
import { shQuote } from '../providers/remote/quote.ts'
import type { EgressPolicy } from '../network/rules.ts'
import type { DoctorCheck } from './doctor.ts'

/** The name asked for where no rule may allow it (`.invalid` is never delegated: RFC 6761). */
const UNALLOWED_PROBE_NAME = 'dsh-remote-worlds-doctor.invalid'

/** How long the proof may take in the world (ms). */
const PROOF_TIMEOUT_MS = 15_000

/** The policy in one line: `allow (allow example.com:443, *.npmjs.org; deny 10.0.0.0/8)`. */
export function describePolicy(policy: EgressPolicy): string {
  const rules = [
    ...(policy.allow.length > 0 ? [`allow ${policy.allow.map(rule => rule.text).join(', ')}`] : []),
    ...(policy.deny.length > 0 ? [`deny ${policy.deny.map(rule => rule.text).join(', ')}`] : []),
  ]
  return rules.length > 0 ? `${policy.network} (${rules.join('; ')})` : policy.network
}

/** The proof script: interfaces, a lookup, then one CONNECT per `probes` entry through the proxy on `port`. */
function proofScript(port: number | undefined, probes: readonly string[]): string {
  const lines = [
    // /proc/self/net/dev, not /sys/class/net: inside bubblewrap /sys is the host's.
    'printf "interfaces %s\\n" "$(sed -n "3,\\$s/^ *\\([^:]*\\):.*/\\1/p" /proc/self/net/dev 2>/dev/null | tr "\\n" " ")"',
    `getent hosts ${UNALLOWED_PROBE_NAME} >/dev/null 2>&1; echo "lookup $?"`,
  ]
  for (const probe of port === undefined ? [] : probes) {
    // bash's /dev/tcp: the one client every world of this package has.
    lines.push(`bash -c ${shQuote(`exec 3<>/dev/tcp/127.0.0.1/${port} && printf 'CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' ${shQuote(probe)} ${shQuote(probe)} >&3 && IFS= read -r line <&3 && printf 'connect %s %s\\n' ${shQuote(probe)} "\${line%$'\\r'}"`)} || echo "connect ${probe} failed"`)
  }
  return lines.join('\n')
}

/**
 * The network check of `world`.
 * @param cwd - a directory in the world for the proof program.
 */
export async function networkCheck(world: RemoteWorld, cwd: string): Promise<DoctorCheck> {
  const network = world.network
  const policy = network.policy
  const described = describePolicy(policy)
  if (policy.network === 'full') return { name: 'network', ok: true, detail: `full: the world's own network, unconfined (danger-full-access)` }
  const allowedHost = policy.allow.find(rule => rule.kind === 'host')
  const probes = [`${UNALLOWED_PROBE_NAME}:443`, ...(allowedHost?.kind === 'host' ? [`${allowedHost.host}:${allowedHost.port ?? 443}`] : [])]
  let output = ''
  try {
    // Run as the world's confined programs run (bubblewrap over SSH; a container confines itself).
    const mode = world.ctx.sandboxPolicy.defaultMode
    const plain = ['/bin/sh', '-c', proofScript(network.proxyPort, probes)]
    const argv = mode === 'danger-full-access' ? plain : world.ctx.sandbox.confine(plain, { mode, workspaceRoot: world.ctx.sandboxPolicy.workspaceRoot }).argv
    const handle = world.runtime.spawn({ argv: [...argv], cwd, graceMs: 1_000, stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } })
    handle.stdout!.on('data', (chunk: Buffer) => { output += chunk.toString('utf8') })
    handle.stderr!.resume()
    const timer = setTimeout(() => handle.terminate(), PROOF_TIMEOUT_MS)
    await handle.done.finally(() => clearTimeout(timer))
  } catch (error) {
    return { name: 'network', ok: false, detail: `${described}: not proven, the proof did not run: ${(error as Error).message}` }
  }
  const facts = output.trim().split('\n')
  const interfaces = facts.find(line => line.startsWith('interfaces '))?.slice('interfaces '.length).trim() ?? ''
  const lookup = facts.find(line => line.startsWith('lookup '))?.slice('lookup '.length)
  const loOnly = interfaces === 'lo'
  const noLookup = lookup !== undefined && lookup !== '0'
  const connects = facts.filter(line => line.startsWith('connect '))
  const refused = connects[0]?.includes(' 403 ') === true
  // The allowed probe, when there is one, must get through (a 502 says the user's rule names a
  // server this client cannot reach).
  const through = connects.length < 2 || connects[1]!.includes(' 200 ')
  const ok = loOnly && noLookup && (network.proxyPort === undefined || (refused && through))
  const seen = [
    `interfaces: ${interfaces === '' ? 'unreadable' : interfaces}`,
    `a name lookup ${noLookup ? 'finds nothing' : 'RESOLVED'}`,
    ...(network.proxyPort === undefined ? [] : [`proxy 127.0.0.1:${network.proxyPort}`, ...connects.map(line => line.slice('connect '.length))]),
  ]
  return { name: 'network', ok, detail: `${described}: ${seen.join('; ')}${loOnly ? '' : ' (not lo only: this world\'s own network is not fenced by this package)'}` }
}
