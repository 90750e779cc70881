// A new consume queue's file is megabytes long (6 MB in RocketMQ) but holds a page at first. JavaScript gets an
// ArrayBuffer over only the part reserved so far, widened as the reservation grows: V8 counts the
// length of every ArrayBuffer towards the memory it collects for, and thousands of new queues
// counted at 6 MB each set off a full collection every few dozen queues.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

import { interposeMappings } from '../helpers/map-handle.js'
import { tempDir } from '../helpers/tmp.js'
import { native, type MapHandle } from '../../lib/native.js'
import { MappedFile } from '../../lib/store/mapped/mapped-file.js'
import { MessageStore, type OpenOptions } from '../../lib/store/message-store.js'
import { CQ_RESERVE_FIRST_BYTES } from '../../lib/store/queue/consume-queue.js'

const QUEUE_FILE = 300_000 * 20
const OPTIONS: OpenOptions = {
  flushDiskType: 'ASYNC_FLUSH',
  mappedFileSizeCommitLog: 8 << 20,
  mappedFileSizeConsumeQueue: QUEUE_FILE,
  messageIndexEnable: false,
}
const FIRST = Math.ceil(CQ_RESERVE_FIRST_BYTES / native.pageSize) * native.pageSize

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function body(i: number): Buffer {
  return Buffer.from(`message-${i}`.padEnd(40, '.'))
}

describe("a new consume queue's file is exposed to JavaScript as far as it is reserved", () => {
  it('starts at the first reservation, widens with the queue, and every unit reads back before and after a reopen', async () => {
    const queueFiles: MapHandle[] = []
    cleanups.push(
      interposeMappings((handle, length) => {
        if (length === QUEUE_FILE) queueFiles.push(handle)
        return handle
      }),
    )
    const dir = tempDir('mqstore-queue-exposure-')
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    let store = await MessageStore.open(dir, OPTIONS)
    cleanups.push(() => store.close())

    for (let i = 0; i < 10; i++) expect((await store.putMessage({ topic: 'grow', queueId: 0, body: body(i) })).status).toBe('PUT_OK')
    expect(store.getMaxOffsetInQueue('grow', 0)).toBe(10)
    expect(queueFiles).toHaveLength(1)
    const handle = queueFiles[0]
    const first = handle.buffer
    expect(first.byteLength).toBe(FIRST)
    expect(handle.length).toBe(QUEUE_FILE)

    // 5,000 units (100 KB) need more than the first reservation and the first 64 KiB chunk.
    for (let from = 10; from < 5_000; from += 500) {
      const batch = Array.from({ length: Math.min(500, 5_000 - from) }, (_, k) => ({ topic: 'grow', queueId: 0, body: body(from + k) }))
      for (const result of await store.putMessages(batch)) expect(result.status).toBe('PUT_OK')
      // Read as it grows: each read ends in the part exposed last.
      const read = store.getMessage('g', 'grow', 0, from - 5, 32)
      expect(read.status).toBe('FOUND')
      expect(read.messages[0].body.equals(body(from - 5))).toBe(true)
    }
    expect(handle.buffer.byteLength).toBeGreaterThanOrEqual(5_000 * 20)
    expect(handle.buffer.byteLength).toBeLessThan(QUEUE_FILE)
    // The first buffer still covers its page (the store keeps no view of it, but nothing freed it).
    expect(first.byteLength).toBe(FIRST)

    const readAll = (s: MessageStore) => {
      let seen = 0
      for (let offset = 0; offset < 5_000; ) {
        const r = s.getMessage('g', 'grow', 0, offset, 32)
        expect(r.status).toBe('FOUND')
        for (const m of r.messages) {
          expect(m.queueOffset).toBe(offset)
          expect(m.body.equals(body(offset))).toBe(true)
          offset++
          seen++
        }
      }
      return seen
    }
    expect(readAll(store)).toBe(5_000)
    await store.close()
    expect(first.byteLength).toBe(0)
    expect(handle.buffer.byteLength).toBe(0)

    // Reopened, the queue's file is mapped on first use: its end is checked where the close
    // recorded it, and what is read is exposed, not the whole file.
    queueFiles.length = 0
    store = await MessageStore.open(dir, OPTIONS)
    expect(store.getMaxOffsetInQueue('grow', 0)).toBe(5_000)
    expect(readAll(store)).toBe(5_000)
    expect(queueFiles).toHaveLength(1)
    expect(queueFiles[0].buffer.byteLength).toBeGreaterThanOrEqual(5_000 * 20)
    expect(queueFiles[0].buffer.byteLength).toBeLessThan(QUEUE_FILE)
    expect(store.stats().repairs).toEqual([])
  })

  it('a reopened queue whose units were cut behind its recorded end is still found short and rebuilt', async () => {
    const dir = tempDir('mqstore-queue-exposure-')
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    let store = await MessageStore.open(dir, OPTIONS)
    const batch = Array.from({ length: 300 }, (_, i) => ({ topic: 'cut', queueId: 1, body: body(i) }))
    for (const result of await store.putMessages(batch)) expect(result.status).toBe('PUT_OK')
    await store.close()
    // The last ten units zeroed: the recorded end (300) no longer holds.
    const file = join(dir, 'consumequeue', 'cut', '1', '00000000000000000000')
    const fd = fs.openSync(file, 'r+')
    fs.writeSync(fd, Buffer.alloc(200), 0, 200, 290 * 20)
    fs.closeSync(fd)
    store = await MessageStore.open(dir, OPTIONS)
    cleanups.push(() => store.close())
    expect(store.getMaxOffsetInQueue('cut', 1)).toBe(300)
    const read = store.getMessage('g', 'cut', 1, 290, 32)
    expect(read.messages.map((m) => m.body.toString())).toEqual(batch.slice(290).map((m) => m.body.toString()))
    expect(store.stats().repairs.map((r) => r.reason)).toEqual([expect.stringContaining('not at the 300 the last clean close recorded')])
  })
})

describe('MappedFile over a handle that exposes its reserved part only', () => {
  async function partFile(dir: string): Promise<MappedFile> {
    const name = join(dir, '00000000000000000000')
    const options = { reserveChunkBytes: 64 << 10, reserveFirstBytes: 4096, syncOnFirstFlush: true }
    const handle = await native.createMapped(name, QUEUE_FILE, FIRST, 0, FIRST)
    return MappedFile.create(name, QUEUE_FILE, options, handle)
  }

  it('widens for a reservation, for positions set past it, and for whole-file access', async () => {
    const dir = tempDir('mqstore-exposed-file-')
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    const file = await partFile(dir)
    cleanups.push(() => file.shutdown(0))
    expect(file.reservedBuffer().length).toBe(FIRST)

    const generation = file.mapGeneration
    expect(file.reserve(FIRST + 100)).toBe(true)
    expect(file.reservedBuffer().length).toBeGreaterThanOrEqual(file.reservedPosition)
    expect(file.mapGeneration).toBeGreaterThan(generation)

    // Positions set past the reserved part (a queue cut or filled during recovery) are readable.
    file.setPositions(200_000)
    const held = file.selectMappedBuffer(199_980, 20)
    expect(held?.buffer.length).toBe(20)
    held?.release()
    expect(file.readableBuffer().length).toBe(200_000)

    // Whole-file readers get the whole file.
    expect(file.mappedBuffer().length).toBe(QUEUE_FILE)
    expect(file.reservedBuffer().length).toBe(QUEUE_FILE)
  })
})
