import { openWorld } from '../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../src/providers/docker/docker-runtime.ts'
const user = process.argv[2]
const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: 'dsh-remote-worlds/target:bookworm', ...(user ? { user } : {}) }, workspaceRoot: '/tmp' })
const t0 = performance.now()
const term = await world.open()
console.log('open ms', performance.now() - t0, 'pid', term.pid, JSON.stringify(term.motd))
for (const line of ['echo hi; id -u', 'cat']) {
  const r = await term.send(line)
  console.log(JSON.stringify(line), r.waitReason, Math.round(r.ms), JSON.stringify(r.viewport))
}
console.log(await term.signal('SIGINT'))
let r = await term.send('python3 -c \'name = input("na" + "me? "); print("hi", name)\'')
console.log(r.waitReason, Math.round(r.ms), JSON.stringify(r.viewport))
r = await term.send('world')
console.log(r.waitReason, Math.round(r.ms), JSON.stringify(r.viewport))
const t1 = performance.now()
await term.close()
console.log('close ms', performance.now() - t1)
await world.dispose()
