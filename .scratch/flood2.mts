import xterm from '@xterm/headless'
import { openWorld } from '../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../src/providers/docker/docker-runtime.ts'
const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: 'dsh-remote-worlds/target:bookworm' }, workspaceRoot: '/tmp', terminal: { timeoutMs: 120000 } })
try {
  const t = await world.open()
  const handle = [...(world.runtime as any).terminals][0]
  const term = new xterm.Terminal({ rows: 40, cols: 160, scrollback: 100, allowProposedApi: true })
  if (process.argv[2] === 'on') handle.output.on('data', (c: Buffer) => term.write(c))
  for (let i = 0; i < 2; i++) {
    const cpu = process.cpuUsage()
    const r = await t.send("head -c 100M /dev/zero | od -v | head -c 100M; echo END")
    const c = process.cpuUsage(cpu)
    console.log(process.argv[2], r.waitReason, Math.round(r.ms), 'ms cpu', Math.round((c.user + c.system) / 1000), 'rss', Math.round(process.memoryUsage().rss / 1e6))
  }
} finally { await world.dispose() }
