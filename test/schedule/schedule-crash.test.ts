// SIGKILL with delayed messages pending and due: a child puts delayed messages while the schedule
// service delivers them, and is killed at a random moment after some deliveries. Reopened here,
// every acknowledged message reaches its real topic (none lost); a message delivered twice (its
// progress was not saved yet) keeps its UNIQ_KEY and body; delivery per queue stays in put order.
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

describe('SIGKILL with delayed messages pending and due', () => {
  it(`loses none, and a duplicate keeps its UNIQ_KEY; few repeats (${CYCLES} kills)`, async () => {
    const dir = join(tempDir('mqstore-schedule-crash-'), 'store')
    const acked: string[] = []
    for (let run = 0; run < CYCLES; run++) {
      acked.push(...(await runAndKill('delay', dir, run, 5 + Math.floor(Math.random() * 40))))
    }
    const store = await MessageStore.open(dir)
    try {
      expect(store.stats().lastExitOK).toBe(false)
      const seen = (): Map<string, number> =>
        deliveredCounts(
          [0, 1].flatMap((queueId) => readAll(store, 'later', queueId)),
          'DELAY',
        )
      await waitFor(() => acked.every((uniq) => seen().has(uniq)), 'every acknowledged message to be delivered', 60_000)
      await waitFor(() => store.stats().schedule.pending === 0, 'nothing pending')
      // Per queue, first deliveries come in put order (a level is a FIFO; duplicates repeat a run's tail).
      for (const queueId of [0, 1]) {
        const order = readAll(store, 'later', queueId).map((m) => m.properties.UNIQ_KEY)
        const firsts = order.filter((uniq, i) => order.indexOf(uniq) === i)
        const key = (uniq: string): number[] => uniq.slice(1).split('-M').map(Number)
        const sorted = [...firsts].sort((a, b) => key(a)[0] - key(b)[0] || key(a)[1] - key(b)[1])
        expect(firsts).toEqual(sorted)
      }
      const counts = seen()
      const duplicates = [...counts.values()].filter((n) => n > 1).length
      console.log(`${acked.length} acknowledged, ${counts.size} delivered, ${duplicates} delivered more than once`)
      // Progress is noted after each batch (config/delayProgress.json) and a kill keeps the page
      // cache: only the batches in flight at a kill go again, one per level (two levels here).
      expect(duplicates).toBeLessThanOrEqual(CYCLES * 2 * DELIVERY_BATCH)
    } finally {
      await store.close()
    }
  })
})
