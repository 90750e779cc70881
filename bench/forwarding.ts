// The benchmark's 'forward' phase: puts forwarded by a producer in another process
// (MessageStore.connect) against the same puts made in-process, into one store opened with
// shareWrites, in the same run: the same messages, the same putMessages batches, ASYNC_FLUSH.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

import { MessageStore, type Message, type OpenOptions } from '../lib/index.js'
import {
  check,
  keyOf,
  log,
  makeBodies,
  makeTempDir,
  now,
  PUT_BATCH,
  queueOf,
  removeDir,
  SCAN_QUEUE,
  SCAN_TOPIC,
  scannedQueueSize,
  secondsSince,
  topicOf,
  type BenchConfig,
  type ForwardResult,
} from './workload.js'

/** Messages each side puts: enough for a steady rate, not the whole put phase again. */
const FORWARD_MAX = 200_000
/** Untimed in-process puts first, so that the writer's put path is warm for both sides. */
const WARMUP = 16_000

export async function forwardedPuts(config: BenchConfig, common: OpenOptions): Promise<ForwardResult> {
  // An even number of 16-message rounds, so that the scanned queue's size is known after both.
  const count = Math.max(16, Math.floor(Math.min(config.count, FORWARD_MAX) / 16) * 16)
  const dir = makeTempDir('mqstore-forward')
  try {
    const store = await MessageStore.open(dir, { ...common, flushDiskType: 'ASYNC_FLUSH', shareWrites: true })
    try {
      log(`mqstore: ${count} puts in-process, then ${count} forwarded by another process (batches of ${PUT_BATCH})`)
      await putInProcess(store, 0, WARMUP)
      const started = now()
      await putInProcess(store, WARMUP, count)
      const inProcessSeconds = secondsSince(started)
      const forwardedSeconds = await runProducerChild(dir, WARMUP + count, count)
      const queued = store.getMaxOffsetInQueue(SCAN_TOPIC, SCAN_QUEUE)
      check(queued === scannedQueueSize(WARMUP + 2 * count), `the queue holds ${queued} messages after both`)
      check(store.stats().sharing?.forwardedPuts === count, 'the writer did not count every forwarded put')
      return {
        count,
        batch: PUT_BATCH,
        inProcessRate: count / inProcessSeconds,
        forwardedRate: count / forwardedSeconds,
      }
    } finally {
      await store.close()
    }
  } finally {
    removeDir(dir)
  }
}

/** Puts messages [first, first + count) in batches, as the producer child does. */
async function putInProcess(store: MessageStore, first: number, count: number): Promise<void> {
  for (let at = first; at < first + count; at += PUT_BATCH) {
    const n = Math.min(PUT_BATCH, first + count - at)
    const batch: Message[] = makeBodies(at, n).map((body, j) => ({
      topic: topicOf(at + j),
      queueId: queueOf(at + j),
      body,
      keys: keyOf(at + j),
    }))
    for (const r of await store.putMessages(batch)) check(r.status === 'PUT_OK', `in-process put: ${r.status}`)
  }
}

/** Runs the producer child without blocking this process, which is the writer it talks to. */
function runProducerChild(dir: string, first: number, count: number): Promise<number> {
  const script = fileURLToPath(new URL('./forward-producer.js', import.meta.url))
  const child = spawn(process.execPath, [script, dir, String(first), String(count)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      const seconds = Number(out.trim())
      if (code === 0 && seconds > 0) resolve(seconds)
      else reject(new Error(`the forwarding producer ended with ${signal ?? `status ${code}`}: ${out}`))
    })
  })
}
