// A million pending timers: the entries live in the timer log and the wheel (mapped files) and the
// commit log, so the process's anonymous memory (heap and other private pages, not the file pages
// of the mappings) does not grow with them. A generous bound, not a timing.
import * as fs from 'node:fs'
import { describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { tempDir } from '../helpers/tmp.js'
import { timerOf, waitFor } from './helpers.js'

const COUNT = 1_000_000
const BATCH = 2000

/** Private memory of this process: RssAnon on Linux, else the whole RSS. */
function anonymousBytes(): number {
  try {
    const match = /RssAnon:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))
    if (match !== null) return Number(match[1]) * 1024
  } catch {
    // not Linux
  }
  return process.memoryUsage().rss
}

describe('1,000,000 pending timers', () => {
  it('keeps anonymous memory growth under 200 MB', { timeout: 900_000 }, async () => {
    // A budget above the commit log's size: reading the parked records must not remap files all along.
    const store = await MessageStore.open(tempDir('mqstore-timer-million-'), { mappingBudgetBytes: 2048 * 1024 * 1024 })
    try {
      const body = Buffer.alloc(32, 1)
      const now = Date.now()
      const batch = (start: number) =>
        Array.from({ length: BATCH }, (_, i) => ({
          topic: 'reminders',
          queueId: (start + i) % 4,
          body,
          // Spread over six days, one second apart and then some: many slots, some shared.
          deliverAt: now + 3_600_000 + (((start + i) * 431) % (6 * 86_400_000)),
        }))
      // A first batch warms up the paths (code, pools) before the baseline is taken.
      await store.putMessages(batch(0))
      await waitFor(() => timerOf(store).stats().pending === BATCH, 'the first batch enqueued')
      const before = anonymousBytes()
      for (let start = BATCH; start < COUNT; start += BATCH) {
        const results = await store.putMessages(batch(start))
        if (results.some((r) => r.status !== 'PUT_OK')) throw new Error(`put failed: ${results.find((r) => r.status !== 'PUT_OK')?.status}`)
      }
      await waitFor(() => timerOf(store).stats().pending === COUNT, 'a million enqueued', 600_000)
      const stats = timerOf(store).stats()
      expect(stats.delivered).toBe(0)
      expect(stats.nextDueTime).toBeGreaterThan(now)
      const growth = anonymousBytes() - before
      console.log(`anonymous memory grew by ${(growth / 1048576).toFixed(1)} MB with ${COUNT} timers pending`)
      expect(growth).toBeLessThan(200 * 1024 * 1024)
    } finally {
      await store.close()
    }
  })
})
