// A power cut while delayed messages are being delivered: the delivered copies are in the page
// cache only, so the cut loses them; the progress file must not say they were delivered, or they
// would be lost for good. On the image every message is delivered again (same UNIQ_KEY).
// A process crash at the same point keeps the page cache: the progress note
// (config/delayProgress.json) then says what was delivered and nothing is repeated, unless the
// note counts deliveries past the recovered commit log (then it is not trusted).
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

describe.skipIf(process.platform !== 'linux')('process crash during delivery (Linux only: the power-loss model)', () => {
  async function crashImage(): Promise<{ image: string; fake: FakeClock }> {
    const root = tempDir('mqstore-schedule-crash-image-')
    const dir = join(root, 'store')
    fs.mkdirSync(dir)
    const fake = new FakeClock()
    fake.at = Date.now() + 2000
    let store = await MessageStore.open(dir, { ...QUIET, clock: fake.clock })
    for (let i = 0; i < 6; i++) {
      const level = i < 4 ? 3 : 4
      const r = await store.putMessage({ topic: 'later', body: `m${i}`, properties: { UNIQ_KEY: `U${i}` }, delayTimeLevel: level })
      expect(r.status).toBe('PUT_OK')
    }
    await store.close()
    disk = new PowerLossDisk({ root: dir, seed: 4, imageRoot: join(root, 'images') }).arm()
    store = await MessageStore.open(dir, { ...QUIET, clock: fake.clock })
    fake.at += 60_000
    await scheduleOf(store).deliverDue()
    expect(readAll(store, 'later', 0)).toHaveLength(6)
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(store.stats().commitLogFlushedOffset).toBeLessThan(store.stats().commitLogMaxOffset)
    const crash = disk.crashNow()
    await store.close()
    disk.disarm()
    disk = null
    return { image: crash.dir, fake }
  }

  async function keysAfterReopen(image: string, fake: FakeClock, lines: string[]): Promise<string[]> {
    const store = await MessageStore.open(image, {
      ...SMALL,
      clock: fake.clock,
      logger: (level, message) => lines.push(`${level} ${message}`),
    })
    try {
      expect(store.stats().lastExitOK).toBe(false)
      await scheduleOf(store).deliverDue()
      await waitFor(() => store.stats().schedule.pending === 0, 'nothing pending')
      return readAll(store, 'later', 0).map((m) => m.properties.UNIQ_KEY)
    } finally {
      await store.close()
    }
  }

  it('repeats no delivered message: the progress note resumes each level after its last batch', async () => {
    const { image, fake } = await crashImage()
    expect(JSON.parse(fs.readFileSync(join(image, 'config', 'delayProgress.json'), 'utf8')).offsets).toMatchObject({ 3: 4, 4: 2 })
    expect(await keysAfterReopen(image, fake, [])).toEqual(['U0', 'U1', 'U2', 'U3', 'U4', 'U5'])
  })

  it('does not trust a note past the recovered commit log, nor a torn one: each message goes again', async () => {
    for (const damage of ['past the log', 'torn']) {
      const { image, fake } = await crashImage()
      const path = join(image, 'config', 'delayProgress.json')
      const note = JSON.parse(fs.readFileSync(path, 'utf8'))
      fs.writeFileSync(path, damage === 'torn' ? '{"logEnd":3,"off' : JSON.stringify({ ...note, logEnd: note.logEnd + 1_000_000 }))
      const lines: string[] = []
      const keys = await keysAfterReopen(image, fake, lines)
      expect(keys).toHaveLength(12)
      expect([...new Set(keys)].sort()).toEqual(['U0', 'U1', 'U2', 'U3', 'U4', 'U5'])
      if (damage !== 'torn') expect(lines).toContainEqual(expect.stringMatching(/delayProgress.json counts deliveries the commit log lost/))
    }
  })
})
