import { parentPort } from 'node:worker_threads'
import xterm from '@xterm/headless'
import { type Foo, hello } from './w-util.ts'
const t = new xterm.Terminal({ allowProposedApi: true })
const f: Foo = { a: 1 }
parentPort!.postMessage(hello(f) + ' ' + typeof t.write)
