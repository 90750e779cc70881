// Compaction benchmark: one measured cleaning pass (bytes in and out, keys, duration, MB/s), and
// put latency p99 with and without a pass running in the same process.
//
// Latency is measured open-loop: puts are due at a fixed rate and each one's latency runs from
// the moment it was due to the moment its put resolved, so time the event loop spends in a
// cleaning slice counts against the put that had to wait for it.
//   node dist/bench/compaction.js [records=150000] [keys=15000] [sliceMs=0.25] [ioMaxBytesPerSecond=unlimited]
import * as fs from 'node:fs'
import * as os from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { setImmediate as turn } from 'node:timers/promises'

import { MessageStore } from '../lib/index.js'

const records = Number(process.argv[2] ?? 150_000)
const keys = Number(process.argv[3] ?? 15_000)
const sliceMs = Number(process.argv[4] ?? 0.25)
const ioMaxBytesPerSecond = Number(process.argv[5] ?? Infinity)
const BODY = 256
const PUT_INTERVAL_MS = 0.5
const TOPIC = 'bench-compacted'

function quantile(sorted: number[], q: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}

/** Puts at a fixed rate until `until` resolves; returns the due→resolved latencies in ms. */
async function producePuts(store: MessageStore, until: Promise<unknown>): Promise<number[]> {
  let done = false
  void until.finally(() => {
    done = true
  })
  const latencies: number[] = []
  const body = Buffer.alloc(BODY, 7)
  let due = performance.now()
  let i = 0
  while (!done) {
    await turn()
    const now = performance.now()
    while (due <= now) {
      const dueAt = due
      due += PUT_INTERVAL_MS
      const r = await store.putMessage({ topic: 'plain', queueId: i++ % 4, body, keys: `k${i}` })
      if (r.status !== 'PUT_OK') throw new Error(r.status)
      latencies.push(performance.now() - dueAt)
    }
  }
  return latencies
}

async function main(): Promise<void> {
  const root = fs.mkdtempSync(join(os.tmpdir(), 'mqstore-bench-compaction-'))
  const store = await MessageStore.open(join(root, 'store'), {
    flushDiskType: 'ASYNC_FLUSH',
    mappedFileSizeCommitLog: 64 << 20,
    topics: { [TOPIC]: { cleanupPolicy: 'compact', minCleanableDirtyRatio: 0 } },
    compaction: { enabled: false, fileDeleteDelayMs: 0, sliceMs, ioMaxBytesPerSecond },
  })
  try {
    const body = Buffer.alloc(BODY, 1)
    const BATCH = 1000
    for (let i = 0; i < records; i += BATCH) {
      const batch = []
      for (let k = i; k < Math.min(records, i + BATCH); k++) batch.push({ topic: TOPIC, queueId: 0, keys: `key-${k % keys}`, body })
      await store.putMessages(batch)
    }
    const logBytes = store.stats().compaction.logBytes

    // Warm-up (first files of the plain topic's queues), then without a pass for a fixed while.
    await producePuts(store, new Promise((r) => setTimeout(r, 1500)))
    const loopIdle = monitorEventLoopDelay({ resolution: 1 })
    loopIdle.enable()
    const idle = await producePuts(store, new Promise((r) => setTimeout(r, 3000)))
    loopIdle.disable()
    // With a pass.
    const loopBusy = monitorEventLoopDelay({ resolution: 1 })
    loopBusy.enable()
    const pass = store.compact(TOPIC)
    const busy = await producePuts(store, pass)
    const report = await pass
    loopBusy.disable()
    const loopMs = (h: ReturnType<typeof monitorEventLoopDelay>) => ({
      p99: Number((h.percentile(99) / 1e6).toFixed(3)),
      max: Number((h.max / 1e6).toFixed(3)),
    })
    const q = report.queues[0]
    idle.sort((a, b) => a - b)
    busy.sort((a, b) => a - b)
    const mb = (n: number): number => n / (1024 * 1024)
    const out = {
      records,
      keys,
      sliceMs,
      ioMaxBytesPerSecond,
      logBytes,
      pass: {
        bytesIn: q.bytesRead,
        bytesOut: q.bytesWritten,
        keys: q.keys,
        recordsKept: q.recordsKept,
        recordsDropped: q.recordsDropped,
        durationMs: Math.round(q.durationMs),
        mbPerSec: Number((mb(q.bytesRead) / (q.durationMs / 1000)).toFixed(1)),
      },
      eventLoopDelayMs: { withoutPass: loopMs(loopIdle), duringPass: loopMs(loopBusy) },
      putLatencyMs: {
        withoutPass: { n: idle.length, p50: quantile(idle, 0.5), p99: quantile(idle, 0.99), max: idle.at(-1) },
        duringPass: { n: busy.length, p50: quantile(busy, 0.5), p99: quantile(busy, 0.99), max: busy.at(-1) },
      },
    }
    out.putLatencyMs.withoutPass.p99 = Number(out.putLatencyMs.withoutPass.p99.toFixed(3))
    out.putLatencyMs.duringPass.p99 = Number(out.putLatencyMs.duringPass.p99.toFixed(3))
    console.log(JSON.stringify(out, null, 2))
    console.log(`p99 ratio during/without a pass: ${(out.putLatencyMs.duringPass.p99 / out.putLatencyMs.withoutPass.p99).toFixed(2)}`)
  } finally {
    await store.close()
    fs.rmSync(root, { recursive: true, force: true })
  }
}

await main()
