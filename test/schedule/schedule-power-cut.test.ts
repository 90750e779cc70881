// A power cut while delayed messages are being delivered: the delivered copies are in the page
// cache only, so the cut loses them; the progress file must not say they were delivered, or they
// would be lost for good. On the image every message is delivered again (same UNIQ_KEY).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { MessageStore } from '../../lib/store/message-store.js'
import { PowerLossDisk } from '../helpers/power-loss.js'
import { tempDir } from '../helpers/tmp.js'
import { FakeClock, readAll, SMALL, scheduleOf, waitFor } from './helpers.js'

/** Nothing is flushed on its own: only a close syncs the commit log. */
const QUIET = {
  ...SMALL,
  flushIntervalCommitLog: 3_600_000,
  flushCommitLogThoroughInterval: 3_600_000,
  flushCommitLogLeastPages: 10_000,
  flushIntervalConsumeQueue: 3_600_000,
  flushConsumeQueueThoroughInterval: 3_600_000,
  flushConsumeQueueLeastPages: 10_000,
  flushDelayOffsetInterval: 20,
}

let disk: PowerLossDisk | null = null
afterEach(() => {
  disk?.disarm()
  disk = null
})

describe.skipIf(process.platform !== 'linux')('power cut during delivery (Linux only: the power-loss model reads /proc/self/fd)', () => {
  it('loses no delayed message: progress is never saved past deliveries that are not on disk', async () => {
    const root = tempDir('mqstore-schedule-cut-')
    const dir = join(root, 'store')
    fs.mkdirSync(dir)
    disk = new PowerLossDisk({ root: dir, seed: 11, imageRoot: join(root, 'images'), mode: 'lose-unsynced' }).arm()
    const fake = new FakeClock()
    fake.at = Date.now() + 2000
    // Parked durably: a clean close syncs everything.
    let store = await MessageStore.open(dir, { ...QUIET, clock: fake.clock })
    for (let i = 0; i < 6; i++) {
      const r = await store.putMessage({ topic: 'later', body: `m${i}`, properties: { UNIQ_KEY: `U${i}` }, delayTimeLevel: 3 })
      expect(r.status).toBe('PUT_OK')
    }
    await store.close()
    // Delivered, but nothing flushes the copies; the progress saves run every 20 ms meanwhile.
    store = await MessageStore.open(dir, { ...QUIET, clock: fake.clock })
    fake.at += 60_000
    await scheduleOf(store).deliverDue()
    expect(readAll(store, 'later', 0)).toHaveLength(6)
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(store.stats().commitLogFlushedOffset).toBeLessThan(store.stats().commitLogMaxOffset)
    const cut = disk.cutNow()
    await store.close()
    disk.disarm()
    disk = null

    const reopened = await MessageStore.open(cut.dir, { ...SMALL, clock: fake.clock })
    try {
      expect(reopened.stats().lastExitOK).toBe(false)
      await waitFor(() => readAll(reopened, 'later', 0).length >= 6, 'every message delivered on the image')
      const keys = readAll(reopened, 'later', 0).map((m) => m.properties.UNIQ_KEY)
      expect([...new Set(keys)].sort()).toEqual(['U0', 'U1', 'U2', 'U3', 'U4', 'U5'])
      expect(reopened.stats().schedule.pending).toBe(0)
    } finally {
      await reopened.close()
    }
  })
})
