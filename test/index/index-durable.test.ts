// The durable prefix of the index file being written (lib/store/index/index-durable.ts): the mark a
// sync of its entry table leaves, and what open keeps of the file after a power cut, checked
// against a file built from the same records alone.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { decodeMark, encodeMark, MARK_SIZE, type IndexDurableMark } from '../../lib/store/index/index-durable.js'
import { IndexFile, indexEntriesStart, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE } from '../../lib/store/index/index-file.js'
import { IndexService } from '../../lib/store/index/index-service.js'
import { tempDir } from '../helpers/tmp.js'

const T0 = new Date(2024, 0, 15, 10, 0, 0, 0).getTime()
const SLOTS = 64
const ENTRIES = 4000

let root: string
const files: IndexFile[] = []

beforeEach(() => {
  root = tempDir()
})
afterEach(() => {
  for (const file of files.splice(0)) file.shutdown()
  fs.rmSync(root, { recursive: true, force: true })
})

/** Record r (at commit-log offset 1000 + 100 r, a second apart every 50) has 1 to 3 keys. */
function keysOf(r: number): string[] {
  return Array.from({ length: 1 + (r % 3) }, (_, k) => `key-${r}-${k}`)
}

function build(name: string, records: number): IndexFile {
  const file = IndexFile.create(join(root, name), SLOTS, ENTRIES, 1000, T0)
  files.push(file)
  for (let r = 0; r < records; r++) for (const key of keysOf(r)) file.putKey(key, 1000 + 100 * r, T0 + Math.floor(r / 50) * 1000)
  return file
}

function slotTable(file: IndexFile): Buffer {
  file.flush()
  return fs.readFileSync(file.fileName).subarray(INDEX_HEADER_SIZE, indexEntriesStart(SLOTS))
}

/**
 * Unmaps `file` once its warm-ups on the libuv pool are over: a file is changed behind a mapping
 * only when nothing maps it (shrinking a mapped file would fault whatever touches the pages).
 */
async function release(file: IndexFile): Promise<void> {
  await file.settle()
  file.shutdown()
  files.splice(files.indexOf(file), 1)
}

/** Writes `bytes` over the file in place (never truncated, never shorter). */
function overwrite(path: string, bytes: Buffer): void {
  const fd = fs.openSync(path, 'r+')
  try {
    fs.writeSync(fd, bytes, 0, bytes.length, 0)
  } finally {
    fs.closeSync(fd)
  }
}

/** The file as a power cut may leave it (entries past `keep` lost, slots and counts scrambled), opened again. */
async function cut(file: IndexFile, keep: number): Promise<IndexFile> {
  file.flush()
  await release(file)
  const bytes = fs.readFileSync(file.fileName)
  bytes.fill(0, indexEntriesStart(SLOTS) + (keep + 1) * INDEX_ENTRY_SIZE)
  for (let pos = INDEX_HEADER_SIZE; pos < indexEntriesStart(SLOTS); pos += 4) bytes.writeInt32BE((pos * 7919) % ENTRIES, pos)
  bytes.writeInt32BE(ENTRIES - 1, 36)
  overwrite(file.fileName, bytes)
  const again = IndexFile.open(file.fileName, SLOTS, ENTRIES)
  files.push(again)
  return again
}

function found(file: IndexFile, key: string): number[] {
  const out: number[] = []
  file.selectPhyOffset(out, key, 16, 0, Number.MAX_SAFE_INTEGER)
  return out
}

describe('the mark', () => {
  const mark: IndexDurableMark = {
    fileName: '20240115100000000',
    entries: 123_456,
    lastPhyOffset: 2 ** 40 + 7,
    beginPhyOffset: 2 ** 33,
    beginTimestamp: T0,
  }

  it('reads back as written, and a damaged or foreign one reads as none', () => {
    const bytes = encodeMark(mark)
    expect(bytes.length).toBe(MARK_SIZE)
    expect(decodeMark(bytes)).toEqual(mark)
    for (const at of [0, 5, 20, 40, MARK_SIZE - 1]) {
      const damaged = Buffer.from(bytes)
      damaged[at] ^= 0x10
      expect(decodeMark(damaged)).toBeNull()
    }
    expect(decodeMark(bytes.subarray(0, MARK_SIZE - 1))).toBeNull()
    expect(decodeMark(Buffer.alloc(MARK_SIZE))).toBeNull()
    expect(decodeMark(encodeMark({ ...mark, entries: 0 }))).toBeNull()
    expect(decodeMark(encodeMark({ ...mark, fileName: 'index-file-000000' }))).toBeNull()
  })

  it('names whole records only: the last record is left out when its keys run past the synced bytes', () => {
    const file = build('20240115100000000', 300)
    const start = indexEntriesStart(SLOTS)
    // Records 0, 1, 2 have 1, 2, 3 keys: entries 1 | 2 3 | 4 5 6 | 7 ...
    const upTo = (entries: number) => start + (entries + 1) * INDEX_ENTRY_SIZE
    expect(file.durableMark(upTo(6))?.entries).toBe(6)
    expect(file.durableMark(upTo(5))?.entries).toBe(3)
    expect(file.durableMark(upTo(4))?.entries).toBe(3)
    expect(file.durableMark(upTo(1))?.entries).toBe(1)
    expect(file.durableMark(upTo(0))).toBeNull()
    const mark = file.durableMark(upTo(6))!
    expect(mark.lastPhyOffset).toBe(1000 + 100 * 2)
    expect(mark.beginPhyOffset).toBe(1000)
    expect(mark.beginTimestamp).toBe(T0)
    // Every entry written: the mark stops at the last one, which ends its record.
    expect(file.durableMark(file.entriesEnd() + 4096)?.entries).toBe(file.getIndexCount() - 1)
  })
})

describe('keepDurablePrefix', () => {
  // Below 1,024 kept entries the slot table is reserved page by page as the rebuild writes it and
  // cleared slot by slot; from there it is reserved whole first and cleared in one fill.
  it.each([
    { built: 900, synced: 1000, more: 1200 },
    { built: 1500, synced: 2400, more: 1800 },
  ])(
    'keeps the marked entries and rebuilds the slots a file of those records alone has, byte for byte ($synced entries synced)',
    async ({ built, synced, more }) => {
      const file = build('20240115100000000', built)
      const mark = file.durableMark(indexEntriesStart(SLOTS) + synced * INDEX_ENTRY_SIZE)!
      expect(mark.entries).toBeGreaterThan(synced - 4)
      const after = await cut(file, mark.entries)
      expect(after.keepDurablePrefix(mark)).toBe(true)
      expect(after.getIndexCount()).toBe(mark.entries + 1)
      expect(after.getEndPhyOffset()).toBe(mark.lastPhyOffset)
      const records = (mark.lastPhyOffset - 1000) / 100 + 1
      const alone = build('20240115100000001', records)
      expect(alone.getIndexCount()).toBe(after.getIndexCount())
      expect(slotTable(after).equals(slotTable(alone))).toBe(true)
      expect(after.getHashSlotCount()).toBe(alone.getHashSlotCount())
      // The end time covers the last record's second.
      expect(after.getEndTimestamp()).toBeGreaterThanOrEqual(alone.getEndTimestamp())
      expect(after.getEndTimestamp()).toBeLessThan(alone.getEndTimestamp() + 1000)
      for (let r = 0; r < built; r++) {
        for (const key of keysOf(r)) expect(found(after, key)).toEqual(r < records ? [1000 + 100 * r] : [])
      }
      // The file goes on from there as the file built alone does.
      for (const f of [after, alone])
        for (let r = records; r < more; r++) for (const key of keysOf(r)) f.putKey(key, 1000 + 100 * r, T0 + r)
      after.flush()
      alone.flush()
      const body = (f: IndexFile) => fs.readFileSync(f.fileName).subarray(16)
      expect(body(after).equals(body(alone))).toBe(true)
    },
  )

  it('refuses a mark the file does not bear out, whatever part of it is wrong', async () => {
    const file = build('20240115100000000', 600)
    const mark = file.durableMark(indexEntriesStart(SLOTS) + 800 * INDEX_ENTRY_SIZE)!
    file.flush()
    const pristine = fs.readFileSync(file.fileName)
    await release(file)
    const entryAt = (entry: number) => indexEntriesStart(SLOTS) + entry * INDEX_ENTRY_SIZE
    const cases: [string, Partial<IndexDurableMark>, (bytes: Buffer) => void][] = [
      ['another file', { fileName: '20240115100000009' }, () => {}],
      ['more entries than the file holds', { entries: ENTRIES }, () => {}],
      ['another last offset', { lastPhyOffset: mark.lastPhyOffset + 100 }, () => {}],
      ['another begin offset', { beginPhyOffset: 999 }, () => {}],
      ['a header the cut zeroed', {}, (b) => b.fill(0, 0, INDEX_HEADER_SIZE)],
      ['a lost page inside the prefix', {}, (b) => b.fill(0, entryAt(100), entryAt(300))],
      ['offsets out of order', {}, (b) => b.writeBigInt64BE(BigInt(10 ** 9), entryAt(50) + 4)],
      ['a chain link that a rebuild would not write', {}, (b) => b.writeInt32BE(b.readInt32BE(entryAt(400) + 16) + 1, entryAt(400) + 16)],
      ['a key hash moved to another slot', {}, (b) => b.writeInt32BE(b.readInt32BE(entryAt(500)) + 1, entryAt(500))],
    ]
    for (const [what, change, damage] of cases) {
      const bytes = Buffer.from(pristine)
      damage(bytes)
      overwrite(file.fileName, bytes)
      const again = IndexFile.open(file.fileName, SLOTS, ENTRIES)
      files.push(again)
      expect(again.keepDurablePrefix({ ...mark, ...change }), what).toBe(false)
      await release(again)
    }
  })
})

describe('IndexService.load after a power cut, with a mark', () => {
  /** A service over `dir` whose 1,000 records of one key each fill three files of 400 entries. */
  function written(dir: string, markPath: string): { service: IndexService; names: string[] } {
    const service = new IndexService(dir, { maxHashSlotNum: 64, maxIndexNum: 400, messageIndexEnable: true, markPath })
    service.load(true, 0)
    for (let r = 0; r < 1000; r++) {
      service.buildIndex({
        topic: 't',
        commitLogOffset: 1000 + 100 * r,
        storeTimestamp: T0 + r * 10,
        keys: `k${r}`,
        uniqKey: undefined,
        sysFlag: 0,
      })
    }
    service.flush()
    const names = service.getFiles().map((f) => f.fileName)
    expect(names.length).toBe(3)
    return { service, names }
  }

  function reopen(dir: string, markPath: string, indexMsgTimestamp: number): IndexService {
    const service = new IndexService(dir, { maxHashSlotNum: 64, maxIndexNum: 400, messageIndexEnable: true, markPath })
    service.load(false, indexMsgTimestamp)
    return service
  }

  const found = (service: IndexService, r: number) => service.queryOffset('t', `k${r}`, 4, 0, Number.MAX_SAFE_INTEGER).phyOffsets

  it('keeps the marked entries of the first file newer than the checkpoint and deletes the files after it', async () => {
    const dir = join(root, 'index')
    const markPath = join(root, 'indexmark')
    const { service, names } = written(dir, markPath)
    const [first, second] = service.getFiles()
    // The checkpoint knows the first file flushed (its roll); the mark names 300 entries of the second.
    const checkpoint = first.getEndTimestamp()
    const mark = second.durableMark(indexEntriesStart(64) + 301 * INDEX_ENTRY_SIZE)!
    expect(mark.entries).toBe(300)
    fs.writeFileSync(markPath, encodeMark(mark))
    service.shutdown()
    const after = reopen(dir, markPath, checkpoint)
    try {
      await after.deletionsDone()
      expect(after.getFiles().map((f) => f.fileName)).toEqual(names.slice(0, 2))
      expect(after.getFiles()[1].getIndexCount()).toBe(301)
      // Records 0-398 in the first file, 399-698 kept in the second; the rest are indexed again later.
      for (const r of [0, 398, 399, 698]) expect(found(after, r)).toEqual([1000 + 100 * r])
      for (const r of [699, 999]) expect(found(after, r)).toEqual([])
      expect(fs.existsSync(names[2])).toBe(false)
    } finally {
      after.shutdown()
    }
  })

  it('keeps nothing newer when the mark names a later file than the first newer one, or none at all', async () => {
    for (const variant of ['later file', 'no mark']) {
      const dir = join(root, variant)
      const markPath = join(root, `${variant}.mark`)
      const { service, names } = written(dir, markPath)
      const [first, , third] = service.getFiles()
      if (variant === 'later file') fs.writeFileSync(markPath, encodeMark(third.durableMark(third.entriesEnd())!))
      service.shutdown()
      const after = reopen(dir, markPath, first.getEndTimestamp())
      try {
        await after.deletionsDone()
        expect(
          after.getFiles().map((f) => f.fileName),
          variant,
        ).toEqual(names.slice(0, 1))
      } finally {
        after.shutdown()
      }
    }
  })
})
