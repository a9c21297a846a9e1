/**
 * Shared pieces of the egress suites (Docker and SSH worlds): the world's HTTP client and a GET
 * from this machine. Servers are this machine's 127.0.0.1 only.
 */
import { get } from 'node:http'
import { setTimeout as delay } from 'node:timers/promises'

/** The world's HTTP(S) client: prints `STATUS BODY`, or `error KIND` (python3 is in the image; urllib reads *_PROXY). */
export const FETCH = `import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=20)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except Exception as e:
    print('error', type(e).__name__)
`

/** GET http://127.0.0.1:PORT/PATH from this machine: the status and body, or the error's code. */
export function hostGet(port: number, path: string): Promise<string> {
  return new Promise(resolve => {
    get({ host: '127.0.0.1', port, path }, response => {
      let body = ''
      response.on('data', (chunk: Buffer) => { body += chunk.toString('utf8') })
      response.on('end', () => resolve(`${response.statusCode} ${body}`))
    }).on('error', (error: NodeJS.ErrnoException) => resolve(`error ${error.code ?? error.message}`))
  })
}

/**
 * Ask `attempt` until its answer starts with `prefix` (a server or a relay that starts in the
 * background), at most `boundMs`; returns the last answer.
 */
export async function answerStartingWith(prefix: string, attempt: () => Promise<string>, boundMs = 20_000): Promise<string> {
  let answer = await attempt()
  for (const deadline = Date.now() + boundMs; !answer.startsWith(prefix) && Date.now() < deadline;) {
    await delay(100)
    answer = await attempt()
  }
  return answer
}
