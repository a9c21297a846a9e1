/**
 * Demultiplexing of a non-TTY Docker attach stream (the Engine API's `application/vnd.docker.
 * multiplexed-stream`): frames of an 8-byte header `[type, 0, 0, 0, size(uint32 BE)]` and
 * `size` payload bytes, type 1 = stdout, 2 = stderr. Unlike docker-modem's `demuxStream`, this
 * copies nothing but split headers and honours backpressure: while a destination is full, the
 * socket is paused (so a slow reader throttles the remote writer instead of filling memory).
 * @module dsh-remote-worlds/providers/docker/demux
 */
import { PassThrough, type Readable } from 'node:stream'

/** The two demultiplexed streams. */
export interface DemuxedStreams {
  stdout: PassThrough
  stderr: PassThrough
}

/**
 * Split `source` into stdout and stderr. Both end when `source` ends or closes; a source error
 * destroys neither (it ends them, so readers see the end of the bytes that did arrive).
 * @param source - the hijacked exec stream.
 * @param highWaterMark - buffer of each destination before the socket pauses (bytes).
 */
export function demuxDockerStream(source: Readable, highWaterMark = 1 << 20): DemuxedStreams {
  const stdout = new PassThrough({ highWaterMark })
  const stderr = new PassThrough({ highWaterMark })
  const header = Buffer.alloc(8)
  let headerBytes = 0
  let remaining = 0
  let target: PassThrough | undefined
  let waiting = 0
  const resume = (): void => {
    waiting -= 1
    if (waiting === 0) source.resume()
  }
  source.on('data', (chunk: Buffer) => {
    let offset = 0
    while (offset < chunk.length) {
      if (remaining === 0) {
        const take = Math.min(8 - headerBytes, chunk.length - offset)
        chunk.copy(header, headerBytes, offset, offset + take)
        headerBytes += take
        offset += take
        if (headerBytes < 8) break
        headerBytes = 0
        remaining = header.readUInt32BE(4)
        // Type 0 (stdin echo) is never sent for exec; anything but stderr goes to stdout.
        target = header[0] === 2 ? stderr : stdout
        continue
      }
      const take = Math.min(remaining, chunk.length - offset)
      const payload = chunk.subarray(offset, offset + take)
      offset += take
      remaining -= take
      if (!target!.write(payload)) {
        waiting += 1
        if (waiting === 1) source.pause()
        target!.once('drain', resume)
      }
    }
  })
  let ended = false
  const end = (): void => {
    if (ended) return
    ended = true
    stdout.end()
    stderr.end()
  }
  source.once('end', end)
  source.once('close', end)
  source.once('error', end)
  return { stdout, stderr }
}

/**
 * The payloads of a whole multiplexed buffer (a container log read without `follow`), stdout
 * and stderr frames in their order, as UTF-8 text. A truncated last frame keeps what arrived.
 */
export function demuxedText(buffer: Buffer): string {
  const parts: Buffer[] = []
  let offset = 0
  while (offset + 8 <= buffer.length) {
    const size = buffer.readUInt32BE(offset + 4)
    parts.push(buffer.subarray(offset + 8, offset + 8 + size))
    offset += 8 + size
  }
  return Buffer.concat(parts).toString('utf8')
}
