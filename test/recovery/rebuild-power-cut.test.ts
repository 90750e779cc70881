// A consume queue or the index that an open deletes to rebuild is not durable again until its
// rebuilt files are synced, while the checkpoint still vouches for the deleted files. A power cut
// in between must not lose what the deleted files held: the next open has to scan far enough back
// to rebuild them again. The power-loss model keeps what was synced and loses everything else.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { OFFSET_LOGICS_MSG_TIMESTAMP } from '../../lib/store/store-checkpoint.js'
import { INDEX_COUNT_OFFSET } from '../../lib/store/index/index-layout.js'
import { PowerLossDisk } from '../helpers/power-loss.js'
import { tempDir } from '../helpers/tmp.js'

const OPTIONS: OpenOptions = {
  flushDiskType: 'ASYNC_FLUSH',
  mappedFileSizeCommitLog: 64 * 1024,
  messageIndexEnable: true,
  // No timed flush of the queues or the index between the open and the cut.
  flushIntervalConsumeQueue: 3_600_000,
  flushConsumeQueueThoroughInterval: 3_600_000,
}
/** Messages of the damaged queue: about 150 KiB of records, over three commit-log files. */
const COUNT = 150
const BODY = Buffer.alloc(1000, 7)
const UNIT = 20

let root: string
let dir: string
let disk: PowerLossDisk | null = null
const stores: MessageStore[] = []
beforeEach(() => {
  root = tempDir('mqstore-rebuild-cut-')
  dir = join(root, 'store')
})
afterEach(async () => {
  disk?.disarm()
  disk = null
  for (const store of stores.splice(0)) await store.close()
  fs.rmSync(root, { recursive: true, force: true })
})

async function open(at: string): Promise<MessageStore> {
  const store = await MessageStore.open(at, OPTIONS)
  stores.push(store)
  return store
}

/**
 * A store closed cleanly with COUNT messages in t/0 (keys k0..), and a few in t/1 (whose folder
 * shares t/ with t/0's). The last third comes a minute after the rest, so that the checkpoint's
 * times send a crash recovery's scan to the last file only.
 */
async function build(): Promise<void> {
  // Store times stay in the past: a query's time range ends now.
  const start = Date.now() - 60_000
  vi.useFakeTimers({ toFake: ['Date'], now: start })
  try {
    const store = await open(dir)
    for (let i = 0; i < COUNT; i++) {
      if (i === 100) vi.setSystemTime(start + 60_000)
      expect((await store.putMessage({ topic: 't', queueId: 0, body: BODY, keys: `k${i}` })).status).toBe('PUT_OK')
    }
    for (let i = 0; i < 3; i++) expect((await store.putMessage({ topic: 't', queueId: 1, body: BODY })).status).toBe('PUT_OK')
    await stores.pop()?.close()
  } finally {
    vi.useRealTimers()
  }
}

/** Opens the store as after a power cut (an abort file naming no boot), with the power-loss model armed first. */
async function openAfterPowerCut(): Promise<MessageStore> {
  fs.writeFileSync(join(dir, 'abort'), '')
  disk = new PowerLossDisk({ root: dir, seed: 5, imageRoot: join(root, 'images'), mode: 'lose-unsynced' }).arm()
  return open(dir)
}

/** Cuts the power now and opens what the disk kept. */
async function cutAndReopen(): Promise<MessageStore> {
  const cut = disk!.cutNow()
  disk!.disarm()
  disk = null
  return open(cut.dir)
}

describe.skipIf(process.platform !== 'linux')(
  'a power cut before a rebuilt consume queue or index is synced (Linux only: the power-loss model resolves descriptors through /proc/self/fd)',
  () => {
    it('a queue deleted to rebuild it keeps every unit after a cut that lost its rebuilt files', async () => {
      await build()
      // A unit in the middle that points nowhere: the queue is damaged, not short (docs/recovery.md Q3).
      const file = join(dir, 'consumequeue', 't', '0', '0'.repeat(20))
      const fd = fs.openSync(file, 'r+')
      fs.writeSync(fd, Buffer.from([0x80]), 0, 1, 17 * UNIT)
      fs.closeSync(fd)
      const store = await openAfterPowerCut()
      expect(store.stats().repairs.map((r) => r.action)).toContain('deleted consume queue t/0 to rebuild it')
      expect(store.getMaxOffsetInQueue('t', 0)).toBe(COUNT)

      const reopened = await cutAndReopen()
      expect(reopened.getMaxOffsetInQueue('t', 0)).toBe(COUNT)
      const seen: number[] = []
      for (let next = 0; next < COUNT; ) {
        const got = reopened.getMessage('g', 't', 0, next, 32)
        expect(got.status).toBe('FOUND')
        for (const m of got.messages) seen.push(m.queueOffset)
        next = got.nextBeginOffset
      }
      expect(seen).toEqual(Array.from({ length: COUNT }, (_, i) => i))
    })

    it('an index deleted to rebuild it finds every key after a cut that lost its rebuilt file', async () => {
      await build()
      // A header that claims more entries than the file holds: the index cannot be kept.
      const indexDir = join(dir, 'index')
      const [name] = fs.readdirSync(indexDir)
      const fd = fs.openSync(join(indexDir, name), 'r+')
      fs.writeSync(fd, Buffer.from([0x7f, 0xff, 0xff, 0xff]), 0, 4, INDEX_COUNT_OFFSET)
      fs.closeSync(fd)
      const store = await openAfterPowerCut()
      expect(store.stats().repairs.map((r) => r.action)).toContain('deleted the index to rebuild it')
      expect(store.queryMessage('t', 'k0', 4).messages.length).toBe(1)

      const reopened = await cutAndReopen()
      for (let i = 0; i < COUNT; i += 7) expect(reopened.queryMessage('t', `k${i}`, 4).messages.length).toBe(1)
    })
  },
)

describe('what the checkpoint vouches for while a queue is rebuilt', () => {
  /** The logics time in the checkpoint file on disk. */
  function logicsOnDisk(): number {
    return Number(fs.readFileSync(join(dir, 'checkpoint')).readBigInt64BE(OFFSET_LOGICS_MSG_TIMESTAMP))
  }

  it('a queue rebuilt at its first use after a clean close withdraws the logics time on disk until every queue is flushed again', async () => {
    await build()
    expect(logicsOnDisk()).toBeGreaterThan(0)
    const file = join(dir, 'consumequeue', 't', '0', '0'.repeat(20))
    const fd = fs.openSync(file, 'r+')
    fs.writeSync(fd, Buffer.from([0x80]), 0, 1, 17 * UNIT)
    fs.closeSync(fd)
    const store = await open(dir)
    // The queue is deferred by the clean close's record: opened, and rebuilt, at its first use.
    expect(logicsOnDisk()).toBeGreaterThan(0)
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(COUNT)
    expect(store.stats().repairs.map((r) => r.action)).toContain('deleted consume queue t/0 to rebuild it')
    expect(logicsOnDisk()).toBe(0)
    // Close flushes every queue, the rebuilt one included, and vouches again.
    await stores.pop()?.close()
    expect(logicsOnDisk()).toBeGreaterThan(0)
  })
})
