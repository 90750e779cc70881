// The benchmark's 'timer' phase (mqstore only): timed messages (deliverAt) in a new store.
// 1. Insert rate: N timers, due in one to seven days, put in batches; the clock runs from the first
//    put until the timer store holds them all (stats().timer.pending), so the figure covers both the
//    put and the entry into the timer log and wheel.
// 2. Delivery lag with N pending: a batch of timers due a few seconds ahead, spread over a second,
//    consumed from their topic; the lag of each is its arrival in consume() minus its deliverAt.
// 3. RSS (and private memory) growth from before the N timers to after their entry.
// The store runs with timerPrecisionMs 100, so a timer is due at most 100 ms after its time.
import * as fs from 'node:fs'

import { MessageStore, type Message, type OpenOptions } from '../lib/index.js'
import { check, log, makeTempDir, now, removeDir, secondsSince, type TimerResult } from './workload.js'

const TOPIC = 'timed'
const BATCH = 1000
/** Timers in the lag batch (fewer when N is smaller). */
const DUE_MAX = 1000
/** The lag batch is due this far ahead of its put, spread over DUE_SPREAD_MS. */
const DUE_AHEAD_MS = 3000
const DUE_SPREAD_MS = 1000
const PRECISION_MS = 100
const DAY_MS = 86_400_000

/** Private memory (RssAnon on Linux; the whole RSS elsewhere). */
function anonymousBytes(): number {
  try {
    const match = /RssAnon:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))
    if (match !== null) return Number(match[1]) * 1024
  } catch {
    // not Linux
  }
  return process.memoryUsage().rss
}

async function waitFor(condition: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    check(Date.now() < deadline, `timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

export async function timerDelivery(config: { count: number }, common: OpenOptions): Promise<TimerResult> {
  const count = config.count
  const dir = makeTempDir('mqstore-timer')
  try {
    // A mapping budget above the commit log's size: reading parked records must not remap files.
    const store = await MessageStore.open(dir, {
      ...common,
      flushDiskType: 'ASYNC_FLUSH',
      timerPrecisionMs: PRECISION_MS,
      mappingBudgetBytes: 2048 * 2 ** 20,
    })
    try {
      const body = Buffer.alloc(64, 1)
      const base = Date.now()
      const batch = (start: number, size: number): Message[] =>
        Array.from({ length: size }, (_, i) => ({
          topic: TOPIC,
          queueId: (start + i) % 4,
          body,
          // From one to seven days ahead, scattered: many slots, some shared.
          deliverAt: base + DAY_MS + (((start + i) * 7919) % (6 * DAY_MS)),
        }))
      // An untimed batch makes the timer files and warms the paths before the baseline.
      const warm = Math.min(BATCH, count)
      await store.putMessages(batch(0, warm))
      await waitFor(() => store.stats().timer.pending === warm, 'the warm-up timers', 120_000)
      const rssBefore = process.memoryUsage().rss
      const anonBefore = anonymousBytes()

      log(`mqstore: ${count} timers put (deliverAt 1-7 days ahead) until the timer store holds them`)
      const t0 = now()
      for (let start = warm; start < warm + count; start += BATCH) {
        const results = await store.putMessages(batch(start, Math.min(BATCH, warm + count - start)))
        const failed = results.find((r) => r.status !== 'PUT_OK')
        check(failed === undefined, `timer put: ${failed?.status}`)
      }
      const putSeconds = secondsSince(t0)
      await waitFor(() => store.stats().timer.pending === warm + count, 'the timers to enter the wheel', 1_800_000)
      const seconds = secondsSince(t0)
      const rssGrowthBytes = process.memoryUsage().rss - rssBefore
      const anonGrowthBytes = anonymousBytes() - anonBefore

      const due = Math.max(10, Math.min(DUE_MAX, count))
      log(`mqstore: ${due} timers due ${DUE_AHEAD_MS / 1000} s ahead while ${warm + count} others are pending`)
      const dueTopic = `${TOPIC}-due`
      const start = Date.now() + DUE_AHEAD_MS
      const dueMessages: Message[] = Array.from({ length: due }, (_, i) => {
        const deliverAt = start + Math.floor((i * DUE_SPREAD_MS) / due)
        const b = Buffer.alloc(64)
        b.writeDoubleBE(deliverAt, 0)
        return { topic: dueTopic, queueId: 0, body: b, deliverAt }
      })
      const controller = new AbortController()
      const sub = store.consume({ group: 'bench-timer', topic: dueTopic, queueId: 0, from: 'earliest', signal: controller.signal })
      const results = await store.putMessages(dueMessages)
      check(
        results.every((r) => r.status === 'PUT_OK'),
        'the due batch was refused',
      )
      const lags: number[] = []
      const guard = setTimeout(() => controller.abort(), DUE_AHEAD_MS + DUE_SPREAD_MS + 600_000)
      try {
        for await (const m of sub) {
          lags.push(performance.timeOrigin + performance.now() - m.body.readDoubleBE(0))
          if (lags.length === due) break
        }
      } finally {
        clearTimeout(guard)
      }
      check(lags.length === due, `${lags.length} of ${due} due timers arrived`)
      const sorted = [...lags].sort((a, b) => a - b)
      const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
      return {
        count,
        putSeconds,
        seconds,
        rate: count / seconds,
        due,
        precisionMs: PRECISION_MS,
        lagMs: { p50: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1] },
        rssGrowthBytes,
        anonGrowthBytes,
      }
    } finally {
      await store.close()
    }
  } finally {
    removeDir(dir)
  }
}
