/**
 * Held shells under soak (issue 22; moved out of `npm test` by issue 33, item 3): the cases of
 * heldShellSoakCases (test/helpers/held-shell-cases.ts), minutes each by design (1000 sends
 * under random cuts of the transport, 100 detach/reattach cycles over 16 MiB), against the same
 * two worlds as test/ssh/held-shells.test.ts and test/docker/held-shells.test.ts, with the same
 * assertions.
 */
import { describe } from 'vitest'
import { heldShellSoakCases } from '../helpers/held-shell-cases.ts'
import { dockerHeldWorld, sshHeldWorld } from '../helpers/held-worlds.ts'

describe('held shells over SSH under soak, as agent', () => {
  heldShellSoakCases(sshHeldWorld(), 'agent')
})

describe('held shells in an attached Docker container under soak, as agent', () => {
  heldShellSoakCases(dockerHeldWorld().world, 'agent')
})
