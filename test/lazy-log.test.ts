// Old commit-log files are mapped on first use within the store's mapping budget and unmapped once
// idle (no reader holds them and all their bytes are flushed); the file being written stays mapped
// outside the budget. Real files and mappings throughout; on Linux the mappings are also counted
// in /proc/self/maps, so the figures in stats() are checked against what the kernel sees.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

import { CompactionService } from '../lib/store/compaction/compaction-service.js'
import { MappedFileQueue } from '../lib/store/mapped/mapped-file-queue.js'
import { MappingBudget } from '../lib/store/mapped/mapping-budget.js'
import { TOPIC_CONFIG_DEFAULTS, type TopicConfig } from '../lib/store/topics/topic-table.js'
import { TransientStorePool } from '../lib/store/mapped/transient-store-pool.js'
import { MessageStore, type OpenOptions } from '../lib/store/message-store.js'
import { CQ_STORE_UNIT_SIZE } from '../lib/store/queue/consume-queue.js'
import { ManualClock, makeRecord, readAll } from './helpers/compaction.js'
import { tempDir } from './helpers/tmp.js'

const onLinux = process.platform === 'linux'
const LOG_FILE = 64 * 1024
const BODY_BYTES = 1000

/** Commit-log files of `dir` mapped in this process right now, by name (Linux). */
function mappedLogFiles(dir: string): Set<string> {
  const prefix = `${join(dir, 'commitlog')}/`
  const names = new Set<string>()
  for (const line of fs.readFileSync('/proc/self/maps', 'utf8').split('\n')) {
    const at = line.indexOf(prefix)
    if (at >= 0) names.add(line.slice(at + prefix.length).trim())
  }
  return names
}

function bodyOf(n: number): Buffer {
  const body = Buffer.alloc(BODY_BYTES, n & 0xff)
  body.write(`m${n}.`, 0)
  return body
}

function textOf(body: Uint8Array): string {
  const text = Buffer.from(body).toString('latin1')
  return text.slice(0, text.indexOf('.'))
}

/** Writes `count` messages of 1000 B to t/0 and closes; returns their commit-log offsets. */
async function writeLog(dir: string, count: number, options: OpenOptions): Promise<number[]> {
  const store = await MessageStore.open(dir, options)
  const offsets: number[] = []
  try {
    for (let n = 0; n < count; n += 256) {
      const batch = Array.from({ length: Math.min(256, count - n) }, (_, k) => ({ topic: 't', queueId: 0, body: bodyOf(n + k) }))
      for (const r of await store.putMessages(batch)) {
        expect(r.status).toBe('PUT_OK')
        offsets.push(r.wroteOffset)
      }
    }
  } finally {
    await store.close()
  }
  return offsets
}

/** About 60 records of 1000 B fill a 64 KiB file: at least 200 files. */
const MESSAGES = 204 * 60
const BASE: OpenOptions = {
  mappedFileSizeCommitLog: LOG_FILE,
  mappedFileSizeConsumeQueue: 100 * CQ_STORE_UNIT_SIZE,
  maxHashSlotNum: 1000,
  maxIndexNum: 4000,
  flushDiskType: 'ASYNC_FLUSH',
  // No key index: its files and its catch-up at open are not what these tests are about.
  messageIndexEnable: false,
}

describe('old commit-log files in a store', () => {
  const stores: MessageStore[] = []
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close()
  })

  async function open(dir: string, options: OpenOptions): Promise<MessageStore> {
    const store = await MessageStore.open(dir, options)
    stores.push(store)
    return store
  }

  it('a log of 200 files of 64 KiB reopens with none of its old files mapped; reading an old message maps its file once, and it is unmapped again once idle while the message read from it stays correct', async () => {
    const dir = tempDir('mqstore-lazylog-')
    const offsets = await writeLog(dir, MESSAGES, BASE)
    const files = fs.readdirSync(join(dir, 'commitlog')).length
    expect(files).toBeGreaterThanOrEqual(200)
    let now = 1_000_000
    const store = await open(dir, { ...BASE, clock: { now: () => now }, mappingIdleMs: 1_000, flushIntervalConsumeQueue: 10 })
    const atReopen = store.stats().mapping
    // A clean reopen reads only the last record, by a positioned read: no file is mapped for it.
    expect(atReopen.mappedFiles).toBe(0)
    expect(atReopen.mappedBytes).toBe(0)
    expect(atReopen.maps).toBe(0)
    if (onLinux) expect(mappedLogFiles(dir).size).toBe(0)

    const first = store.lookMessageByOffset(offsets[0])
    expect(first).not.toBeNull()
    expect(textOf(first!.body)).toBe('m0')
    expect(store.stats().mapping).toMatchObject({ maps: 1, mappedFiles: 1, mappedBytes: LOG_FILE })
    if (onLinux) expect(mappedLogFiles(dir)).toContain('00000000000000000000')
    // A second read of the same file maps nothing more.
    expect(textOf(store.lookMessageByOffset(offsets[1])!.body)).toBe('m1')
    expect(store.stats().mapping.maps).toBe(1)

    // Messages of file 3 taken by a consumer (through the queue, whose file is mapped too).
    const fromQueue = 3 * 59
    const held = store.getMessage('g', 't', 0, fromQueue, 4)
    expect(held.status).toBe('FOUND')
    expect(held.messages.map((m) => textOf(m.body))).toEqual([0, 1, 2, 3].map((k) => `m${fromQueue + k}`))

    // Past the idle time, the flush pass of the consume queues unmaps every idle file.
    now += 2_000
    await vi.waitFor(() => expect(store.stats().mapping.mappedFiles).toBe(0), { timeout: 10_000, interval: 10 })
    expect(store.stats().mapping.unmaps).toBe(store.stats().mapping.maps)
    if (onLinux) expect(mappedLogFiles(dir).size).toBe(1)
    expect(held.messages.map((m) => textOf(m.body))).toEqual([0, 1, 2, 3].map((k) => `m${fromQueue + k}`))
    expect(held.messages[0].commitLogOffset).toBe(offsets[fromQueue])

    // The next read maps the file again and finds the same bytes.
    expect(textOf(store.lookMessageByOffset(offsets[fromQueue])!.body)).toBe(`m${fromQueue}`)
    expect(store.stats().mapping.mappedBytes).toBe(LOG_FILE)
  })

  it('files written in this run (warmed while written) are unmapped once the writer left them, they are flushed and idle', async () => {
    const dir = tempDir('mqstore-lazylog-')
    let now = 1_000_000
    const store = await open(dir, {
      ...BASE,
      clock: { now: () => now },
      mappingIdleMs: 1_000,
      flushIntervalConsumeQueue: 10,
      flushIntervalCommitLog: 10,
    })
    const offsets: number[] = []
    for (let n = 0; n < 10 * 60; n += 60) {
      const batch = Array.from({ length: 60 }, (_, k) => ({ topic: 't', queueId: 0, body: bodyOf(n + k) }))
      for (const r of await store.putMessages(batch)) offsets.push(r.wroteOffset)
    }
    const written = fs.readdirSync(join(dir, 'commitlog')).length
    expect(written).toBeGreaterThanOrEqual(10)
    // The files the writer left join the budget as the flusher passes them (the one being written
    // and the next one made ahead never do).
    await vi.waitFor(
      () => {
        const stats = store.stats()
        // Flushed through the start of the file being written.
        expect(stats.commitLogFlushedOffset).toBeGreaterThanOrEqual(Math.floor(stats.commitLogMaxOffset / LOG_FILE) * LOG_FILE)
      },
      { timeout: 10_000, interval: 10 },
    )
    expect(store.stats().mapping.mappedBytes).toBeGreaterThanOrEqual(8 * LOG_FILE)
    now += 2_000
    await vi.waitFor(() => expect(store.stats().mapping.mappedBytes).toBeLessThan(LOG_FILE), { timeout: 10_000, interval: 10 })
    if (onLinux) expect(mappedLogFiles(dir).size).toBeLessThanOrEqual(2)
    expect(textOf(store.lookMessageByOffset(offsets[0])!.body)).toBe('m0')
    expect(textOf(store.lookMessageByOffset(offsets[offsets.length - 1])!.body)).toBe(`m${offsets.length - 1}`)
  })

  it("an old file that served zero-copy bodies stays mapped past the idle time (its views are in users' hands), and they stay correct", async () => {
    const dir = tempDir('mqstore-lazylog-')
    const offsets = await writeLog(dir, 10 * 60, BASE)
    let now = 1_000_000
    const store = await open(dir, {
      ...BASE,
      clock: { now: () => now },
      mappingIdleMs: 1_000,
      flushIntervalConsumeQueue: 10,
      copyMessageBody: false,
    })
    const viewed = store.lookMessageByOffset(offsets[0])!
    const copied = store.getMessage('g', 't', 0, 2 * 60, 1)
    expect(copied.messages).toHaveLength(1)
    // Two log files (each with a private mapping whose views are out) and consume-queue files.
    expect(store.stats().mapping.mappedFiles).toBeGreaterThan(2)
    now += 2_000
    // The sweep unmaps the consume-queue files, and only them: wait for it.
    await vi.waitFor(() => expect(store.stats().mapping.mappedFiles).toBe(2), { timeout: 10_000, interval: 10 })
    expect(store.stats().mapping.mappedBytes).toBe(2 * LOG_FILE)
    expect(textOf(viewed.body)).toBe('m0')
    expect(textOf(copied.messages[0].body)).toBe(`m${2 * 60}`)
    if (onLinux) {
      const name = String(Math.floor(offsets[2 * 60] / LOG_FILE) * LOG_FILE).padStart(20, '0')
      expect([...mappedLogFiles(dir)]).toEqual(expect.arrayContaining(['00000000000000000000', name]))
    }
  })

  it('a clean close forces every record to disk when the periodic flush is many small files behind', async () => {
    const dir = tempDir('mqstore-lazylog-')
    // Timed flushes a minute apart: nothing is flushed before the close.
    const store = await open(dir, { ...BASE, flushIntervalCommitLog: 60_000, flushCommitLogTimed: true })
    for (let n = 0; n < 30 * 60; n += 60) {
      const batch = Array.from({ length: 60 }, (_, k) => ({ topic: 't', queueId: 0, body: bodyOf(n + k) }))
      for (const r of await store.putMessages(batch)) expect(r.status).toBe('PUT_OK')
    }
    expect(store.stats().commitLogMaxOffset).toBeGreaterThan(25 * LOG_FILE)
    await store.close()
    stores.splice(stores.indexOf(store), 1)
    // stats() after close gives the figures at close.
    const atClose = store.stats()
    expect(atClose.commitLogFlushedOffset).toBe(atClose.commitLogMaxOffset)
  })

  it('after a normal recovery (no shutdown record) the scanned old files are not left mapped', async () => {
    const dir = tempDir('mqstore-lazylog-')
    await writeLog(dir, 20 * 59, BASE)
    // Without the record of the clean close (its magic at byte 64 of the checkpoint zeroed), a
    // clean reopen scans the last three files, as RocketMQ does.
    const checkpoint = fs.readFileSync(join(dir, 'checkpoint'))
    expect(checkpoint.readInt32BE(64)).not.toBe(0)
    checkpoint.fill(0, 64, 68)
    fs.writeFileSync(join(dir, 'checkpoint'), checkpoint)
    let now = 1_000_000
    const store = await open(dir, { ...BASE, clock: { now: () => now }, mappingIdleMs: 1_000, flushIntervalConsumeQueue: 10 })
    expect(store.stats().recovery?.scannedBytes).toBeGreaterThan(LOG_FILE)
    // The scan read the old files through read-only mappings of its own (scan-mappings.ts), gone
    // when it ended: only the last file, which the store appends to, is mapped.
    expect(store.stats().mapping.mappedBytes).toBeLessThan(2 * LOG_FILE)
    if (onLinux) expect(mappedLogFiles(dir).size).toBe(1)
    now += 2_000
    await vi.waitFor(() => expect(store.stats().mapping.mappedFiles).toBe(0), { timeout: 10_000, interval: 10 })
    if (onLinux) expect(mappedLogFiles(dir).size).toBe(1)
    expect(store.getMessage('g', 't', 0, 0, 1).messages).toHaveLength(1)
  })

  it('consume queues rebuilt by dispatch from 200 unmapped files stay within a budget of four files, and every message reads back', async () => {
    const dir = tempDir('mqstore-lazylog-')
    const offsets = await writeLog(dir, MESSAGES, BASE)
    fs.rmSync(join(dir, 'consumequeue'), { recursive: true, force: true })
    const budget = 4 * LOG_FILE
    const store = await open(dir, { ...BASE, mappingBudgetBytes: budget })
    const mapping = store.stats().mapping
    // Dispatch walked every old file: each was mapped, then unmapped to stay under the budget.
    expect(mapping.maps).toBeGreaterThanOrEqual(199)
    expect(mapping.mappedBytes).toBeLessThanOrEqual(budget)
    if (onLinux) expect(mappedLogFiles(dir).size).toBeLessThanOrEqual(5)
    expect(store.getMaxOffsetInQueue('t', 0)).toBe(MESSAGES)
    for (let from = 0; from < MESSAGES; ) {
      const got = store.getMessage('g', 't', 0, from, 32)
      expect(got.status).toBe('FOUND')
      expect(got.messages.map((m) => textOf(m.body))).toEqual(got.messages.map((_, k) => `m${from + k}`))
      expect(store.stats().mapping.mappedBytes).toBeLessThanOrEqual(budget)
      expect(got.nextBeginOffset).toBe(from + got.messages.length)
      from = got.nextBeginOffset
    }
    expect(store.lookMessageByOffset(offsets[MESSAGES - 1])?.queueOffset).toBe(MESSAGES - 1)
  }, 60_000)

  it('retention deletes mapped and unmapped old files alike, and the budget stops counting the deleted ones', async () => {
    const dir = tempDir('mqstore-lazylog-')
    const offsets = await writeLog(dir, 20 * 59, BASE)
    const names = fs.readdirSync(join(dir, 'commitlog')).sort()
    // Every file but the last three is 100 hours old.
    const old = (Date.now() - 100 * 3_600_000) / 1000
    for (const name of names.slice(0, -3)) fs.utimesSync(join(dir, 'commitlog', name), old, old)
    const store = await open(dir, { ...BASE, deleteCommitLogFilesInterval: 0, cleanResourceInterval: 3_600_000 })
    // Files 0 and 5 mapped by reads; the others never were.
    expect(store.lookMessageByOffset(offsets[0])).not.toBeNull()
    expect(store.lookMessageByOffset(offsets[5 * 59])).not.toBeNull()
    expect(store.stats().mapping.mappedFiles).toBe(2)
    store.executeDeleteFilesManually()
    let deleted = 0
    for (let pass = 0; pass < 5 && fs.readdirSync(join(dir, 'commitlog')).length > 3; pass++) {
      deleted += (await store.runCleanupPass()).commitLogFiles
    }
    expect(deleted).toBe(names.length - 3)
    expect(fs.readdirSync(join(dir, 'commitlog'))).toHaveLength(3)
    // What the budget still counts is consume-queue files (2,000 B) the cleaner read, no log file.
    expect(store.stats().mapping.mappedBytes).toBeLessThan(LOG_FILE)
    if (onLinux) expect(mappedLogFiles(dir).size).toBeLessThanOrEqual(1)
    expect(store.lookMessageByOffset(offsets[0])).toBeNull()
    const last = offsets.length - 1
    expect(textOf(store.lookMessageByOffset(offsets[last])!.body)).toBe(`m${last}`)
  })
})

describe('old commit-log files in a MappedFileQueue (budgetOldFilesOnly)', () => {
  const SIZE = 8192
  const queues: MappedFileQueue[] = []
  afterEach(() => {
    for (const queue of queues.splice(0)) queue.shutdown(0)
  })

  function openQueue(dir: string, budget: MappingBudget, pool: TransientStorePool | null = null): MappedFileQueue {
    const queue = new MappedFileQueue(join(dir, 'log'), SIZE, { budget, budgetOldFilesOnly: true, transientStorePool: pool })
    queues.push(queue)
    queue.load()
    return queue
  }

  /** Fills the last file with `value` (creating it if need be) and returns it. */
  function fill(queue: MappedFileQueue, value: number) {
    const file = queue.getLastMappedFile(0)!
    file.appendWith((target, pos, room) => {
      target.fill(value, pos, pos + room)
      return { wroteBytes: room }
    })
    expect(file.isFull()).toBe(true)
    return file
  }

  function budgetOf(maxBytes: number): MappingBudget {
    return new MappingBudget({ maxBytes, idleMs: 60_000, clock: () => 0 })
  }

  it('the file being written is outside the budget; a file the writer left joins it once flushed, and only then may be unmapped', () => {
    const budget = budgetOf(0)
    const queue = openQueue(tempDir('mqstore-lazylog-'), budget)
    const first = fill(queue, 1)
    expect(budget.mappedFiles).toBe(0)
    const second = fill(queue, 2)
    // The writer moved on, but the first file is not flushed: the flusher must find it mapped,
    // and counting it would only push out files that can be unmapped.
    expect(budget.mappedFiles).toBe(0)
    expect(budget.shrink(0)).toBe(0)
    expect(first.isMapped).toBe(true)
    expect(queue.flush(0)).toBe(false)
    expect(first.flushedPosition).toBe(SIZE)
    // Flushed: counted now (not as a map), and unmapped as soon as the budget needs room.
    expect(budget.mappedFiles).toBe(1)
    expect(budget.mappedBytes).toBe(SIZE)
    expect(budget.maps).toBe(0)
    expect(budget.shrink(0)).toBe(1)
    expect(first.isMapped).toBe(false)
    expect(second.isMapped).toBe(true)
    // Flushing the unmapped first file again does nothing and maps nothing.
    expect(first.flush(0)).toBe(SIZE)
    expect(first.isMapped).toBe(false)
    // The next read maps it again, with the bytes written before.
    const view = queue.findMappedFileByOffset(10)!.selectMappedBuffer(10, 4)!
    expect([...view.buffer]).toEqual([1, 1, 1, 1])
    expect(budget.maps).toBe(1)
    expect(budget.mappedFiles).toBe(1)
    view.release()
  })

  it('a held view keeps its file mapped past the budget; once released the file is unmapped and the kept view reads as empty, never as freed memory', () => {
    const budget = budgetOf(0)
    const queue = openQueue(tempDir('mqstore-lazylog-'), budget)
    fill(queue, 7)
    fill(queue, 8)
    queue.flush(0)
    const view = queue.findMappedFileByOffset(0)!.selectMappedBuffer(0, 16)!
    expect(budget.shrink(0)).toBe(0)
    expect(view.buffer.readUInt8(15)).toBe(7)
    view.release()
    expect(budget.shrink(0)).toBe(1)
    expect(view.buffer.length).toBe(0)
  })

  it('with a transient store pool, a left file is not counted nor idle until its write buffer is committed and flushed', () => {
    const budget = budgetOf(0)
    const pool = new TransientStorePool(2, SIZE)
    const queue = openQueue(tempDir('mqstore-lazylog-'), budget, pool)
    const first = fill(queue, 3)
    fill(queue, 4)
    expect(first.hasWriteBuffer()).toBe(true)
    expect(budget.shrink(0)).toBe(0)
    queue.commit(0)
    expect(first.hasWriteBuffer()).toBe(false)
    // Committed with positional writes, not flushed yet.
    expect(budget.mappedFiles).toBe(0)
    expect(budget.shrink(0)).toBe(0)
    queue.flush(0)
    expect(budget.mappedFiles).toBe(1)
    expect(budget.shrink(0)).toBe(1)
    const view = first.selectMappedBuffer(SIZE - 4, 4)!
    expect([...view.buffer]).toEqual([3, 3, 3, 3])
    view.release()
  })

  it('files found at open start outside the budget and join it when recovery truncates; a truncation back into an old file takes that file out again', () => {
    const dir = tempDir('mqstore-lazylog-')
    const budget = budgetOf(1 << 30)
    let queue = openQueue(dir, budget)
    for (let value = 1; value <= 4; value++) fill(queue, value)
    queue.flush(0)
    queue.shutdown(0)
    queues.splice(0)
    queue = openQueue(dir, budget)
    expect(queue.mappedFiles).toHaveLength(4)
    // Recovery reads the last two files before it knows where the log ends.
    expect(queue.mappedFiles[2].readableBuffer()[0]).toBe(3)
    expect(queue.mappedFiles[3].readableBuffer()[0]).toBe(4)
    expect(budget.mappedFiles).toBe(0)
    queue.truncateDirtyFiles(4 * SIZE)
    // The third file joins the budget mapped (not counted as a map); the last stays outside.
    expect(budget.mappedFiles).toBe(1)
    expect(budget.maps).toBe(0)
    expect(budget.shrink(0)).toBe(1)
    expect(queue.mappedFiles[2].isMapped).toBe(false)
    // Cut back into the second file: it becomes the file being written, outside the budget.
    expect(queue.mappedFiles[1].readableBuffer()[0]).toBe(2)
    expect(budget.mappedFiles).toBe(1)
    queue.truncateDirtyFiles(SIZE + 100)
    expect(queue.mappedFiles).toHaveLength(2)
    expect(budget.mappedFiles).toBe(0)
    expect(queue.mappedFiles[1].wrotePosition).toBe(100)
    expect(budget.shrink(0)).toBe(0)
    expect(queue.mappedFiles[1].isMapped).toBe(true)
  })
})

describe('sealed compaction-log segments', () => {
  const T = 'compacted'
  const SEGMENT = 4096
  const config: TopicConfig = { ...TOPIC_CONFIG_DEFAULTS, cleanupPolicy: 'compact', segmentBytes: SEGMENT, minCleanableDirtyRatio: 0 }
  const services: CompactionService[] = []
  afterEach(async () => {
    for (const s of services.splice(0)) await s.close()
  })

  function openService(dir: string, clock: ManualClock, bytes: MappingBudget): CompactionService {
    const s = new CompactionService(join(dir, 'compaction'), clock, () => config, { enabled: false, fileDeleteDelayMs: 0 }, bytes)
    s.open()
    services.push(s)
    return s
  }

  /** `rounds` values of 10 keys, about 14 records of 280 B per 4 KiB file. */
  function put(s: CompactionService, clock: ManualClock, rounds: number): void {
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < 10; k++) {
        const offset = s.maxOffset(T, 0)
        const { request, bytes } = makeRecord(T, 0, offset, `key-${k}`, `value-${k}-round-${r}-${'x'.repeat(120)}`, clock.now())
        s.dispatch(request, bytes)
        clock.advance(1)
      }
    }
  }

  it('a reopened log maps no sealed file; reads map them within the bytes budget, a lease keeps its file mapped, and idle files are unmapped by the sweep', async () => {
    const dir = tempDir('mqstore-lazylog-')
    const clock = new ManualClock()
    const bytes = new MappingBudget({ maxBytes: 2 * SEGMENT, idleMs: 1_000, clock: () => clock.now() })
    let s = openService(dir, clock, bytes)
    put(s, clock, 12)
    const expected = readAll(s, T, 0)
    expect(expected).toHaveLength(120)
    await s.close()
    services.splice(0)
    s = openService(dir, clock, bytes)
    const segments = s.logOf(T, 0)!.segments
    expect(segments.length).toBeGreaterThan(6)
    // The open scanned every file, and unmapped each sealed one again.
    expect(bytes.mappedFiles).toBe(0)
    expect(s.stats().mappedFiles).toBe(0)
    const mapsBefore = bytes.maps

    const lease = segments[0].acquire()!
    expect(bytes.mappedFiles).toBe(1)
    expect(readAll(s, T, 0)).toEqual(expected)
    // Every sealed file was mapped once; only two fit in the budget (the held one among them).
    expect(bytes.maps - mapsBefore).toBe(segments.length - 1)
    expect(bytes.mappedBytes).toBeLessThanOrEqual(2 * SEGMENT)
    expect(segments[0].isMapped).toBe(true)
    expect(lease.data.readInt32BE(0)).toBe(segments[0].sizeAt(0))
    clock.advance(2_000)
    bytes.sweep()
    expect(segments[0].isMapped).toBe(true)
    lease.release()
    bytes.sweep()
    expect(bytes.mappedFiles).toBe(0)
    expect(s.stats().mappedFiles).toBe(0)
    expect(segments.slice(0, -1).some((segment) => segment.isMapped)).toBe(false)
    // Mapped again on the next read, with the same records; cleaning works through the budget too.
    expect(readAll(s, T, 0)).toEqual(expected)
    await s.compact()
    const latest = readAll(s, T, 0)
    // Fewer records, the latest value of every key among them (the active file is not cleaned).
    expect(latest.length).toBeLessThan(expected.length)
    const lastOf = (records: typeof expected) => new Map(records.map((r) => [r.key, r.value]))
    expect(lastOf(latest)).toEqual(lastOf(expected))
    expect(bytes.mappedBytes).toBeLessThanOrEqual(2 * SEGMENT)
  })

  it('a sealed file renamed after an idle unmap is mapped again under its new name', () => {
    const dir = tempDir('mqstore-lazylog-')
    const clock = new ManualClock()
    const bytes = new MappingBudget({ maxBytes: 1 << 30, idleMs: 1_000, clock: () => clock.now() })
    const s = openService(dir, clock, bytes)
    put(s, clock, 4)
    const segment = s.logOf(T, 0)!.segments[0]
    const first = segment.acquire()!
    const copy = Buffer.from(first.data)
    first.release()
    clock.advance(2_000)
    expect(bytes.sweep()).toBe(1)
    expect(segment.isMapped).toBe(false)
    segment.rename(`${segment.path}.moved`)
    const again = segment.acquire()!
    expect(Buffer.compare(again.data, copy)).toBe(0)
    again.release()
  })

  it('a store maps the sealed files of a compacted queue only while they are read, and unmaps them once idle', async () => {
    const dir = tempDir('mqstore-lazylog-')
    const clock = new ManualClock(Date.now())
    const options: OpenOptions = {
      ...BASE,
      clock,
      mappingIdleMs: 1_000,
      flushIntervalConsumeQueue: 10,
      topics: { [T]: { cleanupPolicy: 'compact', segmentBytes: SEGMENT, minCleanableDirtyRatio: 0 } },
      compaction: { enabled: false, fileDeleteDelayMs: 0 },
    }
    let store = await MessageStore.open(dir, options)
    try {
      for (let n = 0; n < 200; n++) {
        const r = await store.putMessage({ topic: T, queueId: 0, body: `v${n}-${'x'.repeat(120)}`, keys: `key-${n % 10}` })
        expect(r.status).toBe('PUT_OK')
      }
    } finally {
      await store.close()
    }
    store = await MessageStore.open(dir, options)
    try {
      expect(store.stats().compaction.mappedFiles).toBe(0)
      const bodies: string[] = []
      for (let from = 0; from < 200; ) {
        const got = store.getMessage('g', T, 0, from, 32)
        expect(got.status).toBe('FOUND')
        for (const m of got.messages) bodies.push(Buffer.from(m.body).toString().split('-')[0])
        from = got.nextBeginOffset
      }
      expect(bodies).toEqual(Array.from({ length: 200 }, (_, n) => `v${n}`))
      expect(store.stats().compaction.mappedFiles).toBeGreaterThan(0)
      clock.advance(2_000)
      await vi.waitFor(() => expect(store.stats().compaction.mappedFiles).toBe(0), { timeout: 10_000, interval: 10 })
    } finally {
      await store.close()
    }
  })
})
