// The work engine's put loop (limits.ts) as the put phase meets it, in a process of its own: the
// bench's engines put into a store after warm-up stores of PUT_WARMUP messages, in a fresh child,
// and their put phase is that process's first long pass, into files whose pages no pass wrote
// before. The work engine's limit (putLoopWorkRates) is the median of passes over the same
// pre-faulted regions after an untimed one; this is one pass, after the same warm-up, into new
// pre-faulted regions: what that engine's put phase would measure in an engine's place.
//
//   node dist/bench/first-pass.js [count] [warm-up]   # prints messages/s (or sends it to a parent)
import { fileURLToPath } from 'node:url'

import { prefaulted, recordLength, workEngine, workRegions } from './limits.js'
import { PUT_WARMUP, PUT_WARMUP_STORES, putInBatches, QUEUES, TOPICS } from './workload.js'

/** Messages per second of one pass of `count` into new pre-faulted regions, after `warmups` passes of `warmup`, each into regions of its own. */
export async function firstPassWorkRate(count: number, warmup = PUT_WARMUP, warmups = PUT_WARMUP_STORES): Promise<number> {
  for (let k = 0; k < warmups; k++) await pass(warmup)
  return pass(count)
}

async function pass(count: number): Promise<number> {
  // Room for every record of the pass: none is written over another, as in a commit log.
  const target = prefaulted(count * recordLength(Math.max(0, count - 1)) + 4096)
  const view = new DataView(target.buffer, target.byteOffset, target.byteLength)
  const engine = workEngine(target, view, workRegions(Math.ceil(count / (TOPICS * QUEUES))))
  const t0 = process.hrtime.bigint()
  await putInBatches(count, engine)
  return count / (Number(process.hrtime.bigint() - t0) / 1e9)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [count, warmup] = process.argv.slice(2).map(Number)
  const rate = await firstPassWorkRate(count > 0 ? count : 400_000, warmup >= 0 ? warmup : PUT_WARMUP)
  if (process.send !== undefined) process.send({ rate }, () => process.exit(0))
  else process.stdout.write(`${Math.round(rate)}\n`)
}
