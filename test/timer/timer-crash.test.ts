// SIGKILL with timers pending and due: a child puts timed messages while the timer delivers them,
// and is killed at a random moment after some deliveries. Reopened here, every acknowledged
// message reaches its real topic (none lost); one delivered twice (its progress was not saved yet)
// keeps its UNIQ_KEY and body.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { deliveredCounts, runAndKill } from '../helpers/delivery-crash.js'
import { distEntry, tempDir } from '../helpers/tmp.js'
import { readAll, waitFor } from './helpers.js'

const CYCLES = 3
/** Messages a delivery puts in one call (the services' DELIVERY_BATCH). */
const DELIVERY_BATCH = 32

beforeAll(() => {
  if (!fs.existsSync(fileURLToPath(distEntry))) throw new Error('the child runs the compiled package: run `npm run build:ts` first')
})

describe('SIGKILL with timers pending and due', () => {
  it(`loses none, and a duplicate keeps its UNIQ_KEY; few repeats (${CYCLES} kills)`, async () => {
    const dir = join(tempDir('mqstore-timer-crash-'), 'store')
    const acked: string[] = []
    for (let run = 0; run < CYCLES; run++) {
      acked.push(...(await runAndKill('timer', dir, run, 5 + Math.floor(Math.random() * 60))))
    }
    const store = await MessageStore.open(dir, { timerPrecisionMs: 100 })
    try {
      expect(store.stats().lastExitOK).toBe(false)
      const seen = (): Map<string, number> =>
        deliveredCounts(
          [0, 1].flatMap((queueId) => readAll(store, 'later', queueId)),
          'TIMER_OUT_MS',
        )
      await waitFor(() => acked.every((uniq) => seen().has(uniq)), 'every acknowledged message to be delivered', 60_000)
      await waitFor(() => store.stats().timer.pending === 0, 'nothing pending')
      const counts = seen()
      const duplicates = [...counts.values()].filter((n) => n > 1).length
      console.log(`${acked.length} acknowledged, ${counts.size} delivered, ${duplicates} delivered more than once`)
      // Progress is noted after each batch (config/timerProgress.json) and a kill keeps the page
      // cache: only the batch in flight at a kill goes again.
      expect(duplicates).toBeLessThanOrEqual(CYCLES * DELIVERY_BATCH)
      expect(counts.size).toBeGreaterThanOrEqual(acked.length)
    } finally {
      await store.close()
    }
  })
})
