/**
 * testcontainers starts its resource reaper, Ryuk, from the image `testcontainers/ryuk`, pulled
 * from a registry when missing. Where no registry is reachable that pull fails every start, and
 * a container of this room does not need Ryuk: its lifeline (providers/docker/lifeline.ts)
 * removes it when the test process dies, however it dies.
 * @module dsh-remote-worlds/testcontainers/ryuk
 */
import type Dockerode from 'dockerode'
import { imageExists } from '../providers/docker/images.ts'

/** The Ryuk image testcontainers uses (its `RYUK_CONTAINER_IMAGE` override, else its default). */
export function ryukImage(): string {
  return process.env.RYUK_CONTAINER_IMAGE ?? 'testcontainers/ryuk:0.14.0'
}

/**
 * Turn Ryuk off for this process (`TESTCONTAINERS_RYUK_DISABLED=true`) when the user did not
 * decide and its image is not in the engine: it would be pulled, which fails offline (and sends
 * traffic to a registry). Decided once, before the first container of this room starts.
 * @returns true when Ryuk runs (enabled, image present or the user's choice).
 */
export async function disableRyukWhenAbsent(docker: Dockerode): Promise<boolean> {
  const setting = process.env.TESTCONTAINERS_RYUK_DISABLED
  if (setting !== undefined) return setting !== 'true'
  const present = await imageExists(docker, ryukImage())
  if (!present) process.env.TESTCONTAINERS_RYUK_DISABLED = 'true'
  return present
}
