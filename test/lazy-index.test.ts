// Index files under the mapping budget: opened without being mapped (the header is read with a
// positioned read), mapped by the query that walks them, unmapped once idle; and a store whose
// records carry no keys does not replay its commit log for the index at every clean reopen.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { interposeNativeForTesting } from '../lib/native.js'
import { indexFileSize } from '../lib/store/index/index-file.js'
import { IndexService, type IndexDispatch } from '../lib/store/index/index-service.js'
import { MappingBudget } from '../lib/store/mapped/mapping-budget.js'
import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { CQ_STORE_UNIT_SIZE } from '../lib/store/queue/consume-queue.js'
import { wrapMapHandle } from './helpers/map-handle.js'
import { tempDir } from './helpers/tmp.js'

// Small index files, so that a few hundred keys fill many of them: 40 + 16 * 4 + 32 * 20 bytes.
const SLOTS = 16
const ENTRIES = 32
const INDEX_FILE_SIZE = indexFileSize(SLOTS, ENTRIES)
const COMMIT_LOG_FILE = 64 * 1024

const SMALL: OpenOptions = {
  mappedFileSizeCommitLog: COMMIT_LOG_FILE,
  mappedFileSizeConsumeQueue: 100 * CQ_STORE_UNIT_SIZE,
  maxHashSlotNum: SLOTS,
  maxIndexNum: ENTRIES,
}

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-lazy-index-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

/** Counts the mappings of index files (no other file of these stores has their size) while `fn` runs. */
async function countIndexMaps<T>(fn: () => Promise<T> | T): Promise<{ result: T; maps: number }> {
  let maps = 0
  const restore = interposeNativeForTesting((original) => ({
    map: (fd, length, writable, expose) => {
      if (length === INDEX_FILE_SIZE) maps++
      return original.map(fd, length, writable, expose)
    },
  }))
  try {
    const result = await fn()
    return { result, maps }
  } finally {
    restore()
  }
}

function indexFiles(): string[] {
  return fs.readdirSync(join(dir, 'index')).filter((name) => !name.endsWith('.tmp'))
}

describe('index files are mapped on first use and unmapped when idle', () => {
  function record(commitLogOffset: number, storeTimestamp: number, keys: string): IndexDispatch {
    return { topic: 't', commitLogOffset, storeTimestamp, keys, uniqKey: undefined, sysFlag: 0 }
  }

  it('load reads headers without mapping; a query maps the files it walks; a sweep unmaps them; the next query maps them again', async () => {
    const indexDir = join(dir, 'index')
    const options = { maxHashSlotNum: SLOTS, maxIndexNum: ENTRIES, messageIndexEnable: true }
    const writer = new IndexService(indexDir, options)
    const t0 = new Date(2024, 0, 15, 10, 0, 0, 0).getTime()
    vi.useFakeTimers({ toFake: ['Date'], now: t0 })
    try {
      // 31 entries per file: 300 records of two keys each fill 20 files; `shared` is in every tenth.
      for (let i = 0; i < 300; i++) writer.buildIndex(record(i * 100, t0 + i * 1000, i % 10 === 0 ? `k${i} shared` : `k${i} x${i}`))
    } finally {
      vi.useRealTimers()
    }
    await writer.waitForRollFlushes()
    writer.flush()
    const fileCount = writer.getFileCount()
    expect(fileCount).toBeGreaterThanOrEqual(19)
    writer.shutdown()

    const clock = { now: 5_000 }
    const budget = new MappingBudget({ maxBytes: 1 << 30, idleMs: 1_000, clock: () => clock.now })
    const { result: reader, maps: mapsAtLoad } = await countIndexMaps(() => {
      const service = new IndexService(indexDir, { ...options, budget })
      service.load(true, 0)
      return service
    })
    try {
      expect(mapsAtLoad).toBe(0)
      expect(budget.mappedFiles).toBe(0)
      expect(reader.getFileCount()).toBe(fileCount)
      // The headers are known without a mapping: the newest file's end is the last record.
      expect(reader.getFiles()[fileCount - 1].getEndPhyOffset()).toBe(299 * 100)

      // One query walks every file (`shared` is in each of them), newest first.
      const shared = reader.queryOffset('t', 'shared', 64, 0, Number.MAX_SAFE_INTEGER).phyOffsets
      expect(shared).toEqual(Array.from({ length: 30 }, (_, i) => (290 - i * 10) * 100))
      expect(budget.mappedFiles).toBe(fileCount)
      expect(budget.mappedBytes).toBe(fileCount * INDEX_FILE_SIZE)
      for (let i = 0; i < 300; i++) expect(reader.queryOffset('t', `k${i}`, 4, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([i * 100])
      expect(budget.maps).toBe(fileCount)

      clock.now += 999
      expect(budget.sweep()).toBe(0)
      clock.now += 1
      expect(budget.sweep()).toBe(fileCount)
      expect(budget.mappedBytes).toBe(0)
      // The results taken before are plain offsets; a new query maps again, transparently, and
      // only the files of its time range (here the newest).
      expect(shared).toHaveLength(30)
      expect(reader.queryOffset('t', 'x299', 4, t0 + 299_000, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([29_900])
      expect(budget.mappedFiles).toBe(1)

      // Cleanup deletes files below the log's new minimum from their headers: nothing is mapped.
      const expiry = await countIndexMaps(() => reader.deleteExpiredFile(15_000))
      expect(expiry.result).toBeGreaterThanOrEqual(9)
      expect(expiry.maps).toBe(0)
      expect(reader.getFileCount()).toBe(fileCount - expiry.result)
      expect(reader.queryOffset('t', 'k150', 4, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([15_000])
    } finally {
      reader.shutdown()
    }
    // Shutdown unmaps what is mapped and the budget stops counting it.
    expect(budget.mappedBytes).toBe(0)
  })

  it('a budget smaller than the index keeps it mapped only within the budget while a query walks every file', async () => {
    const indexDir = join(dir, 'index')
    const clock = { now: 1 }
    const budget = new MappingBudget({ maxBytes: 3 * INDEX_FILE_SIZE, idleMs: 60_000, clock: () => clock.now })
    const service = new IndexService(indexDir, { maxHashSlotNum: SLOTS, maxIndexNum: ENTRIES, messageIndexEnable: true, budget })
    try {
      for (let i = 0; i < 200; i++) {
        clock.now++
        service.buildIndex(record(i * 10, Date.now(), `k${i} common`))
      }
      expect(service.getFileCount()).toBeGreaterThan(10)
      // A rolled file stays mapped until its background flush; then the budget may unmap it.
      await service.waitForRollFlushes()
      clock.now++
      expect(service.queryOffset('t', 'k199', 4, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([1990])
      expect(budget.mappedBytes).toBeLessThanOrEqual(3 * INDEX_FILE_SIZE)
      const before = { maps: budget.maps, unmaps: budget.unmaps }
      const all = service.queryOffset('t', 'common', 64, 0, Number.MAX_SAFE_INTEGER).phyOffsets
      expect(all).toEqual(Array.from({ length: 64 }, (_, i) => (199 - i) * 10))
      // The walk mapped the files the budget had unmapped, and unmapped others to stay within it.
      expect(budget.maps - before.maps).toBeGreaterThan(0)
      expect(budget.unmaps - before.unmaps).toBeGreaterThan(0)
      expect(budget.mappedBytes).toBeLessThanOrEqual(3 * INDEX_FILE_SIZE)
      for (let i = 0; i < 200; i += 7) expect(service.queryOffset('t', `k${i}`, 4, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([i * 10])
    } finally {
      service.shutdown()
    }
  })
})

describe('records the index has seen create no file', () => {
  it('a replay of the last record and records without keys do not roll a full newest file', async () => {
    const indexDir = join(dir, 'index')
    const options = { maxHashSlotNum: SLOTS, maxIndexNum: ENTRIES, messageIndexEnable: true }
    const record = (commitLogOffset: number, keys?: string): IndexDispatch => ({
      topic: 't',
      commitLogOffset,
      storeTimestamp: Date.now(),
      keys,
      uniqKey: undefined,
      sysFlag: 0,
    })
    const writer = new IndexService(indexDir, options)
    // 31 entries fill the first file exactly.
    for (let i = 0; i < ENTRIES - 1; i++) writer.buildIndex(record(i * 100, `k${i}`))
    expect(writer.getFileCount()).toBe(1)
    expect(writer.getFiles()[0].isWriteFull()).toBe(true)
    writer.buildIndex(record(3_100))
    writer.buildIndex(record(3_200))
    expect(writer.getFileCount()).toBe(1)
    expect(writer.getFiles()[0].getEndPhyOffset()).toBe(3_200)
    writer.flush()
    writer.shutdown()

    const reader = new IndexService(indexDir, options)
    try {
      reader.load(true, 0)
      expect(reader.getFiles()[0].getEndPhyOffset()).toBe(3_200)
      // Open replays the record at the index's end: a no-op, no new file.
      reader.buildIndex(record(3_200))
      expect(reader.getFileCount()).toBe(1)
      // The next keyed record rolls; the new file starts where the recorded position is.
      reader.buildIndex(record(3_300, 'late'))
      expect(reader.getFileCount()).toBe(2)
      expect(reader.getFiles()[1].getBeginPhyOffset()).toBe(3_300)
      expect(reader.queryOffset('t', 'late', 4, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([3_300])
      expect(reader.queryOffset('t', 'k0', 4, 0, Number.MAX_SAFE_INTEGER).phyOffsets).toEqual([0])
      await reader.waitForRollFlushes()
    } finally {
      reader.shutdown()
    }
  })
})

/**
 * Tracks the mappings of index files (no other file of these stores has their size) from now until
 * `stop`: how many were made and how many are still mapped.
 */
function trackIndexMappings(): { maps: () => number; live: () => number; stop: () => void } {
  let maps = 0
  let closes = 0
  const stop = interposeNativeForTesting((original) => ({
    map: (fd, length, writable, expose) => {
      const handle = original.map(fd, length, writable, expose)
      if (length !== INDEX_FILE_SIZE) return handle
      maps++
      let closed = false
      return wrapMapHandle(handle, {
        close: () => {
          if (!closed) closes++
          closed = true
          handle.close()
        },
      })
    },
  }))
  return { maps: () => maps, live: () => maps - closes, stop }
}

describe('a store with many index files under a small budget', () => {
  it('maps none at reopen, maps what a query walks, unmaps it after the idle time, and query results outlive the unmap', async () => {
    let now = 1_000_000
    const clock = { now: () => now }
    const options: OpenOptions = {
      ...SMALL,
      mappingBudgetBytes: 4 * INDEX_FILE_SIZE,
      mappingIdleMs: 1_000,
      flushIntervalConsumeQueue: 10,
      clock,
    }
    let store = await MessageStore.open(dir, options)
    for (let i = 0; i < 600; i += 50) {
      const batch = Array.from({ length: 50 }, (_, j) => {
        const n = i + j
        return { topic: 'orders', queueId: n % 4, body: Buffer.from(`order ${n}`), keys: n % 25 === 0 ? [`o${n}`, 'audit'] : [`o${n}`] }
      })
      expect((await store.putMessages(batch)).every((r) => r.status === 'PUT_OK')).toBe(true)
    }
    await store.close()
    const fileCount = indexFiles().length
    expect(fileCount).toBeGreaterThanOrEqual(19)

    const tracker = trackIndexMappings()
    try {
      // Reopen and close without a query: no index file is mapped, not even to flush it at close.
      store = await MessageStore.open(dir, options)
      expect(tracker.maps()).toBe(0)
      await store.close()
      expect(tracker.maps()).toBe(0)

      store = await MessageStore.open(dir, options)
      expect(tracker.maps()).toBe(0)
      expect(store.stats().indexFileCount).toBe(fileCount)
      const atOpen = store.stats().mapping

      // One query walks every file: `audit` is on every 25th message.
      const held = store.queryMessage('orders', 'audit', 64)
      const bodies = Array.from({ length: 24 }, (_, i) => `order ${i * 25}`)
      expect(held.messages.map((m) => Buffer.from(m.body).toString())).toEqual(bodies)
      expect(tracker.maps()).toBe(fileCount)
      // The budget held at most its 4 files (and the one being read) mapped at once. The old
      // commit-log file the query read its records from counts in the same budget (64 KiB, more
      // than all of it), so it may have pushed every index file out by now.
      expect(tracker.live()).toBeLessThanOrEqual(5)
      // The store's figures count them now, and did not at open.
      const afterQuery = store.stats().mapping
      expect(afterQuery.maps - atOpen.maps).toBeGreaterThanOrEqual(fileCount)
      expect(afterQuery.mappedBytes - atOpen.mappedBytes).toBeGreaterThanOrEqual(INDEX_FILE_SIZE)
      for (let n = 0; n < 600; n++) {
        const got = store.queryMessage('orders', `o${n}`, 4).messages
        expect(got.map((m) => Buffer.from(m.body).toString())).toEqual([`order ${n}`])
      }

      // Past the idle time the consume-queue flush pass unmaps every idle file.
      now += 2_000
      await vi.waitFor(() => expect(tracker.live()).toBe(0), { timeout: 10_000, interval: 10 })
      expect(store.stats().mapping.mappedBytes).toBeLessThanOrEqual(atOpen.mappedBytes)
      expect(store.stats().mapping.unmaps - atOpen.unmaps).toBeGreaterThanOrEqual(fileCount)
      expect(held.messages.map((m) => Buffer.from(m.body).toString())).toEqual(bodies)

      // The index keeps working: a new key goes into the (unmapped) newest file and is found.
      const late = await store.putMessage({ topic: 'orders', queueId: 0, body: Buffer.from('late'), keys: ['late', 'audit'] })
      expect(late.status).toBe('PUT_OK')
      expect(store.queryMessage('orders', 'late', 4).messages.map((m) => Buffer.from(m.body).toString())).toEqual(['late'])
      await store.close()
      // Close unmaps every index file it mapped.
      expect(tracker.live()).toBe(0)
    } finally {
      tracker.stop()
      if (!store.isClosed) await store.close()
    }
    store = await MessageStore.open(dir, options)
    try {
      expect(store.queryMessage('orders', 'audit', 64).messages).toHaveLength(25)
    } finally {
      await store.close()
    }
  })
})

describe('a store whose messages carry no keys', () => {
  /** Opens the store and returns what open's replay says it dispatched. */
  async function openCounting(options: OpenOptions): Promise<{ store: MessageStore; replayed: number; from: number }> {
    let replayed = -1
    let from = -1
    const store = await MessageStore.open(dir, {
      ...options,
      logger: (_level, message) => {
        const m = /open dispatched (\d+) records from commit-log offset (\d+)/.exec(message)
        if (m !== null) {
          replayed = Number(m[1])
          from = Number(m[2])
        }
      },
    })
    expect(replayed).toBeGreaterThanOrEqual(0)
    return { store, replayed, from }
  }

  async function putKeyless(store: MessageStore, count: number, keyedFirst = 0): Promise<number[]> {
    const offsets: number[] = []
    for (let i = 0; i < count; i += 100) {
      const batch = Array.from({ length: Math.min(100, count - i) }, (_, j) => {
        const n = i + j
        return { topic: 'plain', queueId: n % 3, body: Buffer.alloc(60, n % 251), ...(n < keyedFirst ? { keys: [`k${n}`] } : {}) }
      })
      const results = await store.putMessages(batch)
      expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
      offsets.push(...results.map((r) => r.wroteOffset))
    }
    return offsets
  }

  it('reopens cleanly without reading its commit log for the index, and later keys are still indexed', async () => {
    const first = await openCounting(SMALL)
    const offsets = await putKeyless(first.store, 3_000)
    await first.store.close()
    expect(fs.readdirSync(join(dir, 'commitlog')).length).toBeGreaterThan(3)

    // The index's end is the log's last record: dispatch restarts at the end of the log, and
    // reads nothing of it (not even that record).
    const second = await openCounting(SMALL)
    try {
      expect(second.from).toBeGreaterThan(offsets[offsets.length - 1])
      expect(second.from).toBe(second.store.stats().commitLogMaxOffset)
      expect(second.replayed).toBe(0)
      const put = await second.store.putMessage({ topic: 'plain', queueId: 0, body: Buffer.from('keyed'), keys: ['late'] })
      expect(put.status).toBe('PUT_OK')
      expect(second.store.queryMessage('plain', 'late', 4).messages.map((m) => m.commitLogOffset)).toEqual([put.wroteOffset])
    } finally {
      await second.store.close()
    }
    const third = await openCounting(SMALL)
    try {
      expect(third.replayed).toBeLessThanOrEqual(1)
      expect(third.store.queryMessage('plain', 'late', 4).messages).toHaveLength(1)
      expect(third.store.getMessage('g', 'plain', 0, 0, 4).messages).toHaveLength(4)
    } finally {
      await third.store.close()
    }
  })

  it('keys at first, then none: a clean reopen replays nothing of the keyless records', async () => {
    const first = await openCounting(SMALL)
    await putKeyless(first.store, 2_000, 20)
    await first.store.close()
    const second = await openCounting(SMALL)
    try {
      expect(second.replayed).toBeLessThanOrEqual(1)
      for (const n of [0, 7, 19]) expect(second.store.queryMessage('plain', `k${n}`, 4).messages).toHaveLength(1)
    } finally {
      await second.store.close()
    }
  })

  it('I4: an index whose recorded position is past a truncated commit log is rebuilt, so keys written below it are found', async () => {
    const first = await openCounting(SMALL)
    const offsets = await putKeyless(first.store, 3_000)
    await first.store.close()
    // Tear the log from a record in its last file: its recorded index position is now past the end.
    const cut = offsets[offsets.length - 20]
    const file = join(dir, 'commitlog', formatOffsetName(cut - (cut % COMMIT_LOG_FILE)))
    const fd = fs.openSync(file, 'r+')
    try {
      fs.writeSync(fd, Buffer.alloc(COMMIT_LOG_FILE - (cut % COMMIT_LOG_FILE)), 0, undefined, cut % COMMIT_LOG_FILE)
    } finally {
      fs.closeSync(fd)
    }
    const second = await openCounting(SMALL)
    try {
      expect(second.store.stats().commitLogMaxOffset).toBe(cut)
      expect(second.store.stats().repairs.map((r) => r.action)).toContain('deleted the index to rebuild it')
      const put = await second.store.putMessage({ topic: 'plain', queueId: 0, body: Buffer.from('keyed'), keys: ['after-cut'] })
      expect(put.wroteOffset).toBe(cut)
      expect(second.store.queryMessage('plain', 'after-cut', 4).messages.map((m) => m.commitLogOffset)).toEqual([cut])
    } finally {
      await second.store.close()
    }
  })

  it('after an unclean exit, keys put between keyless records are all found and nothing is indexed twice', async () => {
    const first = await openCounting(SMALL)
    await putKeyless(first.store, 500)
    const keyed = await first.store.putMessages(
      Array.from({ length: 40 }, (_, n) => ({ topic: 'plain', queueId: n % 3, body: Buffer.from(`keyed ${n}`), keys: [`mid${n}`, 'mid'] })),
    )
    await putKeyless(first.store, 500)
    await first.store.close()
    // The abort file left behind: the next open recovers as after a crash (I1 and the tail scan).
    fs.writeFileSync(join(dir, 'abort'), '')
    const second = await openCounting(SMALL)
    try {
      expect(second.store.stats().lastExitOK).toBe(false)
      for (const [n, put] of keyed.entries()) {
        expect(second.store.queryMessage('plain', `mid${n}`, 4).messages.map((m) => m.commitLogOffset)).toEqual([put.wroteOffset])
      }
      expect(second.store.queryMessage('plain', 'mid', 64).messages).toHaveLength(40)
      const late = await second.store.putMessage({ topic: 'plain', queueId: 1, body: Buffer.from('late'), keys: ['late'] })
      expect(second.store.queryMessage('plain', 'late', 4).messages.map((m) => m.commitLogOffset)).toEqual([late.wroteOffset])
    } finally {
      await second.store.close()
    }
  })

  it('without any commit-log file the index goes too, so the keys of new records are found', async () => {
    const first = await openCounting(SMALL)
    await putKeyless(first.store, 1_000, 10)
    await first.store.close()
    fs.rmSync(join(dir, 'commitlog'), { recursive: true })
    const second = await openCounting(SMALL)
    try {
      expect(second.store.stats().repairs.map((r) => r.action)).toContain('deleted the index to rebuild it')
      const put = await second.store.putMessage({ topic: 'plain', queueId: 0, body: Buffer.from('fresh'), keys: ['k3'] })
      expect(put.wroteOffset).toBe(0)
      expect(second.store.queryMessage('plain', 'k3', 4).messages.map((m) => Buffer.from(m.body).toString())).toEqual(['fresh'])
    } finally {
      await second.store.close()
    }
  })

  it('the index file of a keyless store records the last record in its header and holds no entry', async () => {
    const first = await openCounting(SMALL)
    const offsets = await putKeyless(first.store, 500)
    await first.store.close()
    const names = indexFiles()
    expect(names).toHaveLength(1)
    expect(names[0]).toMatch(/^\d{17}$/)
    const header = fs.readFileSync(join(dir, 'index', names[0])).subarray(0, 40)
    // begin offset 0, end offset: the last record; no entries (indexCount 1), no slot used.
    expect(Number(header.readBigInt64BE(16))).toBe(0)
    expect(Number(header.readBigInt64BE(24))).toBe(offsets[offsets.length - 1])
    expect(header.readInt32BE(32)).toBe(0)
    expect(header.readInt32BE(36)).toBe(1)
  })
})
