/**
 * The SSH world's own row, `connect (TCP+handshake+auth)`: TCP + key exchange + host-key check
 * + public-key authentication of a fresh connection, through the provider's own connect path
 * (the credentials and trust the runtime resolved).
 * @module bench/rows/ssh-connect
 */
import { connectSsh } from '../../src/providers/ssh/connect.ts'
import { SshRuntimeConfig, buildSshWorld } from '../../src/providers/ssh/ssh-runtime.ts'
import { type Sample, type SampleTable, withTimeout } from '../timing.ts'

/** The row's name. */
export const SSH_CONNECT_METRIC = 'connect (TCP+handshake+auth)'

/**
 * Connect and disconnect `runs` times (one warm-up first, discarded); each sample is the
 * connect alone (ms).
 * @param config - the SSH runtime config of the world under test.
 */
export async function measureSshConnect(config: SshRuntimeConfig, runs: number): Promise<SampleTable> {
  const world = await buildSshWorld(SshRuntimeConfig.parse(config))
  const samples: Sample[] = []
  for (let run = 0; run <= runs; run += 1) {
    const started = performance.now()
    const connected = await withTimeout(connectSsh(world.options.hop, world.options.jumps, world.options.timings), 'ssh connect')
    const ms = performance.now() - started
    const closed = new Promise<void>(resolve => connected.client.once('close', () => resolve()))
    connected.client.end()
    await withTimeout(closed, 'ssh disconnect')
    if (run > 0) samples.push({ ms })
  }
  await world.dispose()
  return new Map([[SSH_CONNECT_METRIC, samples]])
}
