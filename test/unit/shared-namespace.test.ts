/**
 * Finding a process still in a shared network namespace (src/network/shared-namespace.ts) from
 * the `ls -l` lines of /proc/PID/ns links: only one in both the namespace and its owning user
 * namespace can be joined.
 */
import { describe, expect, it } from 'vitest'
import { namespaceLinksScript, namespaceMember } from '../../src/network/shared-namespace.ts'

const NAMESPACE = { netns: 'net:[4026532249]', userns: 'user:[4026532247]' }

const link = (pid: number, kind: 'net' | 'user', target: string, quoted = false): string =>
  `lrwxrwxrwx 1 agent agent 0 Dec  7 12:00 /proc/${pid}/ns/${kind} -> ${quoted ? `'${target}'` : target}`

describe('namespaceMember', () => {
  it('is the lowest pid in both the network namespace and the user namespace that owns it', () => {
    const listing = [
      link(900, 'net', NAMESPACE.netns), link(900, 'user', NAMESPACE.userns),
      // A confined program under its bwrap: the namespace, but a nested user namespace.
      link(901, 'net', NAMESPACE.netns), link(901, 'user', 'user:[4026532300]'),
      link(850, 'net', NAMESPACE.netns, true), link(850, 'user', NAMESPACE.userns, true),
    ].join('\n')
    expect(namespaceMember(listing, NAMESPACE)).toBe(850)
  })

  it('is undefined when no process is in both (a nested one only, or none)', () => {
    expect(namespaceMember([link(901, 'net', NAMESPACE.netns), link(901, 'user', 'user:[4026532300]')].join('\n'), NAMESPACE)).toBeUndefined()
    expect(namespaceMember('', NAMESPACE)).toBeUndefined()
    expect(namespaceMember('ls: cannot read symbolic link /proc/1/ns/net: Permission denied', NAMESPACE)).toBeUndefined()
  })

  it('the script greps the two namespaces\' names, quoted for sh', () => {
    expect(namespaceLinksScript(NAMESPACE)).toBe("ls -l /proc/[0-9]*/ns/net /proc/[0-9]*/ns/user 2>/dev/null | grep -F -e 'net:[4026532249]' -e 'user:[4026532247]'; exit 0\n")
  })
})
