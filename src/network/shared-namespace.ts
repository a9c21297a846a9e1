/**
 * Finding a process still in a shared network namespace (sandbox/shared-network.ts), so the
 * next relay starts in the namespace its confined programs are in, after the last relay ended
 * with its transport (a cut connection): the programs, their servers and the proxy port they were
 * given stay where they were.
 *
 * A process can be joined (nsenter --user --net) when it is in the namespace AND in the user
 * namespace that owns it: a confined program's own bwrap is (it was started joined, and makes
 * its nested user namespace only for its child), the program under it is not. One `ls -l` of
 * every /proc/PID/ns/{net,user} link the world's user may read (proc(5): each reads
 * `TYPE:[INODE]`; another user's are refused by ptrace access rules, and left out).
 * @module dsh-remote-worlds/network/shared-namespace
 */
import { shQuote } from '../providers/remote/quote.ts'
import type { WorldOwner } from '../providers/remote/world-owner.ts'
import { runInWorld } from '../providers/remote/world-tools/run.ts'

/**
 * The script: `ls -l` of every process's net and user namespace links, errors dropped, and of
 * them the lines that name `namespace`'s (grep -F: the few members, not every process's).
 */
export function namespaceLinksScript(namespace: { netns: string; userns: string }): string {
  return `ls -l /proc/[0-9]*/ns/net /proc/[0-9]*/ns/user 2>/dev/null | grep -F -e ${shQuote(namespace.netns)} -e ${shQuote(namespace.userns)}; exit 0\n`
}

const LINK = /\/proc\/(\d+)\/ns\/(net|user) -> '?((?:net|user):\[\d+\])'?\s*$/

/**
 * The lowest pid in `listing` (`ls -l` lines of /proc/PID/ns links) whose network and
 * user namespaces are `namespace.netns` and `namespace.userns` (`net:[INODE]`, `user:[INODE]`),
 * or undefined.
 */
export function namespaceMember(listing: string, namespace: { netns: string; userns: string }): number | undefined {
  const links = new Map<number, { net?: string; user?: string }>()
  for (const line of listing.split('\n')) {
    const match = LINK.exec(line)
    if (match === null) continue
    const pid = Number(match[1])
    const entry = links.get(pid) ?? {}
    entry[match[2] as 'net' | 'user'] = match[3]
    links.set(pid, entry)
  }
  const members = [...links].filter(([, entry]) => entry.net === namespace.netns && entry.user === namespace.userns).map(([pid]) => pid)
  return members.length === 0 ? undefined : Math.min(...members)
}

/**
 * A process of the world in `namespace` that can be joined, or undefined when none is (or the
 * namespace is unknown: an empty inode).
 * @throws the world's errors when the listing cannot run.
 */
export async function findNamespaceMember(owner: WorldOwner, namespace: { netns: string; userns: string }): Promise<number | undefined> {
  if (namespace.netns === '' || namespace.userns === '') return undefined
  const { stdout } = await runInWorld(owner, namespaceLinksScript(namespace))
  return namespaceMember(stdout, namespace)
}
