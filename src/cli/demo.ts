/**
 * `dsh-remote-worlds demo`: a short real agent session in a throwaway container, as a transcript.
 * @module dsh-remote-worlds/cli/demo
 */
import Docker from 'dockerode'
import type { DockerSubprocessRuntime } from '../providers/docker/docker-runtime.ts'
import { formatRecord, runStep, sessionLeftovers } from './run.ts'
import { trackWorld } from './lifecycle.ts'
import { parseScript } from './script.ts'
import { openWorld } from '../backend/world.ts'
import { DEFAULT_IMAGE, resolveTarget } from './target.ts'

/** The demo's session: what an agent typically does, each step showing a readiness fact. */
export const DEMO_SCRIPT = `# write and run code
mkdir -p /tmp/proj && cd /tmp/proj && printf 'def add(a, b):\\n    return a + b\\n' > calc.py
python3 -c 'import calc; print(calc.add(2, 3))'
# a program that asks for input: settles as stdin_read, proven from /proc
python3 -c 'name = input("na" + "me? "); print("hi", name)'
world
# cat blocks in read(0); Ctrl-C reaches cat's process group, not the shell's
cat
@signal SIGINT
# a long command cancelled after 500 ms with a real SIGINT
@cancel-after 500 sleep 30
echo "status=$?"
# a background job and a TERM-ignoring child that close must still stop
sleep 100 &
sh -c 'trap "" TERM; sleep 100' &
jobs
`

/**
 * Run the demo and print its transcript to `write`.
 * @returns true when the session ran and nothing was left running.
 */
export async function runDemo(write: (text: string) => void, image = DEFAULT_IMAGE): Promise<boolean> {
  const target = await resolveTarget({ image, user: 'agent', cwd: '/tmp' })
  write(`dsh-remote-worlds demo: preparing the Docker engine and ${image} ...\n`)
  await target.prepare()
  const openedAt = performance.now()
  const world = await openWorld({ ...target.world })
  const untrack = trackWorld(world)
  let clean = false
  try {
    const terminal = await world.open()
    const runtime = world.runtime as DockerSubprocessRuntime
    const container = (await runtime.world()).containerId
    write(`world: ${target.description} (container ${container.slice(0, 12)}, network none)\n`)
    write(`shell: remote pid ${terminal.pid}, first prompt after ${Math.round(performance.now() - openedAt)} ms (container start included)\n\n`)
    let i = 0
    for (const step of parseScript(DEMO_SCRIPT)) write(`${formatRecord(await runStep(terminal, step, ++i))}\n`)
    const pid = terminal.pid!
    const before = await sessionLeftovers(world, pid)
    const closeStarted = performance.now()
    await terminal.close()
    const closeMs = Math.round(performance.now() - closeStarted)
    const after = await sessionLeftovers(world, pid)
    write(`\nclose: ${before.length} processes of the session stopped in ${closeMs} ms; /proc scan in the container after close: ${after.length === 0 ? 'nothing of the session is left' : `LEFT RUNNING: ${after.join(' ')}`}\n`)
    await world.dispose()
    const removed = await new Docker().getContainer(container).inspect().then(() => false, (error: { statusCode?: number }) => error.statusCode === 404)
    write(`container ${container.slice(0, 12)} ${removed ? 'removed' : 'STILL PRESENT'}\n`)
    clean = after.length === 0 && removed
  } finally {
    untrack()
    await world.dispose().catch(() => undefined)
  }
  return clean
}
