// The power-loss model itself (test/helpers/power-loss.ts) on real files and real mappings, and
// the regressions it found in the store.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { MessageStore } from '../lib/store/message-store.js'
import { native } from '../lib/native.js'
import { PowerLossDisk } from './helpers/power-loss.js'
import { tempDir } from './helpers/tmp.js'

let root: string
let store: string
let disk: PowerLossDisk | null = null
beforeEach(() => {
  root = tempDir('mqstore-powerloss-')
  store = join(root, 'store')
  fs.mkdirSync(store)
})
afterEach(() => {
  disk?.disarm()
  disk = null
  fs.rmSync(root, { recursive: true, force: true })
})

function arm(mode: 'power-loss' | 'lose-unsynced' | 'keep-page-cache', extra: { disableDataSyncs?: boolean } = {}): PowerLossDisk {
  disk = new PowerLossDisk({ root: store, seed: 7, imageRoot: join(root, 'images'), mode, ...extra }).arm()
  return disk
}

const page = native.pageSize

/** A file of `pages` pages, created, filled with `fill`, fsynced, and its directory synced. */
function durableFile(name: string, pages: number, fill: number): string {
  const path = join(store, name)
  fs.writeFileSync(path, Buffer.alloc(pages * page, fill))
  const fd = fs.openSync(path, 'r+')
  fs.fsyncSync(fd)
  fs.closeSync(fd)
  const dirFd = fs.openSync(store, 'r')
  fs.fsyncSync(dirFd)
  fs.closeSync(dirFd)
  return path
}

describe.skipIf(process.platform !== 'linux')('power-loss model (Linux only: descriptors are resolved through /proc/self/fd)', () => {
  it('keeps msynced pages and loses unsynced ones (worst case), page by page', () => {
    const d = arm('lose-unsynced')
    const path = durableFile('data', 4, 0)
    const fd = fs.openSync(path, 'r+')
    const handle = native.map(fd, 4 * page, true)
    fs.closeSync(fd)
    const view = Buffer.from(handle.buffer)
    view.fill(1, 0, page) // page 0: synced below
    view.fill(2, 2 * page, 3 * page) // page 2: never synced
    handle.sync(0, 10) // a range inside page 0 syncs the whole page
    view.fill(3, 3 * page, 4 * page)
    const cut = d.cutNow()
    handle.close()
    const image = fs.readFileSync(join(cut.dir, 'data'))
    expect(image.length).toBe(4 * page)
    expect(image.subarray(0, page).every((b) => b === 1)).toBe(true)
    expect(image.subarray(2 * page, 4 * page).every((b) => b === 0)).toBe(true)
    expect(cut.oldPages).toBe(2)
  })

  it('with random choices, unsynced pages come out old or new each, not only as a suffix', () => {
    const d = arm('power-loss')
    const path = durableFile('data', 64, 0)
    const fd = fs.openSync(path, 'r+')
    const handle = native.map(fd, 64 * page, true)
    fs.closeSync(fd)
    Buffer.from(handle.buffer).fill(9)
    const cut = d.cutNow()
    handle.close()
    const image = fs.readFileSync(join(cut.dir, 'data'))
    const kept = Array.from({ length: 64 }, (_, i) => image[i * page] === 9)
    expect(cut.oldPages + cut.newPages).toBe(64)
    expect(kept.includes(true)).toBe(true)
    expect(kept.includes(false)).toBe(true)
    // Not a prefix of kept pages followed by lost ones.
    expect(kept.indexOf(false) < kept.lastIndexOf(true)).toBe(true)
  })

  it('a file created, or renamed over another, without a directory fsync may be undone by the cut', () => {
    const d = arm('lose-unsynced')
    durableFile('old', 1, 5)
    fs.writeFileSync(join(store, 'new.tmp'), 'fresh')
    const fd = fs.openSync(join(store, 'new.tmp'), 'r+')
    fs.fsyncSync(fd) // the content is durable, the name is not
    fs.closeSync(fd)
    fs.renameSync(join(store, 'new.tmp'), join(store, 'old'))
    fs.writeFileSync(join(store, 'unsynced'), 'x')
    const cut = d.cutNow()
    expect(fs.readdirSync(cut.dir).sort()).toEqual(['old'])
    expect(fs.readFileSync(join(cut.dir, 'old')).every((b) => b === 5)).toBe(true)
  })

  it('after a directory fsync the rename and the new file survive, with their synced content', () => {
    const d = arm('lose-unsynced')
    durableFile('old', 1, 5)
    fs.writeFileSync(join(store, 'new.tmp'), 'fresh')
    const fd = fs.openSync(join(store, 'new.tmp'), 'r+')
    fs.fsyncSync(fd)
    fs.closeSync(fd)
    fs.renameSync(join(store, 'new.tmp'), join(store, 'old'))
    const dirFd = fs.openSync(store, 'r')
    fs.fsyncSync(dirFd)
    fs.closeSync(dirFd)
    const cut = d.cutNow()
    expect(fs.readdirSync(cut.dir)).toEqual(['old'])
    expect(fs.readFileSync(join(cut.dir, 'old'), 'utf8')).toBe('fresh')
  })

  it('a process crash (page cache kept) loses nothing', () => {
    const d = arm('keep-page-cache')
    fs.writeFileSync(join(store, 'unsynced'), 'kept')
    const cut = d.cutNow()
    expect(fs.readFileSync(join(cut.dir, 'unsynced'), 'utf8')).toBe('kept')
  })

  it('a process crash keeps the page cache, and a power cut after it still loses what was not synced before it', () => {
    const d = arm('lose-unsynced')
    const path = durableFile('data', 3, 0)
    durableFile('unlinked', 1, 4)
    const fd = fs.openSync(path, 'r+')
    const handle = native.map(fd, 3 * page, true)
    fs.closeSync(fd)
    Buffer.from(handle.buffer).fill(1)
    handle.sync(0, 1) // page 0 only
    fs.writeFileSync(join(store, 'unsynced'), 'new name') // its directory is never synced
    fs.rmSync(join(store, 'unlinked')) // nor is this unlink
    const crash = d.crashNow()
    handle.close()
    d.disarm()
    expect(crash.carry).toBeDefined()
    // The crash image: everything the page cache held.
    expect(fs.readFileSync(join(crash.dir, 'data')).every((b) => b === 1)).toBe(true)
    expect(fs.readdirSync(crash.dir).sort()).toEqual(['data', 'unsynced'])

    // A disk armed on the image starts from what was durable before the crash, not from the image.
    disk = new PowerLossDisk({ root: crash.dir, seed: 7, imageRoot: join(root, 'after'), mode: 'lose-unsynced', after: crash.carry }).arm()
    const cut = disk.cutNow()
    const image = fs.readFileSync(join(cut.dir, 'data'))
    expect(image.subarray(0, page).every((b) => b === 1)).toBe(true)
    expect(image.subarray(page).every((b) => b === 0)).toBe(true)
    expect(cut.oldPages).toBe(2)
    // The unsynced name is gone; the unlinked file is back, with its durable content.
    expect(fs.readdirSync(cut.dir).sort()).toEqual(['data', 'unlinked'])
    expect(fs.readFileSync(join(cut.dir, 'unlinked')).every((b) => b === 4)).toBe(true)
  })

  it('a process crash after the kernel wrote every page and name back (writeback 1) leaves nothing to lose', () => {
    const d = arm('lose-unsynced')
    const path = durableFile('data', 2, 0)
    const fd = fs.openSync(path, 'r+')
    const handle = native.map(fd, 2 * page, true)
    fs.closeSync(fd)
    Buffer.from(handle.buffer).fill(3)
    fs.writeFileSync(join(store, 'unsynced'), 'written back')
    const crash = d.crashNow('crash after writeback', 1)
    handle.close()
    d.disarm()
    disk = new PowerLossDisk({ root: crash.dir, seed: 7, imageRoot: join(root, 'after'), mode: 'lose-unsynced', after: crash.carry }).arm()
    const cut = disk.cutNow()
    expect(fs.readFileSync(join(cut.dir, 'data')).every((b) => b === 3)).toBe(true)
    expect(fs.readFileSync(join(cut.dir, 'unsynced'), 'utf8')).toBe('written back')
    expect(cut.oldPages + cut.unsyncedNames).toBe(0)
  })

  it('counts every interposed call before and after, and cuts at the chosen event', () => {
    disk = new PowerLossDisk({ root: store, seed: 1, imageRoot: join(root, 'images'), cutAtEvent: 3 }).arm()
    fs.writeFileSync(join(store, 'a'), 'a') // events 1, 2 (and the open inside it, if Node calls it)
    fs.writeFileSync(join(store, 'b'), 'b')
    expect(disk.cut).not.toBeNull()
    expect(disk.cut!.event).toBe(3)
  })
})

describe.skipIf(process.platform !== 'linux')(
  'power cuts found these (Linux only: the power-loss model resolves descriptors through /proc/self/fd)',
  () => {
    it('regression: the first SYNC_FLUSH put survives a power cut (the commitlog directory is synced into the store directory)', async () => {
      const d = arm('lose-unsynced')
      const s = await MessageStore.open(store, { flushDiskType: 'SYNC_FLUSH' })
      const put = await s.putMessage({ topic: 't', queueId: 0, body: 'first', keys: 'k1' })
      expect(put.status).toBe('PUT_OK')
      const cut = d.cutNow()
      await s.close()
      d.disarm()
      const reopened = await MessageStore.open(cut.dir, { flushDiskType: 'SYNC_FLUSH' })
      try {
        expect(reopened.stats().lastExitOK).toBe(false)
        const got = reopened.lookMessageByOffset(put.wroteOffset)
        expect(got?.keys).toEqual(['k1'])
        expect(reopened.getMessage('g', 't', 0, 0, 1).messages.map((m) => m.keys)).toEqual([['k1']])
      } finally {
        await reopened.close()
      }
    })

    it('with data syncs disabled, an acknowledged SYNC_FLUSH put is lost to a power cut (the model catches a store that does not sync)', async () => {
      const d = arm('lose-unsynced', { disableDataSyncs: true })
      const s = await MessageStore.open(store, { flushDiskType: 'SYNC_FLUSH' })
      const put = await s.putMessage({ topic: 't', queueId: 0, body: 'lost', keys: 'k1' })
      expect(put.status).toBe('PUT_OK')
      const cut = d.cutNow()
      await s.close()
      d.disarm()
      const reopened = await MessageStore.open(cut.dir, { flushDiskType: 'SYNC_FLUSH' })
      try {
        expect(reopened.lookMessageByOffset(put.wroteOffset)).toBeNull()
        expect(reopened.getMaxOffsetInQueue('t', 0)).toBe(0)
      } finally {
        await reopened.close()
      }
    })

    it('regression: after a process crash, records recovered from the page cache are synced before open returns, so a power cut cannot leave later SYNC_FLUSH puts behind a hole', async () => {
      // Puts nothing syncs yet (ASYNC_FLUSH, flushes far away), then SIGKILL: they are in the page cache only.
      let d = arm('lose-unsynced')
      const quiet = {
        mappedFileSizeCommitLog: 64 * 1024,
        flushIntervalCommitLog: 3_600_000,
        flushCommitLogThoroughInterval: 3_600_000,
        flushCommitLogLeastPages: 10_000,
        flushIntervalConsumeQueue: 3_600_000,
        flushConsumeQueueThoroughInterval: 3_600_000,
        flushConsumeQueueLeastPages: 10_000,
      }
      const first = await MessageStore.open(store, { flushDiskType: 'ASYNC_FLUSH', ...quiet })
      const before = []
      for (let i = 0; i < 4; i++)
        before.push(await first.putMessage({ topic: 't', queueId: 0, body: Buffer.alloc(3000, i + 1), keys: `b${i}` }))
      const crash = d.crashNow()
      await first.close()
      d.disarm()

      // The store recovers on the crash image, whose durable state is what it was before the crash.
      store = crash.dir
      d = new PowerLossDisk({ root: store, seed: 7, imageRoot: join(root, 'after'), mode: 'lose-unsynced', after: crash.carry }).arm()
      disk = d
      const second = await MessageStore.open(store, { flushDiskType: 'SYNC_FLUSH', ...quiet })
      expect(second.stats().lastExitOK).toBe(false)
      expect(second.getMaxOffsetInQueue('t', 0)).toBe(4)
      const after = []
      for (let i = 0; i < 3; i++) {
        const put = await second.putMessage({ topic: 't', queueId: 0, body: Buffer.alloc(500, 0x40 + i), keys: `a${i}` })
        expect(put.status).toBe('PUT_OK')
        after.push(put)
      }
      // The power goes before anything else is synced.
      const cut = d.cutNow()
      await second.close()
      d.disarm()

      const reopened = await MessageStore.open(cut.dir, { flushDiskType: 'SYNC_FLUSH', mappedFileSizeCommitLog: 64 * 1024 })
      try {
        expect(reopened.stats().lastExitOK).toBe(false)
        // What the recovery served is on disk: what it recovered, and the acknowledged puts after it.
        for (const [i, put] of after.entries()) expect(reopened.lookMessageByOffset(put.wroteOffset)?.keys).toEqual([`a${i}`])
        for (const [i, put] of before.entries()) expect(reopened.lookMessageByOffset(put.wroteOffset)?.keys).toEqual([`b${i}`])
        const served = reopened.getMessage('g', 't', 0, 0, 16).messages.map((m) => m.keys[0])
        expect(served).toEqual(['b0', 'b1', 'b2', 'b3', 'a0', 'a1', 'a2'])
      } finally {
        await reopened.close()
      }
    })

    it('regression: after a process crash, consume-queue units recovered from the page cache are synced before open returns, so a checkpoint written later cannot hide their loss', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'], now: Date.UTC(2026, 0, 1) })
      try {
        const options = {
          flushDiskType: 'SYNC_FLUSH' as const,
          mappedFileSizeCommitLog: 16 * 1024,
          maxHashSlotNum: 16,
          maxIndexNum: 8,
          flushIntervalConsumeQueue: 1_000,
          flushConsumeQueueThoroughInterval: 1_000,
        }
        // 'early' fills the first commit-log file; its units are not flushed yet (the clock stands still) when the process dies.
        let d = arm('lose-unsynced')
        const first = await MessageStore.open(store, options)
        const early = []
        for (let i = 0; i < 3; i++)
          early.push(await first.putMessage({ topic: 'early', queueId: 0, body: Buffer.alloc(5000, i), keys: `e${i}` }))
        const crash = d.crashNow()
        await first.close()
        d.disarm()

        store = crash.dir
        d = new PowerLossDisk({ root: store, seed: 7, imageRoot: join(root, 'after'), mode: 'lose-unsynced', after: crash.carry }).arm()
        disk = d
        const second = await MessageStore.open(store, options)
        expect(second.getMaxOffsetInQueue('early', 0)).toBe(3)
        // Later files, 10 s and 20 s later; then a consume-queue flush moves the checkpoint's times past the first file.
        for (const step of [1, 2]) {
          vi.setSystemTime(Date.UTC(2026, 0, 1) + step * 10_000)
          for (let i = 0; i < 4; i++)
            await second.putMessage({ topic: 'late', queueId: 0, body: Buffer.alloc(4000, i), keys: `l${step}-${i}` })
        }
        // Run the consume-queue flush until the checkpoint's consume-queue time (bytes 8-15) is the
        // last put's (a new queue file's first flush syncs its folder on the libuv pool: let it finish).
        const logicsTime = () => Number(fs.readFileSync(join(store, 'checkpoint')).readBigInt64BE(8))
        const lastPutTime = Date.UTC(2026, 0, 1) + 20_000
        for (let i = 0; i < 500 && logicsTime() !== lastPutTime; i++) {
          await vi.advanceTimersByTimeAsync(100)
          await new Promise((resolve) => setImmediate(resolve))
        }
        expect(logicsTime()).toBe(lastPutTime)
        const cut = d.cutNow()
        await second.close()
        d.disarm()

        vi.useRealTimers()
        const reopened = await MessageStore.open(cut.dir, options)
        try {
          expect(reopened.stats().lastExitOK).toBe(false)
          expect(reopened.getMessage('g', 'early', 0, 0, 8).messages.map((m) => m.commitLogOffset)).toEqual(early.map((r) => r.wroteOffset))
        } finally {
          await reopened.close()
        }
      } finally {
        vi.useRealTimers()
      }
    })

    it('regression: after a process crash, compaction-log records recovered from the page cache are synced before open returns', async () => {
      let d = arm('lose-unsynced')
      const quiet = {
        flushIntervalCommitLog: 3_600_000,
        flushCommitLogThoroughInterval: 3_600_000,
        flushCommitLogLeastPages: 10_000,
        flushIntervalConsumeQueue: 3_600_000,
        flushConsumeQueueThoroughInterval: 3_600_000,
        flushConsumeQueueLeastPages: 10_000,
        maxHashSlotNum: 1000,
        maxIndexNum: 4000,
      }
      const first = await MessageStore.open(store, { flushDiskType: 'ASYNC_FLUSH', ...quiet })
      await first.setTopicConfig('kv', { cleanupPolicy: 'compact' })
      for (let i = 0; i < 4; i++) {
        const put = await first.putMessage({ topic: 'kv', queueId: 0, body: Buffer.alloc(300, i + 1), keys: `k${i}` })
        expect(put.status).toBe('PUT_OK')
      }
      await vi.waitFor(() => expect(first.getMessage('g', 'kv', 0, 0, 8).messages).toHaveLength(4))
      const crash = d.crashNow()
      await first.close()
      d.disarm()

      store = crash.dir
      // What the crashed process left in the page cache: the compaction log's files.
      const logDir = join(store, 'compaction', 'kv', '0')
      const left = new Map(fs.readdirSync(logDir).map((name) => [name, fs.readFileSync(join(logDir, name))]))
      expect([...left.values()].some((bytes) => bytes.some((b) => b !== 0))).toBe(true)
      d = new PowerLossDisk({ root: store, seed: 7, imageRoot: join(root, 'after'), mode: 'lose-unsynced', after: crash.carry }).arm()
      disk = d
      const second = await MessageStore.open(store, { flushDiskType: 'ASYNC_FLUSH', ...quiet })
      expect(second.stats().lastExitOK).toBe(false)
      expect(second.getMessage('g', 'kv', 0, 0, 8).messages.map((m) => m.keys[0])).toEqual(['k0', 'k1', 'k2', 'k3'])
      // The power goes as soon as open returned: what it served must be on disk.
      const cut = d.cutNow()
      await second.close()
      d.disarm()

      // The compaction log is on disk as the recovery found it (a store with its log files
      // gone would re-read the commit log, so this is checked on the files).
      for (const [name, bytes] of left) expect(fs.readFileSync(join(cut.dir, 'compaction', 'kv', '0', name)).equals(bytes)).toBe(true)
      const reopened = await MessageStore.open(cut.dir, { flushDiskType: 'ASYNC_FLUSH', maxHashSlotNum: 1000, maxIndexNum: 4000 })
      try {
        expect(reopened.getMessage('g', 'kv', 0, 0, 8).messages.map((m) => m.keys[0])).toEqual(['k0', 'k1', 'k2', 'k3'])
        expect(reopened.getLatestByKey('kv', 'k3')?.body).toEqual(Buffer.alloc(300, 4))
      } finally {
        await reopened.close()
      }
    })

    it('regression: records and consume-queue units a recovery dropped are erased on disk, so a later power cut cannot bring them back', async () => {
      // A crash image of 20 synced records, the 6th damaged: recovery truncates there.
      let d = arm('keep-page-cache')
      const first = await MessageStore.open(store, { flushDiskType: 'SYNC_FLUSH' })
      const puts = []
      for (let i = 0; i < 20; i++)
        puts.push(await first.putMessage({ topic: 't', queueId: 0, body: Buffer.alloc(300, i + 1), keys: `k${i}` }))
      const crash = d.cutNow()
      await first.close()
      d.disarm()
      const cutAt = puts[5].wroteOffset
      const log = join(crash.dir, 'commitlog', '00000000000000000000')
      const bytes = fs.readFileSync(log)
      bytes[cutAt + puts[5].wroteBytes - 40] ^= 0xff // inside the body: a CRC mismatch with data after it
      fs.writeFileSync(log, bytes)

      // Reopen on that image, then lose every page not synced since.
      store = crash.dir
      d = arm('lose-unsynced')
      const second = await MessageStore.open(store, { flushDiskType: 'SYNC_FLUSH', corruptionPolicy: 'tolerant' })
      expect(second.getMaxPhyOffset()).toBe(cutAt)
      expect(second.getMaxOffsetInQueue('t', 0)).toBe(5)
      const cut = d.cutNow()
      await second.close()
      d.disarm()

      // Without the erase the 14 valid records after the damaged one are still on disk, and new
      // appends that end where one of them begins would chain them back into the log.
      const after = fs.readFileSync(join(cut.dir, 'commitlog', '00000000000000000000'))
      expect(after.subarray(cutAt, puts[19].wroteOffset + puts[19].wroteBytes).every((b) => b === 0)).toBe(true)
      const units = fs.readFileSync(join(cut.dir, 'consumequeue', 't', '0', '00000000000000000000'))
      expect(units.subarray(5 * 20, 20 * 20).every((b) => b === 0)).toBe(true)
      expect(units.subarray(0, 5 * 20).some((b) => b !== 0)).toBe(true)
    })

    it('regression: consume-queue units a crash recovery dispatches are flushed by the next close, not taken as already on disk', async () => {
      let d = arm('keep-page-cache')
      const first = await MessageStore.open(store, { flushDiskType: 'SYNC_FLUSH' })
      for (let i = 0; i < 10; i++) expect((await first.putMessage({ topic: 't', queueId: 0, body: `m${i}` })).status).toBe('PUT_OK')
      const crash = d.cutNow()
      await first.close()
      d.disarm()
      // The crash left no consume queue and a zero checkpoint: recovery dispatches every record.
      fs.rmSync(join(crash.dir, 'consumequeue'), { recursive: true })
      fs.writeFileSync(join(crash.dir, 'checkpoint'), Buffer.alloc(4096))

      store = crash.dir
      d = arm('lose-unsynced')
      const second = await MessageStore.open(store, { flushDiskType: 'SYNC_FLUSH' })
      expect(second.stats().lastExitOK).toBe(false)
      expect(second.getMaxOffsetInQueue('t', 0)).toBe(10)
      await second.close()
      const cut = d.cutNow()
      d.disarm()
      const units = fs.readFileSync(join(cut.dir, 'consumequeue', 't', '0', '00000000000000000000'))
      expect(units.subarray(0, 10 * 20).every((b) => b === 0)).toBe(false)
      expect(units.readInt32BE(9 * 20 + 8)).toBeGreaterThan(0) // the 10th unit's size
    })

    it('regression: a checkpoint written before the consume queues are flushed (an index roll) does not let crash recovery skip their units', async () => {
      vi.useFakeTimers({ toFake: ['Date'], now: Date.UTC(2026, 0, 1) })
      try {
        const d = arm('lose-unsynced')
        const options = {
          flushDiskType: 'SYNC_FLUSH' as const,
          mappedFileSizeCommitLog: 16 * 1024,
          maxHashSlotNum: 16,
          maxIndexNum: 8,
          flushIntervalConsumeQueue: 3_600_000,
          flushConsumeQueueThoroughInterval: 3_600_000,
        }
        const s = await MessageStore.open(store, options)
        // 'early' lives only in the first file; later files, written 10 s and 20 s later, hold 'late'.
        const early = []
        for (let i = 0; i < 3; i++)
          early.push(await s.putMessage({ topic: 'early', queueId: 0, body: Buffer.alloc(5000, i), keys: `e${i}` }))
        for (const step of [1, 2]) {
          vi.setSystemTime(Date.UTC(2026, 0, 1) + step * 10_000)
          for (let i = 0; i < 4; i++) await s.putMessage({ topic: 'late', queueId: 0, body: Buffer.alloc(4000, i), keys: `l${step}-${i}` })
        }
        expect(s.stats().indexFileCount).toBeGreaterThan(1) // rolls wrote the checkpoint
        const cut = d.cutNow()
        await s.close()
        d.disarm()
        const reopened = await MessageStore.open(cut.dir, options)
        try {
          expect(reopened.stats().lastExitOK).toBe(false)
          expect(reopened.getMaxOffsetInQueue('early', 0)).toBe(3)
          expect(reopened.getMessage('g', 'early', 0, 0, 8).messages.map((m) => m.commitLogOffset)).toEqual(early.map((r) => r.wroteOffset))
        } finally {
          await reopened.close()
        }
      } finally {
        vi.useRealTimers()
      }
    })
  },
)
