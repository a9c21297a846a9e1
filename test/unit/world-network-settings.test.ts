/**
 * Network settings refused before any world is asked (src/network/world-network.ts): each says
 * what is wrong and what to give instead, rather than being dropped in silence.
 */
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { mountWorldNetwork } from '../../src/network/world-network.ts'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'

describe('network settings a world cannot take', () => {
  it('--egress with a network other than allow', async () => {
    await expect(mountWorldNetwork(new Context(), { network: 'none', egress: ['db.test:5432'] }, 'read-only'))
      .rejects.toThrow(new InvalidArgumentError('--egress needs network \'allow\' (each one opens its HOST:PORT to the world through this client), and the network is \'none\''))
  })

  it('two --egress forwards on one world port', async () => {
    await expect(mountWorldNetwork(new Context(), { egress: ['5432:db.test:5432', '5432:other.test:5432'] }, 'read-only'))
      .rejects.toThrow(new InvalidArgumentError('two --egress forwards listen on the world\'s port 5432; give each its own (--egress WORLD_PORT:HOST:PORT)'))
  })

  it('--deny, --resolve or --egress-log in danger-full-access, where nothing is judged or logged', async () => {
    for (const options of [{ deny: ['127.0.0.0/8'] }, { resolve: ['a.test:80:127.0.0.1'] }, { egressLog: '/tmp/egress.jsonl' }]) {
      await expect(mountWorldNetwork(new Context(), options, 'danger-full-access'))
        .rejects.toThrow(new InvalidArgumentError('--deny, --resolve and --egress-log need a confined sandbox mode: in danger-full-access nothing goes through this client to be judged or logged (use read-only or workspace-write with --network allow)'))
    }
  })
})
