/**
 * Ed25519 key pairs that ssh2 itself can read back.
 * @module dsh-remote-worlds/testcontainers/key-pair
 */
import ssh2 from 'ssh2'

/** How many fresh pairs {@link readableKeyPair} tries before it gives up. */
const ATTEMPTS = 16

/**
 * A fresh ed25519 key pair in OpenSSH formats (`private`: the PEM-armoured OpenSSH private key;
 * `public`: `ssh-ed25519 BASE64`) whose private key `ssh2.utils.parseKey` accepts. ssh2 1.17's
 * `generateKeyPairSync('ed25519')` returns a private key its own `parseKey` rejects as
 * "Malformed OpenSSH private key" about once in 250 pairs (measured: 12 of 3000), and a test
 * sshd whose client key cannot be read fails its login with "tried: no method".
 * @throws Error when no readable pair came in 16 attempts (never seen).
 */
export function readableKeyPair(): { private: string; public: string } {
  for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
    const pair = ssh2.utils.generateKeyPairSync('ed25519')
    if (!(ssh2.utils.parseKey(pair.private) instanceof Error)) return pair
  }
  throw new Error(`ssh2 generated no readable ed25519 key pair in ${ATTEMPTS} attempts`)
}
