import { test, expect } from 'vitest'
import { Worker } from 'node:worker_threads'
test('w', async () => {
  const w = new Worker(new URL('../.scratch/w-worker.ts', import.meta.url))
  const m = await new Promise(r => w.on('message', r))
  await w.terminate()
  expect(m).toBe('hi 1 function')
})
