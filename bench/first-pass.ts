// The work engine's put loop (limits.ts) as the put phase meets it, in a process of its own: the
// bench's engines put into a store after warm-up stores of PUT_WARMUP messages, in a fresh child,
// and their put phase is that process's first long pass, into files whose pages no pass wrote
// before. The work engine's limit (putLoopWorkRates) is the median of passes over the same
// pre-faulted regions after an untimed one; this is one pass, after the same warm-up, into new
// regions: what that engine's put phase would measure in an engine's place.
//
// The regions are either pre-faulted before the pass ('prefaulted'), or new to the process and
// faulted in during the pass by a thread of its own, ahead of the writer ('ahead'): a store's put
// writes its bytes into pages new to it (a new commit-log chunk, the index's next entries), which
// the system must provide, and mqstore faults them in on the libuv pool off its JS thread. In a
// virtual machine a page new to the guest costs several microseconds; with some 0.1 page of new
// bytes a message, that is more than the rest of the work, and on a machine of two CPUs the thread
// that pays it shares them with the writer.
//
//   node dist/bench/first-pass.js [count] [warm-up] [prefaulted|ahead]
//     # prints messages/s (or sends it to a parent)
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import { INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, HASH_SLOT_SIZE } from '../lib/store/index/index-layout.js'
import { prefaulted, recordLength, workEngine, workRegions } from './limits.js'
import { TOUCHER, type TouchJobs } from './touch-ahead.js'
import { PUT_WARMUP, PUT_WARMUP_STORES, putInBatches, QUEUES, TOPICS } from './workload.js'

/** How the pass's regions get their pages: all before the pass, or during it by a thread of its own. */
export type FirstPassMemory = 'prefaulted' | 'ahead'

/**
 * Messages per second of one pass of `count` into new regions, after `warmups` passes of `warmup`,
 * each into regions of its own.
 */
export async function firstPassWorkRate(
  count: number,
  warmup = PUT_WARMUP,
  warmups = PUT_WARMUP_STORES,
  memory: FirstPassMemory = 'prefaulted',
): Promise<number> {
  for (let k = 0; k < warmups; k++) await pass(warmup, memory)
  return pass(count, memory)
}

async function pass(count: number, memory: FirstPassMemory): Promise<number> {
  // Shared regions, for the thread that faults them in (nothing touches them before the pass).
  const shared: SharedArrayBuffer[] = []
  const newRegion = (bytes: number): Buffer => {
    const region = new SharedArrayBuffer(bytes)
    shared.push(region)
    return Buffer.from(region)
  }
  const allocate = memory === 'prefaulted' ? prefaulted : newRegion
  // Room for every record of the pass: none is written over another, as in a commit log.
  const target = allocate(count * recordLength(Math.max(0, count - 1)) + 4096)
  const view = new DataView(target.buffer, target.byteOffset, target.byteLength)
  const regions = workRegions(Math.ceil(count / (TOPICS * QUEUES)), undefined, undefined, allocate)
  const engine = workEngine(target, view, regions)
  const toucher = memory === 'ahead' ? await startToucher(touchJobs(shared, regions.slots, count)) : null
  try {
    const t0 = process.hrtime.bigint()
    await putInBatches(count, engine)
    return count / (Number(process.hrtime.bigint() - t0) / 1e9)
  } finally {
    if (toucher !== null) {
      await toucher.done
      await toucher.worker.terminate()
    }
  }
}

/**
 * What the toucher faults in, in order: the index's header, slots and the entries the pass writes
 * (its slots are written at random, so first), the queues' units, then the log, which the writer
 * goes through in order. `shared` holds the log first, then the queues, then the index
 * (workRegions' order).
 */
function touchJobs(shared: SharedArrayBuffer[], slots: number, count: number): TouchJobs {
  const index = shared[shared.length - 1]
  const indexEnd = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + (count + 1) * INDEX_ENTRY_SIZE
  return [
    [index, Math.min(index.byteLength, indexEnd)],
    ...shared.slice(1, -1).map((units): [SharedArrayBuffer, number] => [units, units.byteLength]),
    [shared[0], shared[0].byteLength],
  ]
}

/** A thread that faults `jobs` in (touch-ahead.ts), started before the pass is timed. */
async function startToucher(jobs: TouchJobs): Promise<{ worker: Worker; done: Promise<unknown> }> {
  const worker = new Worker(new URL('./touch-ahead.js', import.meta.url), { workerData: TOUCHER })
  await new Promise((resolve, reject) => {
    worker.once('online', resolve)
    worker.once('error', reject)
  })
  const done = new Promise((resolve, reject) => {
    worker.once('message', resolve)
    worker.once('error', reject)
  })
  worker.postMessage(jobs)
  return { worker, done }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [count, warmup] = process.argv.slice(2, 4).map(Number)
  const memory: FirstPassMemory = process.argv[4] === 'ahead' ? 'ahead' : 'prefaulted'
  const rate = await firstPassWorkRate(count > 0 ? count : 400_000, warmup >= 0 ? warmup : PUT_WARMUP, PUT_WARMUP_STORES, memory)
  if (process.send !== undefined) process.send({ rate }, () => process.exit(0))
  else process.stdout.write(`${Math.round(rate)}\n`)
}
