// What a burst leaves unsynced is synced in the background once the writer goes quiet, so that a
// close after a burst has little to sync:
// - a periodic flush pass that finds nothing appended (or dispatched, for a queue) since the last
//   pass flushes everything, below flushCommitLogLeastPages / flushConsumeQueueLeastPages too;
// - a burst that never yields to the event loop (no timer fires) still starts the kernel's
//   write-back of the consume queues every so many units, and syncs the index entries (not the
//   slot table, whose pages a sync would make every next put fault on);
// - a close does not make the next commit-log file that the burst's last append scheduled;
// - reads in a loop that never yields run the flush passes their timers could not (catchUp), and
//   a pass starts the index's sync with its queues' (nothing after its first wait would start);
// - close drops the pages of the files it syncs from their mappings first, so that the syncs need
//   not write-protect each mapped page (a TLB shootdown per page); only the pages that may be
//   dirty (the unmap takes the others out anyway).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

import { interposeNativeForTesting, type MapHandle, native } from '../lib/native.js'
import { indexFileSize } from '../lib/store/index/index-file.js'
import { FIRST_KICK_ENTRIES, WRITEBACK_KICK_ENTRIES } from '../lib/store/index/index-service.js'
import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { QUEUE_WRITE_BACK_STEP, WRITE_BACK_EVERY_UNITS } from '../lib/store/queue/queue-write-back.js'
import { interposeMappings, recordWriteBacks, wrapMapHandle } from './helpers/map-handle.js'
import { tempDir } from './helpers/tmp.js'

const QUEUE_FILE = 100_000 * 20
const BASE: OpenOptions = {
  flushDiskType: 'ASYNC_FLUSH',
  mappedFileSizeCommitLog: 1 << 20,
  mappedFileSizeConsumeQueue: QUEUE_FILE,
  messageIndexEnable: false,
  flushIntervalCommitLog: 50,
  flushIntervalConsumeQueue: 50,
  // The thorough passes would flush everything anyway: a minute away, they cannot be what does.
  flushCommitLogThoroughInterval: 60_000,
  flushConsumeQueueThoroughInterval: 60_000,
}

function messages(count: number): { topic: string; queueId: number; body: Buffer }[] {
  return Array.from({ length: count }, (_, n) => ({ topic: 'quiet', queueId: 0, body: Buffer.alloc(100, n & 0xff) }))
}

const restores: (() => void)[] = []
const stores: MessageStore[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
  for (const restore of restores.splice(0)) restore()
})

/** The index of indexBurst's store: 100,000 slots and 400,000 entries. */
const INDEX_SLOTS = 100_000
const INDEX_ENTRIES = 400_000
const INDEX_ENTRIES_START = 40 + INDEX_SLOTS * 4

/**
 * Puts 140,000 messages of a key each into a new store, 1000 at a time (batches awaited one after
 * another resolve through microtasks only: no timer runs between them), and tells `note` of every
 * drop and sync of its index file's mapping.
 */
async function indexBurst(note: (step: 'drop' | 'sync', offset: number, length: number) => void): Promise<void> {
  const watch = (handle: MapHandle, length: number): MapHandle => {
    if (length !== INDEX_ENTRIES_START + INDEX_ENTRIES * 20) return handle
    return wrapMapHandle(handle, {
      advise: (offset, bytes, advice) => {
        if (advice === 'dontneed') note('drop', offset, bytes)
        return handle.advise(offset, bytes, advice)
      },
      syncAsync: (offset, bytes) => {
        note('sync', offset, bytes)
        return handle.syncAsync(offset, bytes)
      },
    })
  }
  // The index file is made ahead on the pool (createMapped), or on the JS thread (map) when a roll cannot wait.
  restores.push(
    interposeNativeForTesting((original) => ({
      map: (fd, length, writable, expose) => watch(original.map(fd, length, writable, expose), length),
      createMapped: async (path, size, ...rest) => watch(await original.createMapped(path, size, ...rest), size),
    })),
  )
  const options = { ...BASE, messageIndexEnable: true, maxHashSlotNum: INDEX_SLOTS, maxIndexNum: INDEX_ENTRIES }
  const store = await MessageStore.open(tempDir('mqstore-quiet-'), options)
  stores.push(store)
  for (let done = 0; done < 140_000; done += 1000) {
    const batch = messages(1000).map((m, k) => ({ ...m, body: m.body.subarray(0, 16), keys: `key-${done + k}` }))
    for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
  }
}

describe('a quiet writer leaves nothing unsynced', () => {
  it('the commit log: a few puts below flushCommitLogLeastPages are flushed once no put follows', async () => {
    const store = await MessageStore.open(tempDir('mqstore-quiet-'), BASE)
    stores.push(store)
    for (const r of await store.putMessages(messages(5))) expect(r.status).toBe('PUT_OK')
    const max = store.stats().commitLogMaxOffset
    expect(max).toBeLessThan(4 * 4096)
    await vi.waitFor(() => expect(store.stats().commitLogFlushedOffset).toBe(max), { timeout: 10_000, interval: 20 })
  })

  it('a consume queue: units below flushConsumeQueueLeastPages are synced once no dispatch reaches the queue', async () => {
    const dir = tempDir('mqstore-quiet-')
    let store = await MessageStore.open(dir, BASE)
    for (const r of await store.putMessages(messages(1000))) expect(r.status).toBe('PUT_OK')
    await store.close()
    // Reopened, the queue's file is synced through its mapping (msync), which this records.
    const synced: number[] = []
    restores.push(
      interposeNativeForTesting((original) => ({
        map: (fd, length, writable, expose) => {
          const handle = original.map(fd, length, writable, expose)
          if (length !== QUEUE_FILE) return handle
          return wrapMapHandle(handle, {
            syncAsync: (offset, bytes) => {
              synced.push(offset + bytes)
              return handle.syncAsync(offset, bytes)
            },
          })
        },
      })),
    )
    store = await MessageStore.open(dir, BASE)
    stores.push(store)
    for (const r of await store.putMessages(messages(5))) expect(r.status).toBe('PUT_OK')
    // Five units are 100 bytes, far below two pages: only the quiet rule syncs them.
    await vi.waitFor(() => expect(Math.max(0, ...synced)).toBe(1005 * 20), { timeout: 10_000, interval: 20 })
  })
})

describe('a burst that never yields to the event loop', () => {
  it('starts the write-back of the consume queue every so many units, behind the writer', async () => {
    const dir = tempDir('mqstore-quiet-')
    const queueFile = join(dir, 'consumequeue', 'quiet', '0', formatOffsetName(0))
    const writeBacks: { offset: number; length: number }[] = []
    restores.push(
      recordWriteBacks((fd, offset, length) => {
        if (fs.existsSync(queueFile) && fs.fstatSync(fd).ino === fs.statSync(queueFile).ino) writeBacks.push({ offset, length })
      }),
    )
    const store = await MessageStore.open(dir, { ...BASE, flushIntervalConsumeQueue: 60_000 })
    stores.push(store)
    // Batches awaited one after another resolve through microtasks only: no timer runs between them.
    const units = 3 * WRITE_BACK_EVERY_UNITS
    for (let done = 0; done < units; done += 1000) {
      for (const r of await store.putMessages(messages(Math.min(1000, units - done)))) expect(r.status).toBe('PUT_OK')
    }
    expect(writeBacks.length).toBeGreaterThanOrEqual(2)
    let end = 0
    for (const { offset, length } of writeBacks) {
      // In order, each from where the last one ended, a step at least, and never past what was written.
      expect(offset).toBe(end)
      expect(length).toBeGreaterThanOrEqual(QUEUE_WRITE_BACK_STEP)
      end = offset + length
    }
    expect(end).toBeLessThanOrEqual(units * 20)
  })

  it('syncs the index entries behind the writer every so many keys, each time from the first page of the entry table, never its slot table', async () => {
    const synced: { offset: number; length: number }[] = []
    await indexBurst((step, offset, length) => {
      if (step === 'sync') synced.push({ offset, length })
    })
    // A key each: 140,000 entries, three syncs of the entries: after the first FIRST_KICK_ENTRIES,
    // then every WRITEBACK_KICK_ENTRIES. Each covers the table from its start (the mark written
    // after it then claims no page an earlier sync still holds; pages already clean cost the sync
    // nothing), up to a page boundary further on.
    expect(synced.length).toBe(3)
    const tableStart = Math.floor(INDEX_ENTRIES_START / 4096) * 4096
    let end = tableStart
    for (const [k, { offset, length }] of synced.entries()) {
      expect(offset).toBe(tableStart)
      expect((offset + length) % 4096).toBe(0)
      expect(offset + length).toBeGreaterThan(end + (k === 0 ? FIRST_KICK_ENTRIES : WRITEBACK_KICK_ENTRIES) * 20 - 4096)
      end = offset + length
    }
    expect(end).toBeLessThanOrEqual(INDEX_ENTRIES_START + 140_000 * 20)
  })

  it.skipIf(process.platform !== 'linux')(
    'drops the index entries it syncs from the mapping first (Linux only: the drop is a Linux madvise)',
    async () => {
      // What happened to each range of the entry table, in order.
      const steps: string[] = []
      await indexBurst((step, offset, length) => steps.push(`${step} ${offset}+${length}`))
      const syncs = steps.filter((step) => step.startsWith('sync'))
      expect(syncs.length).toBe(3)
      // Each sync comes right after the drop of the pages written since the last one: the drops
      // follow one another, and each ends where its sync does.
      const range = (step: string) => step.split(' ')[1].split('+').map(Number)
      let dropped = Math.floor(INDEX_ENTRIES_START / 4096) * 4096
      for (const sync of syncs) {
        const drop = steps[steps.indexOf(sync) - 1]
        expect(drop.startsWith('drop')).toBe(true)
        const [from, length] = range(drop)
        const [syncFrom, syncLength] = range(sync)
        expect(from).toBe(dropped)
        expect(from + length).toBe(syncFrom + syncLength)
        dropped = from + length
      }
    },
  )

  it.skipIf(process.platform !== 'linux')(
    'close drops every page of the files it syncs from their mappings before it syncs them (Linux only: the drop is a Linux madvise)',
    async () => {
      const dir = tempDir('mqstore-quiet-')
      let closing = false
      // Per mapping, what close did to it in order: 'drop' (the whole file) or 'sync'.
      const steps = new Map<number, string[]>()
      let next = 0
      restores.push(
        interposeMappings((handle, length, writable) => {
          if (!writable) return handle
          const id = next++
          const note = (step: string) => {
            if (closing) steps.set(id, [...(steps.get(id) ?? []), step])
          }
          return wrapMapHandle(handle, {
            advise: (offset, bytes, advice) => {
              if (advice === 'dontneed' && offset === 0 && bytes === length) note('drop')
              return handle.advise(offset, bytes, advice)
            },
            syncAsync: (offset, bytes) => {
              note('sync')
              return handle.syncAsync(offset, bytes)
            },
            sync: (offset, bytes) => {
              note('sync')
              return handle.sync(offset, bytes)
            },
          })
        }),
      )
      const store = await MessageStore.open(dir, { ...BASE, messageIndexEnable: true, maxHashSlotNum: 1000, maxIndexNum: 4000 })
      stores.push(store)
      const batch = messages(2000).map((m, k) => ({ ...m, queueId: k % 2, keys: `key-${k}` }))
      for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
      closing = true
      await stores.pop()?.close()
      // The commit log, two queues and the index were synced, each after its pages were dropped
      // (the checkpoint, which close writes last, is the one file synced without).
      // The commit log, the two queues and the index were dropped whole; whatever close synced
      // through a mapping was dropped first, but for the checkpoint, which close writes last.
      const all = [...steps.values()]
      expect(all.filter((s) => s[0] === 'drop').length).toBeGreaterThanOrEqual(4)
      expect(all.filter((s) => s.includes('sync') && s[0] !== 'drop').length).toBeLessThanOrEqual(1)
      expect(all.filter((s) => s.includes('sync') && s[0] === 'drop').length).toBeGreaterThanOrEqual(1)
    },
  )

  it.skipIf(process.platform !== 'linux')(
    'close drops only what may be dirty: a file below its flushed position is clean, and keeps its pages mapped until the unmap (Linux only: the drop is a Linux madvise)',
    async () => {
      const dir = tempDir('mqstore-quiet-')
      let closing = false
      // The ranges close dropped from the commit log's mapping (its files are 1 MiB, no other file is).
      const dropped: [number, number][] = []
      restores.push(
        interposeNativeForTesting((original) => ({
          map: (fd, length, writable, expose) => {
            const handle = original.map(fd, length, writable, expose)
            if (!writable || length !== 1 << 20) return handle
            return wrapMapHandle(handle, {
              advise: (offset, bytes, advice) => {
                if (closing && advice === 'dontneed') dropped.push([offset, bytes])
                return handle.advise(offset, bytes, advice)
              },
            })
          },
        })),
      )
      const store = await MessageStore.open(dir, BASE)
      stores.push(store)
      for (const r of await store.putMessages(messages(1000))) expect(r.status).toBe('PUT_OK')
      // The periodic flush makes all of it durable, then a few more records stay unflushed.
      await vi.waitFor(() => expect(store.stats().flushBehindBytes).toBe(0), { timeout: 10_000, interval: 20 })
      const flushed = store.stats().commitLogFlushedOffset
      const page = native.pageSize
      expect(flushed).toBeGreaterThan(3 * page)
      for (const r of await store.putMessages(messages(3))) expect(r.status).toBe('PUT_OK')
      const end = store.stats().commitLogMaxOffset
      closing = true
      await stores.pop()?.close()
      // From the page of the flushed position (a flush pass that ran as close began may have moved
      // it onto the three records' last page) to the file's end: never the clean pages below.
      expect(dropped.length).toBe(1)
      const [from, length] = dropped[0]
      expect(from % page).toBe(0)
      expect(from).toBeGreaterThanOrEqual(Math.floor(flushed / page) * page)
      expect(from).toBeLessThanOrEqual(Math.floor(end / page) * page)
      expect(from + length).toBe(1 << 20)
    },
  )

  it('a close does not make the next commit-log file the last append scheduled', async () => {
    const dir = tempDir('mqstore-quiet-')
    // Reserving blocks is part of making a file: nothing is reserved while closing.
    let closing = false
    let reservedWhileClosing = 0
    restores.push(
      interposeNativeForTesting((original) => ({
        allocate: (fd, offset, length) => {
          if (closing) reservedWhileClosing++
          return original.allocate(fd, offset, length)
        },
      })),
    )
    const store = await MessageStore.open(dir, { ...BASE, mappedFileSizeCommitLog: 64 * 1024 })
    stores.push(store)
    // The queue's first file is made while the first put waits (the event loop runs then).
    expect((await store.putMessage(messages(1)[0])).status).toBe('PUT_OK')
    await new Promise((resolve) => setTimeout(resolve, 50))
    // The next 400 records of about 200 bytes take the second file (made ahead while the first
    // put waited), and that append schedules the third; close comes before the event loop ran it.
    for (const r of await store.putMessages(messages(400))) expect(r.status).toBe('PUT_OK')
    expect(store.stats().commitLogMaxOffset).toBeGreaterThan(64 * 1024)
    closing = true
    await stores.pop()?.close()
    expect(reservedWhileClosing).toBe(0)
  })

  it('reads run the flushes their timers missed: the commit log, every queue and the index are synced from inside the loop', async () => {
    const dir = tempDir('mqstore-quiet-')
    const interval = 1000
    const index = indexFileSize(1000, 4000)
    const options: OpenOptions = {
      ...BASE,
      messageIndexEnable: true,
      maxHashSlotNum: 1000,
      maxIndexNum: 4000,
      // No timer fires before the loop: every pass it sees is one only the reads can run.
      flushIntervalCommitLog: interval,
      flushIntervalConsumeQueue: interval,
    }
    // 600 units of 20 bytes a queue, past flushConsumeQueueLeastPages (2 pages).
    const batch = messages(2400).map((m, k) => ({ ...m, queueId: k % 4, keys: `key-${k}` }))
    // The files exist before the loop: a new file's first sync is an fsync, not through its mapping.
    const first = await MessageStore.open(dir, options)
    for (const r of await first.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    await first.close()
    let reading = false
    // When each kind of file was synced from inside the read loop (performance.now()).
    const synced: { kind: string; handle: number; at: number }[] = []
    let handles = 0
    restores.push(
      interposeNativeForTesting((original) => ({
        map: (fd, length, writable, expose) => {
          const handle = original.map(fd, length, writable, expose)
          const kind = length === 1 << 20 ? 'log' : length === QUEUE_FILE ? 'queue' : length === index ? 'index' : null
          if (!writable || kind === null) return handle
          const id = handles++
          return wrapMapHandle(handle, {
            syncAsync: (offset, bytes) => {
              if (reading) synced.push({ kind, handle: id, at: performance.now() })
              return handle.syncAsync(offset, bytes)
            },
          })
        },
      })),
    )
    const opened = performance.now()
    const store = await MessageStore.open(dir, options)
    stores.push(store)
    for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    reading = true
    const until = opened + 2.5 * interval
    let reads = 0
    while (performance.now() < until) {
      const got = store.getMessage('g', 'quiet', reads % 4, 0, 8)
      expect(got.status).toBe('FOUND')
      reads++
    }
    reading = false
    for (const kind of ['log', 'queue', 'index']) expect(synced.some((s) => s.kind === kind)).toBe(true)
    expect(new Set(synced.filter((s) => s.kind === 'queue').map((s) => s.handle)).size).toBe(4)
    // Not before they were due.
    for (const { at } of synced) expect(at).toBeGreaterThanOrEqual(opened + interval)
  })
})
