// Disk blocks are reserved in chunks ahead of the writer: files keep RocketMQ's sizes, a new store
// takes a few MB, and disk use follows the data.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { native } from '../lib/native.js'
import { MappedFile } from '../lib/store/mapped/mapped-file.js'
import { RESERVE_WIDE_CHUNKS, RESERVE_WIDEN_AFTER } from '../lib/store/mapped/mapped-file-types.js'
import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { MessageStore } from '../lib/store/message-store.js'
import { tempDir } from './helpers/tmp.js'

const MiB = 1024 * 1024

let dir: string
beforeEach(() => {
  dir = tempDir('mqstore-reserve-')
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

/** Bytes the files under `root` take on disk (allocated blocks, not logical sizes). */
function diskBytes(root: string): number {
  let total = 0
  for (const entry of fs.readdirSync(root, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += fs.statSync(join(entry.parentPath, entry.name)).blocks * 512
  }
  return total
}

describe('chunked reservation of a mapped file', () => {
  it('reserves the first chunk at creation and the next when the writer comes within half a chunk', () => {
    const file = MappedFile.create(join(dir, formatOffsetName(0)), 8 * MiB, { reserveChunkBytes: MiB })
    try {
      expect(fs.statSync(file.fileName).size).toBe(8 * MiB)
      expect(file.reservedPosition).toBe(MiB)
      expect(fs.statSync(file.fileName).blocks * 512).toBeLessThan(MiB + 64 * 1024)
      // Still more than half a chunk ahead: nothing to do.
      expect(file.reserve(MiB / 2)).toBe(true)
      expect(file.reservedPosition).toBe(MiB)
      // Within half a chunk of the end: the chunk after the one holding the end is reserved too.
      expect(file.reserve(MiB / 2 + 1)).toBe(true)
      expect(file.reservedPosition).toBe(2 * MiB)
      expect(fs.statSync(file.fileName).blocks * 512).toBeGreaterThanOrEqual(2 * MiB)
      // A write larger than a chunk is covered whole.
      expect(file.reserve(5 * MiB + 3)).toBe(true)
      expect(file.reservedPosition).toBe(7 * MiB)
      expect(file.reserve(8 * MiB)).toBe(true)
      expect(file.reservedPosition).toBe(8 * MiB)
    } finally {
      file.shutdown(0)
    }
  })

  it(`once ${RESERVE_WIDEN_AFTER} chunks are reserved, each step is ${RESERVE_WIDE_CHUNKS} chunks (fewer warm-ups on the pool)`, () => {
    const chunk = 64 * 1024
    const file = MappedFile.create(join(dir, formatOffsetName(0)), 8 * MiB, { reserveChunkBytes: chunk })
    try {
      const steps: number[] = []
      for (let end = 0; end <= 4 * MiB; end += 4096) {
        const before = file.reservedPosition
        expect(file.reserve(end)).toBe(true)
        if (file.reservedPosition !== before) steps.push(file.reservedPosition - before)
      }
      expect(RESERVE_WIDE_CHUNKS).toBeGreaterThan(1)
      const narrow = steps.slice(0, RESERVE_WIDEN_AFTER - 1)
      expect(narrow.every((step) => step === chunk)).toBe(true)
      expect(steps.slice(RESERVE_WIDEN_AFTER - 1).every((step) => step === RESERVE_WIDE_CHUNKS * chunk)).toBe(true)
      expect(steps.length).toBeGreaterThan(RESERVE_WIDEN_AFTER + 4)
      // The reservation stays within a wide step of the writer, and blocks follow it.
      expect(file.reservedPosition).toBeLessThanOrEqual(4 * MiB + 2 * RESERVE_WIDE_CHUNKS * chunk)
      expect(fs.statSync(file.fileName).blocks * 512).toBeGreaterThanOrEqual(4 * MiB)
    } finally {
      file.shutdown(0)
    }
  })

  it('with a first step, the reservation starts at one page and doubles with the data up to the chunk', () => {
    const page = native.pageSize
    const file = MappedFile.create(join(dir, formatOffsetName(0)), 8 * MiB, { reserveChunkBytes: 16 * page, reserveFirstBytes: 1 })
    try {
      expect(file.reservedPosition).toBe(page)
      expect(fs.statSync(file.fileName).blocks * 512).toBeLessThanOrEqual(page)
      expect(file.reserve(page / 2)).toBe(true)
      expect(file.reservedPosition).toBe(page)
      // Each step is as large as what is reserved already: 1, 2, 4, 8, 16 pages, then 16 at a time.
      const steps: number[] = []
      for (let end = 0; end <= 64 * page; end += 20) {
        const before = file.reservedPosition
        expect(file.reserve(end)).toBe(true)
        expect(file.reservedPosition).toBeGreaterThanOrEqual(end)
        if (file.reservedPosition !== before) steps.push((file.reservedPosition - before) / page)
      }
      expect(steps.slice(0, 5)).toEqual([1, 2, 4, 8, 16])
      expect(new Set(steps.slice(4))).toEqual(new Set([16]))
      expect(fs.statSync(file.fileName).blocks * 512).toBeGreaterThanOrEqual(file.reservedPosition)
    } finally {
      file.shutdown(0)
    }
  })

  it('a file without a chunk size is reserved whole at creation', () => {
    const file = MappedFile.create(join(dir, formatOffsetName(0)), 2 * MiB)
    try {
      expect(file.reservedPosition).toBe(2 * MiB)
      expect(fs.statSync(file.fileName).blocks * 512).toBeGreaterThanOrEqual(2 * MiB)
    } finally {
      file.shutdown(0)
    }
  })

  it('a chunked file opened again re-reserves from its start on the first write', () => {
    const name = join(dir, formatOffsetName(0))
    MappedFile.create(name, 8 * MiB, { reserveChunkBytes: MiB }).shutdown(0)
    const file = MappedFile.open(name, 8 * MiB, { reserveChunkBytes: MiB })
    try {
      expect(file.reservedPosition).toBe(0)
      expect(file.reserve(3 * MiB)).toBe(true)
      expect(file.reservedPosition).toBe(4 * MiB)
      expect(fs.statSync(name).blocks * 512).toBeGreaterThanOrEqual(4 * MiB)
    } finally {
      file.shutdown(0)
    }
  })
})

describe('a store that starts small', () => {
  it('a new store holding one message takes at most 16 MB on disk, with files of full logical size', async () => {
    const store = await MessageStore.open(dir)
    expect((await store.putMessage({ topic: 'orders', body: 'one', keys: ['order-1'] })).status).toBe('PUT_OK')
    await store.close()
    const commitLog = join(dir, 'commitlog', formatOffsetName(0))
    expect(fs.statSync(commitLog).size).toBe(128 * MiB)
    expect(fs.statSync(join(dir, 'consumequeue', 'orders', '0', formatOffsetName(0))).size).toBe(60_000 * 20)
    const [indexName] = fs.readdirSync(join(dir, 'index'))
    expect(fs.statSync(join(dir, 'index', indexName)).size).toBe(40 + 1_000_000 * 4 + 4_000_000 * 20)
    expect(diskBytes(dir)).toBeLessThanOrEqual(16 * MiB)

    // Reopening and writing again does not reserve whole files either.
    const again = await MessageStore.open(dir)
    expect((await again.putMessage({ topic: 'orders', body: 'two', keys: ['order-2'] })).status).toBe('PUT_OK')
    await again.close()
    expect(diskBytes(dir)).toBeLessThanOrEqual(16 * MiB)
  })

  it("with RocketMQ's sizes (1 GiB commit-log files, 420 MB index files) a new store takes at most 16 MB as well", async () => {
    const store = await MessageStore.open(dir, { preset: 'rocketmq' })
    expect((await store.putMessage({ topic: 'orders', body: 'one', keys: ['order-1'] })).status).toBe('PUT_OK')
    await store.close()
    expect(fs.statSync(join(dir, 'commitlog', formatOffsetName(0))).size).toBe(1024 * MiB)
    expect(diskBytes(dir)).toBeLessThanOrEqual(16 * MiB)
  })

  it('a queue of a few messages takes a page of consume queue, not a chunk: 300 queues of 4 messages', async () => {
    const store = await MessageStore.open(dir)
    for (let round = 0; round < 4; round++) {
      const results = await store.putMessages(
        Array.from({ length: 300 }, (_, q) => ({ topic: `t${q % 30}`, queueId: q % 10, body: 'small' })),
      )
      expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
    }
    await store.close()
    // One page of units per queue file (64 KiB each before), and the queue folders themselves.
    const cq = join(dir, 'consumequeue')
    expect(fs.readdirSync(cq)).toHaveLength(30)
    const page = Math.max(native.pageSize, 4096)
    expect(diskBytes(cq)).toBeLessThanOrEqual(300 * page)
  })

  it('disk use follows the data: 24 MB of messages take less than 24 MB plus 16 MB', async () => {
    const store = await MessageStore.open(dir)
    const body = Buffer.alloc(16 * 1024, 1)
    for (let batch = 0; batch < 24; batch++) {
      const results = await store.putMessages(Array.from({ length: 64 }, () => ({ topic: 't', body })))
      expect(results.every((r) => r.status === 'PUT_OK')).toBe(true)
    }
    await store.close()
    const data = 24 * 64 * body.length
    expect(diskBytes(dir)).toBeGreaterThan(data)
    expect(diskBytes(dir)).toBeLessThan(data + 16 * MiB)
  })
})
