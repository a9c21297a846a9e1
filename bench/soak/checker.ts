/**
 * An independent view of a container's processes for the soak: one persistent `docker exec -i`
 * of python3 (in the project image) as root, answering "how many live processes carry this
 * marker in their command line" per request line. It never goes through the control channel
 * under test, and costs one round trip per question instead of an engine exec.
 * @module bench/soak/checker
 */
import { PassThrough, type Duplex } from 'node:stream'
import type Docker from 'dockerode'

// Reads every /proc/PID/stat (state after the LAST ") ") and cmdline; zombies and itself excluded.
const CHECKER = String.raw`
import os, sys
me = os.getpid()
for line in sys.stdin:
    marker = line.rstrip('\n')
    count = 0
    for name in os.listdir('/proc'):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open('/proc/%s/stat' % name, 'rb') as f:
                stat = f.read().decode('latin1')
            with open('/proc/%s/cmdline' % name, 'rb') as f:
                cmdline = f.read().replace(b'\0', b' ').decode('utf8', 'replace')
        except OSError:
            continue
        if stat[stat.rindex(') ') + 2] in 'ZXx':
            continue
        if marker in cmdline:
            count += 1
    sys.stdout.write('%d\n' % count)
    sys.stdout.flush()
`

/** Live processes of one container, counted by a marker in their command line. */
export class ProcessChecker {
  private buffered = ''
  private readonly waiting: ((line: string) => void)[] = []

  private constructor(private readonly stream: Duplex) {}

  /**
   * Start the checker in `containerId` (python3 must be there, as in the project image).
   * @throws the engine's errors.
   */
  static async start(docker: Docker, containerId: string): Promise<ProcessChecker> {
    const exec = await docker.getContainer(containerId).exec({ Cmd: ['python3', '-u', '-c', CHECKER], AttachStdin: true, AttachStdout: true, AttachStderr: true, User: 'root' })
    const stream = await exec.start({ hijack: true, stdin: true }) as Duplex
    const checker = new ProcessChecker(stream)
    const stdout = new PassThrough()
    docker.modem.demuxStream(stream, stdout, new PassThrough().resume())
    stdout.on('data', (chunk: Buffer) => checker.onData(chunk))
    stream.on('error', () => undefined)
    return checker
  }

  /** Live (non-zombie) processes whose command line contains `marker` (no newline in it). */
  count(marker: string): Promise<number> {
    return new Promise(resolve => {
      this.waiting.push(line => resolve(Number(line)))
      this.stream.write(`${marker}\n`)
    })
  }

  /** End the checker (EOF on its stdin). */
  close(): void {
    this.stream.end()
    this.stream.destroy()
  }

  private onData(chunk: Buffer): void {
    this.buffered += chunk.toString('utf8')
    for (let newline = this.buffered.indexOf('\n'); newline >= 0; newline = this.buffered.indexOf('\n')) {
      const line = this.buffered.slice(0, newline)
      this.buffered = this.buffered.slice(newline + 1)
      this.waiting.shift()?.(line)
    }
  }
}
