/**
 * Which images the engine holds. No registry is reachable where this project is built, so the
 * code decides from what is local (a managed world's image, Ryuk's, the PowerShell image)
 * instead of letting the engine try a pull.
 * @module dsh-remote-worlds/providers/docker/images
 */
import type Docker from 'dockerode'

/**
 * Whether the engine holds `name` (an image inspect answers). Never pulls.
 * @returns false for an image the engine does not have, and when the engine cannot be asked.
 */
export async function imageExists(docker: Docker, name: string): Promise<boolean> {
  return docker.getImage(name).inspect().then(() => true, () => false)
}
