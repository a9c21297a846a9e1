import { Worker } from 'node:worker_threads'
const s = performance.now()
const w = new Worker(new URL('./w-worker.ts', import.meta.url))
w.on('message', m => { console.log(m, performance.now() - s); w.terminate() })
w.on('error', e => console.log('err', e))
