// A worker thread that faults shared regions in ahead of a writer, for the work engine's first pass
// over new memory (first-pass.ts): as a store's new file pages are faulted in off its JS thread.
//
// It takes a list of [SharedArrayBuffer, end] and writes to one word a page of [0, end) of each, in
// order, then answers 'done'. The write is an atomic add of zero: it allocates the page and changes
// no byte, so a writer that got there first loses nothing.
import { parentPort, workerData } from 'node:worker_threads'

/** Bytes between two touches: the smallest page size of the platforms the bench runs on. */
const TOUCH_STRIDE = 4096

export type TouchJobs = [SharedArrayBuffer, number][]

/** Faults [0, end) of each region in, one write a page. */
export function touchRegions(jobs: TouchJobs): void {
  for (const [shared, end] of jobs) {
    const words = new Int32Array(shared, 0, Math.floor(shared.byteLength / 4))
    const last = Math.min(end, words.length * 4)
    for (let at = 0; at < last; at += TOUCH_STRIDE) Atomics.add(words, at >>> 2, 0)
  }
}

/** The workerData that starts the toucher (only a thread started with it listens). */
export const TOUCHER = 'mqstore-bench-touch-ahead'

if (workerData === TOUCHER) {
  parentPort?.on('message', (jobs: TouchJobs) => {
    touchRegions(jobs)
    parentPort?.postMessage('done')
  })
}
