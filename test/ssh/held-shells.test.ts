/**
 * Held shells over SSH (issue 22): the world-neutral cases of test/helpers/held-shell-cases.ts
 * against a real OpenSSH sshd, the clients connecting through a TCP proxy on 127.0.0.1 this test
 * can cut (a 5 s outage drops every connection and refuses new ones). The soak-length cases run
 * in test/long/held-shells-soak.test.ts.
 */
import { describe } from 'vitest'
import { heldShellCases } from '../helpers/held-shell-cases.ts'
import { sshHeldWorld } from '../helpers/held-worlds.ts'

const world = sshHeldWorld()

describe('held shells over SSH, as agent', () => {
  heldShellCases(world, 'agent')
})
