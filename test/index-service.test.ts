import * as fs from 'node:fs'
import { basename, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { MQStoreError } from '../lib/errors.js'
import {
  formatIndexFileName,
  IndexFile,
  indexFileSize,
  indexKeyHash,
  javaStringHashCode,
  parseIndexFileName,
} from '../lib/store/index/index-file.js'
import { IndexService, MAX_MSGS_NUM_BATCH, type IndexDispatch, type IndexServiceOptions } from '../lib/store/index/index-service.js'
import { tempDir } from './helpers/tmp.js'

// Small files so that slot chains and rolls happen with a handful of keys:
// 4 slots, 8 entries => 40 + 16 + 160 = 216 bytes, 7 usable entries per file.
const SLOTS = 4
const ENTRIES = 8
const FILE_SIZE = 216
const ENTRIES_AT = 40 + SLOTS * 4

const T0 = new Date(2024, 0, 15, 10, 0, 0, 0).getTime()
const ALL_TIME: [number, number] = [0, Number.MAX_SAFE_INTEGER]

const PREPARED = 0x1 << 2
const COMMIT = 0x2 << 2
const ROLLBACK = 0x3 << 2

let root: string
let dir: string
const services: IndexService[] = []

beforeEach(() => {
  root = tempDir()
  dir = join(root, 'index')
})
afterEach(() => {
  vi.useRealTimers()
  for (const service of services.splice(0)) service.shutdown()
  fs.rmSync(root, { recursive: true, force: true })
})

function open(options: Partial<IndexServiceOptions> = {}, indexDir = dir): IndexService {
  const service = new IndexService(indexDir, {
    maxHashSlotNum: SLOTS,
    maxIndexNum: ENTRIES,
    messageIndexEnable: true,
    ...options,
  })
  services.push(service)
  return service
}

function msg(commitLogOffset: number, storeTimestamp: number, keys?: string, extra: Partial<IndexDispatch> = {}): IndexDispatch {
  return { topic: 'TopicTest', commitLogOffset, storeTimestamp, keys, uniqKey: undefined, sysFlag: 0, ...extra }
}

function offsets(service: IndexService, key: string, maxNum = 64, begin = ALL_TIME[0], end = ALL_TIME[1]): number[] {
  return service.queryOffset('TopicTest', key, maxNum, begin, end).phyOffsets
}

/** Java's String.hashCode computed independently with BigInt arithmetic. */
function referenceHash(s: string): number {
  let h = 0n
  for (let i = 0; i < s.length; i++) h = (h * 31n + BigInt(s.charCodeAt(i))) & 0xffffffffn
  return Number(BigInt.asIntN(32, h))
}

function long(buf: Buffer, pos: number): number {
  return Number(buf.readBigInt64BE(pos))
}

function header(buf: Buffer) {
  return {
    beginTimestamp: long(buf, 0),
    endTimestamp: long(buf, 8),
    beginPhyOffset: long(buf, 16),
    endPhyOffset: long(buf, 24),
    hashSlotCount: buf.readInt32BE(32),
    indexCount: buf.readInt32BE(36),
  }
}

function entry(buf: Buffer, k: number, entriesAt = ENTRIES_AT) {
  const pos = entriesAt + k * 20
  return {
    keyHash: buf.readInt32BE(pos),
    phyOffset: long(buf, pos + 4),
    timeDiff: buf.readInt32BE(pos + 12),
    prevIndex: buf.readInt32BE(pos + 16),
  }
}

function slot(buf: Buffer, s: number): number {
  return buf.readInt32BE(40 + s * 4)
}

describe('key hash and file names', () => {
  it('hash like Java String.hashCode, with abs(MIN_VALUE) as 0', () => {
    // Values printed by a JVM.
    expect(javaStringHashCode('hello')).toBe(99162322)
    expect(javaStringHashCode('TopicTest#OrderID188')).toBe(-1231271670)
    expect(indexKeyHash('TopicTest#OrderID188')).toBe(1231271670)
    expect(javaStringHashCode('TopicTest#日本')).toBe(3577705)
    expect(javaStringHashCode('polygenelubricants')).toBe(-2147483648)
    expect(indexKeyHash('polygenelubricants')).toBe(0)
    expect(javaStringHashCode('Aa')).toBe(javaStringHashCode('BB'))
    expect(javaStringHashCode('')).toBe(0)
    const samples = ['', 'a', 'TopicTest#k1', 'x'.repeat(1000), '\u{1F600}emoji', '\uffff\u0000\ud800']
    for (let i = 0; i < 200; i++)
      samples.push(
        Math.random()
          .toString(36)
          .repeat(1 + (i % 7)),
      )
    for (const s of samples) expect(javaStringHashCode(s)).toBe(referenceHash(s))
  })

  it('names files by local time yyyyMMddHHmmssSSS', () => {
    const t = new Date(2024, 0, 31, 23, 59, 59, 123).getTime()
    expect(formatIndexFileName(t)).toBe('20240131235959123')
    expect(formatIndexFileName(new Date(2024, 1, 3, 4, 5, 6, 7).getTime())).toBe('20240203040506007')
    expect(parseIndexFileName('20240131235959123')).toBe(t)
    expect(parseIndexFileName('2024013123595912')).toBeNull()
    expect(parseIndexFileName('20240131235959123.tmp')).toBeNull()
  })

  it('checks the file size formula and the 2 GiB limit of a Java mapping', () => {
    expect(indexFileSize(5_000_000, 20_000_000)).toBe(420_000_040)
    expect(indexFileSize(SLOTS, ENTRIES)).toBe(FILE_SIZE)
    expect(() => indexFileSize(0, 8)).toThrow(RangeError)
    expect(() => indexFileSize(4, 1)).toThrow(RangeError)
    expect(() => indexFileSize(4, 200_000_000)).toThrow(RangeError)
  })
})

describe('IndexFile', () => {
  it('writes header, slots and entries at the offsets of the RocketMQ layout', () => {
    const path = join(root, formatIndexFileName(T0))
    const file = IndexFile.create(path, SLOTS, ENTRIES)
    expect(fs.statSync(path).size).toBe(FILE_SIZE)
    // TopicTest#k1 (hash 2746024) and TopicTest#k5 (hash 2746028) share slot 0; #k2 is in slot 1.
    expect(file.putKey('TopicTest#k1', 1234, T0)).toBe(true)
    expect(file.putKey('TopicTest#k5', 5678, T0 + 2500)).toBe(true)
    expect(file.putKey('TopicTest#k2', 9_007_199_254_740_000, T0 + 3_999)).toBe(true)
    file.flush()
    const buf = fs.readFileSync(path)
    expect(buf.length).toBe(FILE_SIZE)
    expect(header(buf)).toEqual({
      beginTimestamp: T0,
      endTimestamp: T0 + 3_999,
      beginPhyOffset: 1234,
      endPhyOffset: 9_007_199_254_740_000,
      hashSlotCount: 2,
      indexCount: 4,
    })
    expect([slot(buf, 0), slot(buf, 1), slot(buf, 2), slot(buf, 3)]).toEqual([2, 3, 0, 0])
    expect(buf.subarray(ENTRIES_AT, ENTRIES_AT + 20).equals(Buffer.alloc(20))).toBe(true) // entry 0 unused
    // The first entry of a fresh file: beginTimestamp was still 0, so its diff is 0.
    expect(entry(buf, 1)).toEqual({ keyHash: 2746024, phyOffset: 1234, timeDiff: 0, prevIndex: 0 })
    expect(entry(buf, 2)).toEqual({ keyHash: 2746028, phyOffset: 5678, timeDiff: 2, prevIndex: 1 })
    expect(entry(buf, 3)).toEqual({ keyHash: 2746025, phyOffset: 9_007_199_254_740_000, timeDiff: 3, prevIndex: 0 })
    expect(buf.subarray(ENTRIES_AT + 4 * 20).equals(Buffer.alloc(FILE_SIZE - ENTRIES_AT - 80))).toBe(true)
    // Exact bytes of entry 1: 0x0029E6A8 | 0x00000000000004D2 | 0 | 0.
    expect(buf.subarray(ENTRIES_AT + 20, ENTRIES_AT + 40).toString('hex')).toBe('0029e6a8' + '00000000000004d2' + '00000000' + '00000000')
    file.shutdown()
  })

  it('header fields reach the mapping as they change, before any flush', () => {
    const path = join(root, formatIndexFileName(T0))
    const file = IndexFile.create(path, SLOTS, ENTRIES)
    file.putKey('TopicTest#OrderID188', 77, T0)
    // The same shared mapping seen through the file: no flush was needed for the page cache.
    const buf = fs.readFileSync(path)
    expect(header(buf)).toEqual({
      beginTimestamp: T0,
      endTimestamp: T0,
      beginPhyOffset: 77,
      endPhyOffset: 77,
      hashSlotCount: 1,
      indexCount: 2,
    })
    expect(slot(buf, 1231271670 % SLOTS)).toBe(1)
    expect(entry(buf, 1).keyHash).toBe(1231271670)
    file.shutdown()
  })

  it('a file that follows another starts from its end values; the first diff uses them, and the first entry reads back at the begin time', () => {
    const path = join(root, formatIndexFileName(T0))
    const file = IndexFile.create(path, SLOTS, ENTRIES, 5000, T0)
    let buf = fs.readFileSync(path)
    expect(header(buf)).toEqual({
      beginTimestamp: T0,
      endTimestamp: T0,
      beginPhyOffset: 5000,
      endPhyOffset: 5000,
      hashSlotCount: 0,
      indexCount: 0, // RocketMQ writes the count at the first put or flush
    })
    file.flush()
    expect(header(fs.readFileSync(path)).indexCount).toBe(1)
    expect(file.putKey('TopicTest#k1', 5100, T0 + 3700)).toBe(true)
    buf = fs.readFileSync(path)
    // diff = 3 s against the inherited begin time (RocketMQ's bytes), then the begin time becomes the entry's own.
    expect(entry(buf, 1).timeDiff).toBe(3)
    expect(header(buf).beginTimestamp).toBe(T0 + 3700)
    expect(header(buf).beginPhyOffset).toBe(5100)
    // The first entry reads back at the begin time, its own, not 3 s after it.
    const out: number[] = []
    file.selectPhyOffset(out, 'TopicTest#k1', 10, T0 + 6700, T0 + 6700)
    expect(out).toEqual([])
    file.selectPhyOffset(out, 'TopicTest#k1', 10, T0 + 3700, T0 + 3700)
    expect(out).toEqual([5100])
    file.shutdown()
  })

  it('clamps the time diff to [0, 2^31 - 1] seconds', () => {
    const file = IndexFile.create(join(root, formatIndexFileName(T0)), SLOTS, ENTRIES)
    file.putKey('a', 1, T0)
    file.putKey('b', 2, T0 - 10_000)
    file.putKey('c', 3, T0 + 2 ** 31 * 1000 + 5000)
    file.putKey('d', 4, T0 + 1999)
    file.flush()
    const buf = fs.readFileSync(file.fileName)
    expect([1, 2, 3, 4].map((k) => entry(buf, k).timeDiff)).toEqual([0, 0, 2 ** 31 - 1, 1])
    file.shutdown()
  })

  it('round-trips keys, is full at indexNum - 1 entries and matches time ranges', () => {
    const file = IndexFile.create(join(root, formatIndexFileName(T0)), SLOTS, ENTRIES)
    for (let i = 0; i < ENTRIES - 1; i++) {
      expect(file.isWriteFull()).toBe(false)
      expect(file.putKey(`TopicTest#key${i % 3}`, 100 + i, T0 + i * 1000)).toBe(true)
    }
    expect(file.isWriteFull()).toBe(true)
    expect(file.getIndexCount()).toBe(ENTRIES)
    expect(file.putKey('TopicTest#key0', 999, T0 + 9000)).toBe(false)
    const out: number[] = []
    file.selectPhyOffset(out, 'TopicTest#key0', 10, ...ALL_TIME)
    expect(out).toEqual([106, 103, 100])
    out.length = 0
    file.selectPhyOffset(out, 'TopicTest#key1', 1, ...ALL_TIME)
    expect(out).toEqual([104])
    file.selectPhyOffset(out, 'TopicTest#missing', 10, ...ALL_TIME)
    expect(out).toEqual([104])

    expect(file.getBeginTimestamp()).toBe(T0)
    expect(file.getEndTimestamp()).toBe(T0 + 6000)
    expect(file.getBeginPhyOffset()).toBe(100)
    expect(file.getEndPhyOffset()).toBe(106)
    expect(file.isTimeMatched(T0 - 10, T0 + 10_000)).toBe(true) // covers the file
    expect(file.isTimeMatched(T0 + 3000, T0 + 10_000)).toBe(true) // begin inside
    expect(file.isTimeMatched(T0 - 10_000, T0 + 10)).toBe(true) // end inside
    expect(file.isTimeMatched(T0 + 6001, T0 + 10_000)).toBe(false)
    expect(file.isTimeMatched(T0 - 10_000, T0 - 1)).toBe(false)
    file.shutdown()
  })

  it('chains share a slot; other hashes in the slot are skipped, equal hashes are returned', () => {
    const file = IndexFile.create(join(root, formatIndexFileName(T0)), SLOTS, ENTRIES)
    expect(indexKeyHash('T#Aa')).toBe(indexKeyHash('T#BB'))
    // Find a key in the same slot as T#Aa but with another hash.
    let other = ''
    for (let i = 0; other === ''; i++) {
      const candidate = `T#x${i}`
      const h = indexKeyHash(candidate)
      if (h % SLOTS === indexKeyHash('T#Aa') % SLOTS && h !== indexKeyHash('T#Aa')) other = candidate
    }
    file.putKey('T#Aa', 10, T0)
    file.putKey(other, 20, T0)
    file.putKey('T#BB', 30, T0)
    file.putKey(other, 40, T0)
    expect(file.getHashSlotCount()).toBe(1)
    const out: number[] = []
    file.selectPhyOffset(out, 'T#Aa', 10, ...ALL_TIME)
    expect(out).toEqual([30, 10])
    out.length = 0
    file.selectPhyOffset(out, 'T#BB', 10, ...ALL_TIME)
    expect(out).toEqual([30, 10])
    out.length = 0
    file.selectPhyOffset(out, other, 10, ...ALL_TIME)
    expect(out).toEqual([40, 20])
    file.shutdown()
  })

  it('a key whose Java hash is Integer.MIN_VALUE is stored with hash 0 in slot 0', () => {
    const file = IndexFile.create(join(root, formatIndexFileName(T0)), SLOTS, ENTRIES)
    file.putKey('polygenelubricants', 42, T0)
    file.flush()
    const buf = fs.readFileSync(file.fileName)
    expect(slot(buf, 0)).toBe(1)
    expect(entry(buf, 1).keyHash).toBe(0)
    const out: number[] = []
    file.selectPhyOffset(out, 'polygenelubricants', 10, ...ALL_TIME)
    expect(out).toEqual([42])
    file.shutdown()
  })

  it('refuses a file whose size does not match the dimensions', () => {
    const path = join(root, formatIndexFileName(T0))
    fs.writeFileSync(path, Buffer.alloc(FILE_SIZE + 4))
    expect(() => IndexFile.open(path, SLOTS, ENTRIES)).toThrow(expect.objectContaining({ code: 'BAD_FILE_SIZE' }))
    fs.writeFileSync(path, Buffer.alloc(FILE_SIZE))
    expect(() => IndexFile.open(path, SLOTS + 1, ENTRIES)).toThrow(expect.objectContaining({ code: 'BAD_FILE_SIZE' }))
  })
})

describe('IndexService', () => {
  it('indexes UNIQ_KEY and every KEYS token as topic#key', () => {
    const service = open()
    service.buildIndex(msg(100, T0, ' k1  日本 k2 ', { uniqKey: 'UNIQ-1' }))
    service.buildIndex(msg(200, T0 + 1000, 'k2'))
    service.buildIndex(msg(300, T0 + 2000, '', { uniqKey: 'UNIQ-3' }))
    service.buildIndex(msg(400, T0 + 3000, undefined, { topic: 'Other' }))
    expect(offsets(service, 'UNIQ-1')).toEqual([100])
    expect(offsets(service, 'k1')).toEqual([100])
    expect(offsets(service, '日本')).toEqual([100])
    expect(offsets(service, 'k2')).toEqual([200, 100])
    expect(offsets(service, 'UNIQ-3')).toEqual([300])
    expect(offsets(service, '')).toEqual([])
    expect(service.queryOffset('Other', 'k2', 10, ...ALL_TIME).phyOffsets).toEqual([])
    const file = service.getFiles()[0]
    expect(file.getIndexCount()).toBe(1 + 6) // UNIQ-1, k1, 日本, k2, k2, UNIQ-3
  })

  it('the streamed hash of topic#key equals the hash of the built string', () => {
    const service = open({ maxHashSlotNum: 1009, maxIndexNum: 4096 })
    const keys: string[] = []
    for (let i = 0; i < 300; i++) keys.push(`${Math.random().toString(36).slice(2)}\u00e9${i}`)
    for (let i = 0; i < keys.length; i++) service.buildIndex(msg(i * 10, T0, keys[i]))
    const file = service.getFiles()[0]
    for (let i = 0; i < keys.length; i++) {
      const out: number[] = []
      file.selectPhyOffset(out, `TopicTest#${keys[i]}`, 64, ...ALL_TIME)
      expect(out).toContain(i * 10)
    }
  })

  it('rolls full files; queries walk every file newest first, up to maxNum', async () => {
    const service = open()
    const rolled: number[] = []
    service.onRoll = (endTimestamp) => rolled.push(endTimestamp)
    for (let i = 0; i < 20; i++) service.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'same'))
    expect(service.getFileCount()).toBe(3) // 7 + 7 + 6
    const files = service.getFiles()
    expect(files.map((f) => f.getIndexCount())).toEqual([8, 8, 7])
    // Each new header starts from the end of the one before it, then takes its first entry.
    expect(files[1].getBeginPhyOffset()).toBe(1000 + 7 * 100)
    expect(files[2].getBeginTimestamp()).toBe(T0 + 14_000)
    const expected = Array.from({ length: 20 }, (_, i) => 1000 + (19 - i) * 100)
    expect(offsets(service, 'same')).toEqual(expected)
    expect(offsets(service, 'same', 10)).toEqual(expected.slice(0, 10))
    expect(offsets(service, 'same', 7)).toEqual(expected.slice(0, 7))
    const result = service.queryOffset('TopicTest', 'same', 3, ...ALL_TIME)
    expect(result.indexLastUpdateTimestamp).toBe(T0 + 19_000)
    expect(result.indexLastUpdatePhyoffset).toBe(1000 + 19 * 100)

    await service.waitForRollFlushes()
    expect(rolled).toEqual([T0 + 6000, T0 + 13_000])
    expect(service.lastFlushError).toBeNull()
    const names = service.getFiles().map((f) => basename(f.fileName))
    expect(fs.readdirSync(dir).sort()).toEqual(names)
    expect([...names].sort()).toEqual(names)
  })

  it('filters by time in whole seconds from each file header', () => {
    const service = open()
    service.buildIndex(msg(10, T0, 'k')) // fresh file: diff 0, read back as T0
    service.buildIndex(msg(20, T0 + 1500, 'k')) // diff 1: read back as T0 + 1000
    service.buildIndex(msg(30, T0 + 2999, 'k')) // diff 2: T0 + 2000
    service.buildIndex(msg(40, T0 + 10_000, 'k')) // diff 10: T0 + 10000
    expect(offsets(service, 'k', 64, T0 + 1000, T0 + 2000)).toEqual([30, 20])
    expect(offsets(service, 'k', 64, T0 + 1001, T0 + 10_000)).toEqual([40, 30])
    // The exact store time of message 20 misses it: it reads back 500 ms earlier.
    expect(offsets(service, 'k', 64, T0 + 1500, T0 + 1500)).toEqual([])
    expect(offsets(service, 'k', 64, T0 + 10_001, T0 + 20_000)).toEqual([])
    expect(offsets(service, 'k', 64, T0 - 5000, T0 - 1)).toEqual([])
  })

  it('skips files outside the time range and stops below the begin time', () => {
    const service = open()
    for (let i = 0; i < 20; i++) service.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'same'))
    // File 2 holds messages 7..13 and begins at T0 + 7 s; message 7's diff was taken against the
    // previous file's end (T0 + 6 s), but as its file's first entry it reads back at T0 + 7 s, its own time.
    const from8 = offsets(service, 'same', 64, T0 + 8000, Number.MAX_SAFE_INTEGER)
    expect(from8).toEqual(Array.from({ length: 12 }, (_, i) => 1000 + (19 - i) * 100))
    expect(offsets(service, 'same', 64, T0 + 7000, T0 + 7000)).toEqual([1700])
    // Only the oldest file overlaps [T0, T0 + 3 s].
    expect(offsets(service, 'same', 64, T0, T0 + 3000)).toEqual([1300, 1200, 1100, 1000])
    // A range that falls between two entries of the newest file.
    expect(offsets(service, 'same', 64, T0 + 15_500, T0 + 15_900)).toEqual([])
  })

  it('caps maxNum at 64', () => {
    const service = open({ maxHashSlotNum: 16, maxIndexNum: 1000 })
    for (let i = 0; i < 100; i++) service.buildIndex(msg(i, T0 + i, 'hot'))
    expect(MAX_MSGS_NUM_BATCH).toBe(64)
    const got = offsets(service, 'hot', 1000)
    expect(got.length).toBe(64)
    expect(got[0]).toBe(99)
    expect(got[63]).toBe(36)
    expect(offsets(service, 'hot', 5)).toEqual([99, 98, 97, 96, 95])
    expect(offsets(service, 'hot', 0)).toEqual([])
  })

  it('does not index rolled-back transaction records', () => {
    const service = open()
    service.buildIndex(msg(100, T0, 'tx', { sysFlag: PREPARED, uniqKey: 'U1' }))
    service.buildIndex(msg(200, T0, 'tx', { sysFlag: COMMIT }))
    service.buildIndex(msg(300, T0, 'tx', { sysFlag: ROLLBACK | 0x1, uniqKey: 'U3' }))
    service.buildIndex(msg(400, T0, 'tx', { sysFlag: 0x1 })) // compressed, not transactional
    expect(offsets(service, 'tx')).toEqual([400, 200, 100])
    expect(offsets(service, 'U3')).toEqual([])
    expect(offsets(service, 'U1')).toEqual([100])
  })

  it('skips replayed records below the current file end offset', () => {
    const service = open()
    for (let i = 0; i < 5; i++) service.buildIndex(msg(100 * i, T0 + i, 'r'))
    const file = service.getFiles()[0]
    expect(file.getIndexCount()).toBe(6)
    for (let i = 0; i < 4; i++) service.buildIndex(msg(100 * i, T0 + i, 'r'))
    expect(file.getIndexCount()).toBe(6)
    // Unlike RocketMQ, the record at exactly endPhyOffset (the last one indexed) is not indexed again.
    service.buildIndex(msg(400, T0 + 4, 'r'))
    expect(file.getIndexCount()).toBe(6)
    expect(offsets(service, 'r')).toEqual([400, 300, 200, 100, 0])
    service.buildIndex(msg(500, T0 + 5, 'r'))
    expect(offsets(service, 'r')).toEqual([500, 400, 300, 200, 100, 0])
  })

  it('does nothing when message indexing is disabled', () => {
    const service = open({ messageIndexEnable: false })
    service.buildIndex(msg(100, T0, 'k'))
    expect(service.getFileCount()).toBe(0)
    expect(fs.existsSync(dir)).toBe(false)
    expect(service.queryOffset('TopicTest', 'k', 10, ...ALL_TIME)).toEqual({
      phyOffsets: [],
      indexLastUpdateTimestamp: 0,
      indexLastUpdatePhyoffset: 0,
    })
  })

  it('reopen reads everything back and keeps writing into the last file', () => {
    const first = open()
    for (let i = 0; i < 10; i++) first.buildIndex(msg(1000 + i * 100, T0 + i * 1000, `k${i % 2}`, { uniqKey: `U${i}` }))
    const before = first.getFiles().map((f) => ({
      name: f.fileName,
      begin: f.getBeginTimestamp(),
      end: f.getEndTimestamp(),
      beginPhy: f.getBeginPhyOffset(),
      endPhy: f.getEndPhyOffset(),
      slots: f.getHashSlotCount(),
      count: f.getIndexCount(),
    }))
    first.flush()
    first.shutdown()

    const again = open()
    again.load(true, 0)
    expect(
      again.getFiles().map((f) => ({
        name: f.fileName,
        begin: f.getBeginTimestamp(),
        end: f.getEndTimestamp(),
        beginPhy: f.getBeginPhyOffset(),
        endPhy: f.getEndPhyOffset(),
        slots: f.getHashSlotCount(),
        count: f.getIndexCount(),
      })),
    ).toEqual(before)
    expect(offsets(again, 'k0')).toEqual([1800, 1600, 1400, 1200, 1000])
    expect(offsets(again, 'U7')).toEqual([1700])
    const last = again.getFiles()[again.getFileCount() - 1]
    const count = last.getIndexCount()
    again.buildIndex(msg(2000, T0 + 10_000, 'k0'))
    expect(again.getFileCount()).toBe(before.length)
    expect(last.getIndexCount()).toBe(count + 1)
    expect(offsets(again, 'k0')).toEqual([2000, 1800, 1600, 1400, 1200, 1000])
  })

  it('after an abnormal exit deletes files that end after indexMsgTimestamp', async () => {
    const service = open({ maxIndexNum: 4 }) // 3 entries per file
    const rolled: number[] = []
    service.onRoll = (t) => rolled.push(t)
    for (let i = 0; i < 9; i++) service.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'k'))
    await service.waitForRollFlushes()
    expect(rolled).toEqual([T0 + 2000, T0 + 5000])
    const names = service.getFiles().map((f) => f.fileName)
    expect(names.length).toBe(3)
    service.shutdown() // no flush: the page cache still has everything

    const recovered = open({ maxIndexNum: 4 })
    recovered.load(false, rolled[rolled.length - 1])
    expect(recovered.getFiles().map((f) => f.fileName)).toEqual(names.slice(0, 2))
    expect(fs.existsSync(names[2])).toBe(false)
    expect(offsets(recovered, 'k')).toEqual([1500, 1400, 1300, 1200, 1100, 1000])
    // Recovery dispatches again; what the kept files cover, their end offset included, is skipped.
    for (let i = 0; i < 9; i++) recovered.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'k'))
    expect(offsets(recovered, 'k')).toEqual([1800, 1700, 1600, 1500, 1400, 1300, 1200, 1100, 1000])
    recovered.flush()
    recovered.shutdown()

    // A clean exit keeps every file whatever the checkpoint says.
    const clean = open({ maxIndexNum: 4 })
    clean.load(true, 0)
    expect(clean.getFileCount()).toBe(3)
    clean.shutdown()
    // An abnormal exit before any roll was recorded loses them all.
    const lost = open({ maxIndexNum: 4 })
    lost.load(false, 0)
    expect(lost.getFileCount()).toBe(0)
    // Gone from their names at once; deleted on the libuv pool (leftovers named .tmp until then).
    expect(fs.readdirSync(dir).filter((name) => !name.endsWith('.tmp'))).toEqual([])
    await lost.deletionsDone()
    expect(fs.readdirSync(dir)).toEqual([])
  })

  it('regression: the keys of one record never straddle a roll, so a crash that drops the newer file cannot lose some of them', async () => {
    const service = open({ maxIndexNum: 4 }) // 3 entries per file
    const rolled: number[] = []
    service.onRoll = (t) => rolled.push(t)
    service.buildIndex(msg(1000, T0, 'a'))
    service.buildIndex(msg(1100, T0 + 1000, 'b'))
    // Two keys, one free entry: both go to a new file (before, 'c1' ended the first file and 'c2'
    // began the second; replays skip the record at the first file's end, so 'c2' was lost).
    service.buildIndex(msg(1200, T0 + 2000, 'c1 c2'))
    service.buildIndex(msg(1300, T0 + 3000, 'd'))
    await service.waitForRollFlushes()
    expect(rolled).toEqual([T0 + 1000])
    service.shutdown()

    const recovered = open({ maxIndexNum: 4 })
    recovered.load(false, rolled[0])
    for (const [offset, time, keys] of [
      [1000, T0, 'a'],
      [1100, T0 + 1000, 'b'],
      [1200, T0 + 2000, 'c1 c2'],
      [1300, T0 + 3000, 'd'],
    ] as const) {
      recovered.buildIndex(msg(offset, time, keys))
    }
    for (const [key, offset] of [
      ['a', 1000],
      ['b', 1100],
      ['c1', 1200],
      ['c2', 1200],
      ['d', 1300],
    ] as const) {
      expect(offsets(recovered, key)).toEqual([offset])
    }
  })

  it('regression: load drops trailing files without entries, so the last file is one that indexes something', async () => {
    const service = open({ maxIndexNum: 4 })
    for (let i = 0; i < 3; i++) service.buildIndex(msg(1000 + i * 100, T0 + i * 1000, `k${i}`))
    service.buildIndex(msg(1300, T0 + 3000, 'k3'))
    await service.waitForRollFlushes()
    const [full, second] = service.getFiles()
    service.shutdown()
    // The second file's header as a power cut may leave it: zeros (no entries).
    const fd = fs.openSync(second.fileName, 'r+')
    fs.writeSync(fd, Buffer.alloc(40), 0, 40, 0)
    fs.closeSync(fd)
    const again = open({ maxIndexNum: 4 })
    again.load(true, 0)
    expect(again.getFiles().map((f) => f.fileName)).toEqual([full.fileName])
    expect(again.getFiles()[0].getEndPhyOffset()).toBe(1200)
    expect(fs.existsSync(second.fileName)).toBe(false)
  })

  it('a roll that cannot wait for the file being made ahead makes its own, and the other is deleted when made', async () => {
    const service = open()
    service.makeFileAhead()
    // No file yet and the made one not ready: buildIndex (which never waits) rolls one itself.
    expect(service.fileBeingMade()).not.toBeNull()
    service.buildIndex(msg(100, T0, 'k'))
    const [own] = service.getFiles().map((file) => basename(file.fileName))
    await service.settle()
    expect(fs.readdirSync(dir)).toEqual([own])
    expect(service.fileBeingMade()).toBeNull()
    expect(offsets(service, 'k')).toEqual([100])
  })

  it('load removes leftover .tmp files and refuses wrong sizes and foreign names', () => {
    const service = open()
    service.buildIndex(msg(100, T0, 'k'))
    service.flush()
    service.shutdown()
    fs.writeFileSync(join(dir, '20990101000000000.tmp'), Buffer.alloc(10))
    const again = open()
    again.load(true, 0)
    expect(again.getFileCount()).toBe(1)
    expect(fs.readdirSync(dir).some((n) => n.endsWith('.tmp'))).toBe(false)
    again.shutdown()

    // A short last file whose header is zeros is a creation a crash cut short (made ahead, see
    // index-file-ahead.ts): removed. Short with a header written is damage: refused.
    fs.writeFileSync(join(dir, '20990101000000000'), Buffer.alloc(FILE_SIZE - 1))
    const cut = open()
    cut.load(true, 0)
    expect(cut.getFileCount()).toBe(1)
    expect(fs.existsSync(join(dir, '20990101000000000'))).toBe(false)
    cut.shutdown()
    const damaged = Buffer.alloc(FILE_SIZE - 1)
    damaged[7] = 1
    fs.writeFileSync(join(dir, '20990101000000000'), damaged)
    const bad = open()
    expect(() => bad.load(true, 0)).toThrow(expect.objectContaining({ code: 'BAD_FILE_SIZE' }))
    expect(bad.getFileCount()).toBe(0)
    fs.rmSync(join(dir, '20990101000000000'))

    fs.writeFileSync(join(dir, 'README'), 'x')
    const foreign = open()
    expect(() => foreign.load(true, 0)).toThrow(MQStoreError)
    expect(() => foreign.load(true, 0)).toThrow(expect.objectContaining({ code: 'BAD_FILE_NAME' }))
  })

  it('load of a missing directory finds nothing', () => {
    const service = open()
    service.load(false, 0)
    expect(service.getFileCount()).toBe(0)
  })

  it('deleteExpiredFile deletes old files in order and never the newest', async () => {
    const service = open({ maxIndexNum: 4 })
    for (let i = 0; i < 9; i++) service.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'k'))
    const names = service.getFiles().map((f) => f.fileName)
    expect(service.getFiles().map((f) => f.getEndPhyOffset())).toEqual([1200, 1500, 1800])
    service.deleteExpiredFile(1200)
    expect(service.getFileCount()).toBe(3)
    // The background flush started by the roll still holds the first file: deletion waits for a
    // later pass (the file is already closed to readers).
    service.deleteExpiredFile(1201)
    expect(service.getFileCount()).toBe(3)
    expect(fs.existsSync(names[0])).toBe(true)
    await service.waitForRollFlushes()
    service.deleteExpiredFile(1201)
    expect(service.getFiles().map((f) => f.fileName)).toEqual(names.slice(1))
    expect(fs.existsSync(names[0])).toBe(false)
    service.deleteExpiredFile(Number.MAX_SAFE_INTEGER)
    expect(service.getFiles().map((f) => f.fileName)).toEqual(names.slice(2))
    expect(fs.readdirSync(dir)).toEqual([basename(names[2])])
    expect(offsets(service, 'k')).toEqual([1800, 1700, 1600])
    service.buildIndex(msg(1900, T0 + 9000, 'k'))
    expect(service.getFileCount()).toBe(2)
  })

  it('gives files created in the same millisecond distinct names and never overwrites one', () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(T0)
    fs.mkdirSync(dir, { recursive: true })
    // A stray file already holds the name the first roll would take.
    const stray = join(dir, formatIndexFileName(T0))
    fs.writeFileSync(stray, 'not mine')
    const service = open({ maxIndexNum: 2 }) // one entry per file: every message rolls
    for (let i = 0; i < 5; i++) service.buildIndex(msg(i * 10, T0, 'k'))
    expect(fs.readFileSync(stray, 'utf8')).toBe('not mine')
    const names = service.getFiles().map((f) => basename(f.fileName))
    expect(names).toEqual([1, 2, 3, 4, 5].map((d) => formatIndexFileName(T0 + d)))
    // The clock steps back: new names still sort after the newest file.
    vi.setSystemTime(T0 - 60_000)
    service.buildIndex(msg(50, T0, 'k'))
    expect(basename(service.getFiles()[5].fileName)).toBe(formatIndexFileName(T0 + 6))
    vi.setSystemTime(T0 + 3_600_000)
    service.buildIndex(msg(60, T0, 'k'))
    expect(basename(service.getFiles()[6].fileName)).toBe(formatIndexFileName(T0 + 3_600_000))
    expect(offsets(service, 'k')).toEqual([60, 50, 40, 30, 20, 10, 0])
  })

  it('reports a file that cannot be created after retrying', () => {
    fs.writeFileSync(dir, 'a file where the directory should be')
    const service = open()
    let error: unknown
    try {
      service.buildIndex(msg(100, T0, 'k'))
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(MQStoreError)
    expect((error as MQStoreError).code).toBe('IO_ERROR')
    expect(service.getFileCount()).toBe(0)
  })

  it('read-only: queries work, writes are refused, nothing is deleted', () => {
    const writer = open({ maxIndexNum: 4 })
    for (let i = 0; i < 5; i++) writer.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'k'))
    writer.flush()
    writer.shutdown()
    const reader = open({ maxIndexNum: 4, readOnly: true })
    reader.load(false, 0)
    expect(reader.getFileCount()).toBe(2)
    expect(offsets(reader, 'k')).toEqual([1400, 1300, 1200, 1100, 1000])
    expect(() => reader.buildIndex(msg(1500, T0, 'k'))).toThrow(TypeError)
    reader.deleteExpiredFile(Number.MAX_SAFE_INTEGER)
    reader.destroy()
    expect(fs.readdirSync(dir).length).toBe(2)
  })

  it('shutdown closes the service; destroy deletes every file', () => {
    const service = open({ maxIndexNum: 4 })
    for (let i = 0; i < 5; i++) service.buildIndex(msg(i, T0, 'k'))
    service.destroy()
    expect(fs.readdirSync(dir)).toEqual([])
    expect(() => service.buildIndex(msg(9, T0, 'k'))).toThrow(expect.objectContaining({ code: 'STORE_CLOSED' }))
    expect(() => offsets(service, 'k')).toThrow(expect.objectContaining({ code: 'STORE_CLOSED' }))
  })

  it('validates its dimensions', () => {
    expect(() => open({ maxIndexNum: 1 })).toThrow(RangeError)
    expect(() => open({ maxHashSlotNum: 0 })).toThrow(RangeError)
  })
})

describe('IndexService load: files must cover the log in order', () => {
  it('refuses overlapping files (left by a rebuild cut short) with CORRUPTION, so the store rebuilds', () => {
    const first = open({ maxIndexNum: 4 })
    for (let i = 0; i < 6; i++) first.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'k'))
    first.flush()
    first.shutdown()
    // A second run of files over the same offsets, named after the first.
    const copy = fs.mkdtempSync(join(dir, '..', 'copy-'))
    const again = open({ maxIndexNum: 4 }, copy)
    for (let i = 0; i < 6; i++) again.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'k'))
    again.flush()
    again.shutdown()
    for (const name of fs.readdirSync(copy)) fs.renameSync(join(copy, name), join(dir, `2099${name.slice(4)}`))
    fs.rmSync(copy, { recursive: true, force: true })
    const both = open({ maxIndexNum: 4 })
    expect(() => both.load(true, 0)).toThrow(expect.objectContaining({ code: 'CORRUPTION' }))
  })

  it('after a crash, drops the first file newer than the checkpoint and every file after it', () => {
    const service = open({ maxIndexNum: 4 })
    for (let i = 0; i < 9; i++) service.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'k'))
    service.flush()
    const names = service.getFiles().map((f) => f.fileName)
    const ends = service.getFiles().map((f) => f.getEndTimestamp())
    service.shutdown()
    const recovered = open({ maxIndexNum: 4 })
    recovered.load(false, ends[0])
    expect(recovered.getFiles().map((f) => f.fileName)).toEqual(names.slice(0, 1))
    // Replays resume right after the newest kept entry, without indexing it twice.
    for (let i = 0; i < 9; i++) recovered.buildIndex(msg(1000 + i * 100, T0 + i * 1000, 'k'))
    expect(offsets(recovered, 'k')).toEqual([1800, 1700, 1600, 1500, 1400, 1300, 1200, 1100, 1000])
  })
})
