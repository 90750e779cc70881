// One hash-index file: maps `topic#key` to the physical offsets of the messages that carry it.
// The byte layout (index-layout.ts) is RocketMQ's, so files move freely between this store and a
// Java broker. It is full when indexCount reaches indexNum, so it holds at most indexNum - 1 entries.
//
// Mapping: with a budget, an opened file is not mapped until a query walks it (or a put writes it),
// and the budget unmaps it again once idle. The header (all a query or recovery needs to choose
// files) is read at open and kept in memory; a query's results are offsets, copies that outlive an unmap.
import * as fs from 'node:fs'
import { basename } from 'node:path'

import { ioError, MQStoreError } from '../../errors.js'
import { descriptors } from '../mapped/descriptors.js'
import { MappedFile, type WriteAfterSync } from '../mapped/mapped-file.js'
import type { MappingBudget } from '../mapped/mapping-budget.js'
import { native, type MapHandle } from '../../native.js'
import { IndexReservation } from './index-reservation.js'
import { markableEntries, rebuildFromMark, type IndexDurableMark } from './index-durable.js'
import { getInt64, setInt64 } from '../bytes.js'
import {
  ENTRY_KEY_HASH_OFFSET,
  ENTRY_PHY_OFFSET_OFFSET,
  ENTRY_PREV_INDEX_OFFSET,
  ENTRY_TIME_DIFF_OFFSET,
  effectiveIndexCount,
  entryTime,
  HASH_SLOT_COUNT_OFFSET,
  INDEX_COUNT_OFFSET,
  INDEX_ENTRY_SIZE,
  indexEntriesStart,
  indexFileSize,
  indexKeyHash,
  INVALID_INDEX,
  readIndexEntry,
  readIndexHeader,
  hashSlotPosition,
  HASH_SLOT_SIZE,
  INDEX_HEADER_SIZE,
  END_TIMESTAMP_OFFSET,
  END_PHY_OFFSET_OFFSET,
  HEADER_LONG_OFFSETS,
  HEADER_LONGS,
  type HeaderLong,
  type KeyPlace,
} from './index-layout.js'

export * from './index-layout.js'

const INT_MAX = 0x7fffffff
const TWO_POW_32 = 4294967296
/** Puts between two reports of the file being written to the mapping budget. */
const WRITER_TOUCH_EVERY = 1024
/** Walks between two reports of the file being read to the mapping budget (see readView). */
const READER_TOUCH_EVERY = 256
/** Keys whose slots putKeyHashes prefetches together (one native call per run). */
const PREFETCH_RUN = 32

export interface IndexFileOpenOptions {
  readOnly?: boolean
  /** Map on first use within this budget, which unmaps the file while idle; without it, mapped from open to shutdown. */
  budget?: MappingBudget | null
}

export class IndexFile {
  readonly fileName: string
  readonly hashSlotNum: number
  readonly indexNum: number
  readonly fileSize: number
  readonly readOnly: boolean

  private readonly mappedFile: MappedFile
  /** Big-endian access to the whole mapping (see mapping()), and the mapGeneration it was taken at. */
  private view: DataView | null = null
  private viewGeneration = -1
  /** Where the entry table starts (after the header and the slot table). */
  readonly entriesStart: number
  /** Changes to the header or entries, and how many of them the last flush covered: a file with none pending is not flushed (nor mapped for it). */
  private changes = 0
  private flushedChanges = 0
  /** Puts since the budget was last told of a use (see writeView). */
  private untouchedWrites = 0
  /** Walks since the budget was last told of a use (see readView). */
  private untouchedReads = 0
  /** Blocks are reserved as pages are first written (null for a read-only file). */
  private readonly reservation: IndexReservation | null

  // The header, mirrored in memory; every change is also written to the mapping.
  private beginTimestamp = 0
  private endTimestamp = 0
  private beginPhyOffset = 0
  private endPhyOffset = 0
  private hashSlotCount = 0
  /** Slot positions of the keys putKeyHashes is about to put, as prefetch ranges (position, length). */
  private readonly slotRanges = new Float64Array(2 * PREFETCH_RUN)
  private bytes: Uint8Array = new Uint8Array(0)
  private bytesOfView: DataView | null = null
  /** Where putKeyHashes hands a key's record to writeKey (see putKeyHash). */
  private readonly place: KeyPlace = { commitLogOffset: 0, storeTimestamp: 0 }
  private indexCount = 1

  private constructor(mappedFile: MappedFile, hashSlotNum: number, indexNum: number, createdNow = false) {
    const expected = indexFileSize(hashSlotNum, indexNum)
    if (mappedFile.fileSize !== expected) {
      throw new MQStoreError(
        'BAD_FILE_SIZE',
        `${mappedFile.fileName} is ${mappedFile.fileSize} bytes; ${hashSlotNum} slots and ${indexNum} entries need ${expected}`,
      )
    }
    this.mappedFile = mappedFile
    this.fileName = mappedFile.fileName
    this.hashSlotNum = hashSlotNum
    this.indexNum = indexNum
    this.fileSize = expected
    this.readOnly = mappedFile.readOnly
    this.entriesStart = indexEntriesStart(hashSlotNum)
    this.reservation = mappedFile.readOnly ? null : new IndexReservation(mappedFile, this.entriesStart, createdNow)
    // A read-only file is read whole (its readable range is what readers may see).
    if (mappedFile.readOnly) mappedFile.setPositions(mappedFile.fileSize)
    if (createdNow) this.changes++
  }

  /**
   * The mapping, mapped now if the file is not (a lazy file's first use, or after the budget
   * unmapped it); each call also counts as a use for the budget. Callers hold the file or own it.
   */
  private mapping(): DataView {
    const mapped = this.mappedFile
    const buffer = mapped.readOnly ? mapped.readableBuffer() : mapped.mappedBuffer()
    if (this.view === null || this.viewGeneration !== mapped.mapGeneration) {
      this.view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength)
      this.viewGeneration = mapped.mapGeneration
    }
    return this.view
  }

  /**
   * The mapping for a put: the cached view while the file stays mapped, telling the budget of the
   * use only once per WRITER_TOUCH_EVERY puts (a Map update per key would cost a third of the
   * put's time; the idle time is seconds, so a rarer touch changes nothing that matters).
   */
  private writeView(): DataView {
    const view = this.view
    if (view !== null && this.viewGeneration === this.mappedFile.mapGeneration && ++this.untouchedWrites < WRITER_TOUCH_EVERY) return view
    this.untouchedWrites = 0
    return this.mapping()
  }

  /**
   * The mapping for a walk (the file is held): the cached view while the file stays mapped,
   * telling the budget of the use once per READER_TOUCH_EVERY walks, as writeView does for puts
   * (a lookup is a few memory reads; the budget's bookkeeping per walk cost as much).
   */
  private readView(): DataView {
    const view = this.view
    if (view !== null && this.viewGeneration === this.mappedFile.mapGeneration && ++this.untouchedReads < READER_TOUCH_EVERY) return view
    this.untouchedReads = 0
    return this.mapping()
  }

  /**
   * A new, zero-filled index file (`made`: made, synced and mapped ahead, index-file-ahead.ts); previous end values > 0
   * become both the begin and the end values of its header (written to the mapping at once).
   */
  static create(
    fileName: string,
    hashSlotNum: number,
    indexNum: number,
    prevEndPhyOffset = 0,
    prevEndTimestamp = 0,
    budget: MappingBudget | null = null,
    made?: MapHandle,
  ): IndexFile {
    const size = indexFileSize(hashSlotNum, indexNum)
    // Only the header page is reserved now; slots and entries get blocks as they are written.
    const mapped = MappedFile.create(fileName, size, { fileFromOffset: 0, reserveChunkBytes: native.pageSize, budget }, made, true)
    let file: IndexFile
    try {
      file = new IndexFile(mapped, hashSlotNum, indexNum, true)
    } catch (error) {
      mapped.destroy(0)
      throw error
    }
    if (prevEndPhyOffset > 0) {
      file.setLong('beginPhyOffset', prevEndPhyOffset)
      file.setLong('endPhyOffset', prevEndPhyOffset)
    }
    if (prevEndTimestamp > 0) {
      file.setLong('beginTimestamp', prevEndTimestamp)
      file.setLong('endTimestamp', prevEndTimestamp)
    }
    return file
  }

  /**
   * Opens an existing index file (which must be exactly the configured size) and reads its header
   * with a positioned read; with a budget the file is mapped only when first used.
   */
  static open(fileName: string, hashSlotNum: number, indexNum: number, options: IndexFileOpenOptions = {}): IndexFile {
    const size = indexFileSize(hashSlotNum, indexNum)
    const readOnly = options.readOnly === true
    const mapped = MappedFile.open(fileName, size, {
      fileFromOffset: 0,
      readOnly,
      reserveChunkBytes: native.pageSize,
      budget: options.budget ?? null,
    })
    let file: IndexFile
    try {
      file = new IndexFile(mapped, hashSlotNum, indexNum)
    } catch (error) {
      mapped.shutdown(0)
      throw error
    }
    try {
      file.loadHeader()
    } catch (error) {
      mapped.shutdown(0)
      throw error
    }
    return file
  }

  private loadHeader(): void {
    const bytes = Buffer.alloc(INDEX_HEADER_SIZE)
    let got = 0
    try {
      got = descriptors.use(this.fileName, false, (fd) => fs.readSync(fd, bytes, 0, INDEX_HEADER_SIZE, 0))
    } catch (cause) {
      throw ioError(`cannot read the header of ${this.fileName}`, cause)
    } finally {
      // Open reads every file's header once: their descriptors need not stay cached.
      descriptors.forget(this.fileName)
    }
    if (got !== INDEX_HEADER_SIZE) throw ioError(`short read of the header of ${this.fileName} (${got} bytes)`, null)
    const header = readIndexHeader(new DataView(bytes.buffer, bytes.byteOffset, INDEX_HEADER_SIZE))
    this.beginTimestamp = header.beginTimestamp
    this.endTimestamp = header.endTimestamp
    this.beginPhyOffset = header.beginPhyOffset
    this.endPhyOffset = header.endPhyOffset
    this.hashSlotCount = header.hashSlotCount
    this.indexCount = effectiveIndexCount(header.indexCount)
    // A count past the entry table would send readers outside the file: the header is damaged.
    if (this.indexCount > this.indexNum) {
      throw new MQStoreError(
        'CORRUPTION',
        `${this.fileName}: index count ${header.indexCount} exceeds the ${this.indexNum} entries of the file`,
      )
    }
  }

  /** Writes every header field to the mapping (before a flush, as RocketMQ does). */
  private writeHeader(): void {
    const v = this.mapping()
    for (const field of HEADER_LONGS) setInt64(v, HEADER_LONG_OFFSETS[field], this[field])
    v.setInt32(HASH_SLOT_COUNT_OFFSET, this.hashSlotCount)
    v.setInt32(INDEX_COUNT_OFFSET, this.indexCount)
  }

  /** Sets one of the header's longs, here and in the file. */
  private setLong(field: HeaderLong, value: number, v: DataView = this.mapping()): void {
    this[field] = value
    setInt64(v, HEADER_LONG_OFFSETS[field], value)
    this.changes++
  }

  // ---- header -------------------------------------------------------------------------------

  getFileName(): string {
    return this.fileName
  }

  getBeginTimestamp(): number {
    return this.beginTimestamp
  }

  getEndTimestamp(): number {
    return this.endTimestamp
  }

  getBeginPhyOffset(): number {
    return this.beginPhyOffset
  }

  getEndPhyOffset(): number {
    return this.endPhyOffset
  }

  getHashSlotCount(): number {
    return this.hashSlotCount
  }

  /** The number the next entry gets (1 for an empty file). */
  getIndexCount(): number {
    return this.indexCount
  }

  getMappedFile(): MappedFile {
    return this.mappedFile
  }

  isWriteFull(): boolean {
    return this.indexCount >= this.indexNum
  }

  /** Where the entry table ends: the byte after the last entry. */
  entriesEnd(): number {
    return this.entriesStart + this.indexCount * INDEX_ENTRY_SIZE
  }

  // ---- writes -------------------------------------------------------------------------------

  /** Adds `key` for the message at `phyOffset`; false when the file is full. */
  putKey(key: string, phyOffset: number, storeTimestamp: number): boolean {
    return this.putKeyHash(indexKeyHash(key), { commitLogOffset: phyOffset, storeTimestamp })
  }

  /**
   * putKey with the key's index hash already computed (see `indexKeyHash`), for the record `at`
   * names (the dispatcher hashes `topic#key` without building the string). The record's offset and
   * time stay in their object down to the write: a store time (never a small integer) passed as an
   * argument to a function the JIT did not inline is boxed, an allocation per key.
   */
  putKeyHash(keyHash: number, at: KeyPlace): boolean {
    if (this.indexCount >= this.indexNum) return false
    if (!this.mappedFile.isAvailable() || this.readOnly) this.refuseWrite()
    const v = this.writeView()
    this.reservation!.slot(0)
    this.writeKey(v, hashSlotPosition(keyHash, this.hashSlotNum), keyHash, at)
    return true
  }

  /**
   * putKeyHash for keys [from, to) of a batch, in order: key k is hashes[k] for the record at
   * phyOffsets[k], stored at timestamps[k]. Returns where it stopped: `to`, or the first key the
   * file had no room for. The slots of each run of keys are prefetched together first, so that
   * their cache misses overlap instead of coming one per key (a recovery's index rebuild puts
   * millions of keys back to back).
   */
  putKeyHashes(hashes: Int32Array, phyOffsets: Float64Array, timestamps: Float64Array, from: number, to: number): number {
    const stop = Math.min(to, from + Math.max(0, this.indexNum - this.indexCount))
    if (stop <= from) return from
    if (!this.mappedFile.isAvailable() || this.readOnly) this.refuseWrite()
    const v = this.writeView()
    const bytes = this.mappingBytes(v)
    this.reservation!.slot(0)
    const slotNum = this.hashSlotNum
    const ranges = this.slotRanges
    let k = from
    while (k < stop) {
      const runEnd = Math.min(stop, k + PREFETCH_RUN)
      for (let j = k, r = 0; j < runEnd; j++, r += 2) {
        ranges[r] = hashSlotPosition(hashes[j], slotNum)
        ranges[r + 1] = HASH_SLOT_SIZE
      }
      native.prefetchRanges(bytes, ranges, runEnd - k)
      const place = this.place
      for (let r = 0; k < runEnd; k++, r += 2) {
        place.commitLogOffset = phyOffsets[k]
        place.storeTimestamp = timestamps[k]
        this.writeKey(v, ranges[r], hashes[k], place)
      }
    }
    return k
  }

  /**
   * Writes one key whose slot is at `slotPos`: its entry, then the slot, then the header's counts
   * and ends (the order cutInterruptedRecord relies on). Every page written gets its blocks first
   * (throws NO_SPACE, nothing written).
   */
  private writeKey(v: DataView, slotPos: number, keyHash: number, at: KeyPlace): void {
    const phyOffset = at.commitLogOffset
    const storeTimestamp = at.storeTimestamp
    const indexCount = this.indexCount
    const entryPos = this.entriesStart + indexCount * INDEX_ENTRY_SIZE
    const reservation = this.reservation!
    reservation.slot(slotPos)
    reservation.entry(entryPos, INDEX_ENTRY_SIZE)
    this.changes++
    let prev = v.getInt32(slotPos)
    if (prev <= INVALID_INDEX || prev > indexCount) prev = INVALID_INDEX

    let timeDiff = 0
    const begin = this.beginTimestamp
    if (begin > 0) {
      timeDiff = Math.trunc((storeTimestamp - begin) / 1000)
      if (timeDiff > INT_MAX) timeDiff = INT_MAX
      else if (timeDiff < 0) timeDiff = 0
    }

    v.setInt32(entryPos + ENTRY_KEY_HASH_OFFSET, keyHash)
    setInt64(v, entryPos + ENTRY_PHY_OFFSET_OFFSET, phyOffset)
    v.setInt32(entryPos + ENTRY_TIME_DIFF_OFFSET, timeDiff)
    v.setInt32(entryPos + ENTRY_PREV_INDEX_OFFSET, prev)
    v.setInt32(slotPos, indexCount)

    if (indexCount <= 1) this.setBegins(at, v)
    if (prev === INVALID_INDEX) {
      this.hashSlotCount += 1
      v.setInt32(HASH_SLOT_COUNT_OFFSET, this.hashSlotCount)
    }
    this.indexCount = indexCount + 1
    v.setInt32(INDEX_COUNT_OFFSET, indexCount + 1)
    this.endPhyOffset = phyOffset
    this.endTimestamp = storeTimestamp
    setInt64(v, END_PHY_OFFSET_OFFSET, phyOffset)
    setInt64(v, END_TIMESTAMP_OFFSET, storeTimestamp)
    this.changes += 2
  }

  /** The header's begin fields for the file's first key (given the object: see putKeyHash). */
  private setBegins(at: KeyPlace, v: DataView): void {
    this.setLong('beginPhyOffset', at.commitLogOffset, v)
    this.setLong('beginTimestamp', at.storeTimestamp, v)
  }

  /** The mapping's bytes (for prefetch hints), kept with the view they were taken from. */
  private mappingBytes(v: DataView): Uint8Array {
    if (this.bytesOfView !== v) {
      this.bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
      this.bytesOfView = v
    }
    return this.bytes
  }

  /**
   * Dispatch reached the record at `phyOffset`, which has no key: the end offset moves to it, so
   * that a reopen replays the log from there rather than from the last keyed record (a store
   * whose messages carry no keys would otherwise read its whole log again at every reopen). Only
   * the in-memory header changes now; the next flush (a roll, or close) writes it. An end offset
   * past entries is still RocketMQ's meaning: records below it need no indexing.
   */
  noteDispatched(phyOffset: number): void {
    if (this.readOnly || phyOffset <= this.endPhyOffset) return
    this.endPhyOffset = phyOffset
    this.changes++
  }

  /**
   * After a crash of this boot (the file holds every write its process made, in order; see
   * recovery/boot-identity.ts), undoes what a put cut short: the link of an entry the header does
   * not count yet (a put writes its entry, then the slot, then the counts), and every entry of
   * the last record indexed, whose keys may be there only in part (the header's end names it from
   * its first key on). The file then ends at the record before, so the replay indexes that last
   * record again, whole. Returns the number of entries removed.
   */
  cutInterruptedRecord(): number {
    if (this.readOnly || this.indexCount <= 1) return 0
    const v = this.writeView()
    const unlink = (entry: number): void => {
      const pos = this.entriesStart + entry * INDEX_ENTRY_SIZE
      const slotPos = hashSlotPosition(v.getInt32(pos + ENTRY_KEY_HASH_OFFSET), this.hashSlotNum)
      if (v.getInt32(slotPos) !== entry) return
      let prev = v.getInt32(pos + ENTRY_PREV_INDEX_OFFSET)
      if (prev <= INVALID_INDEX || prev >= entry) prev = INVALID_INDEX
      v.setInt32(slotPos, prev)
      if (prev === INVALID_INDEX && this.hashSlotCount > 0) this.hashSlotCount--
    }
    const phyAt = (entry: number): number => getInt64(v, this.entriesStart + entry * INDEX_ENTRY_SIZE + ENTRY_PHY_OFFSET_OFFSET)
    if (this.indexCount < this.indexNum) unlink(this.indexCount)
    const last = phyAt(this.indexCount - 1)
    let removed = 0
    // A later end comes from a flush after a keyless record: the last keyed one was indexed whole.
    if (last >= this.endPhyOffset) {
      while (this.indexCount > 1 && phyAt(this.indexCount - 1) === last) {
        unlink(this.indexCount - 1)
        this.indexCount--
        removed++
      }
      if (this.indexCount > 1) {
        this.setLong('endPhyOffset', phyAt(this.indexCount - 1), v)
      } else {
        // Emptied (its first record was the one cut): a header as new, claiming no record; an end
        // at its begin would name the cut record as seen, and the replay would skip it.
        this.setLong('beginPhyOffset', 0, v)
        this.setLong('endPhyOffset', 0, v)
        this.setLong('beginTimestamp', 0, v)
        this.setLong('endTimestamp', 0, v)
      }
    }
    v.setInt32(INDEX_COUNT_OFFSET, this.indexCount)
    v.setInt32(HASH_SLOT_COUNT_OFFSET, this.hashSlotCount)
    this.changes++
    return removed
  }

  /** Makes the next flush write the file even if this run changed nothing (its pages may be unflushed). */
  markUnflushed(): void {
    this.changes++
  }

  /** Whether the file has changes no flush has covered yet. */
  hasUnflushedChanges(): boolean {
    return this.changes !== this.flushedChanges
  }

  private refuseWrite(): never {
    if (this.readOnly) throw new TypeError(`${this.fileName} is mapped read-only`)
    throw new MQStoreError('STORE_CLOSED', `${this.fileName} is shut down`)
  }

  // ---- reads --------------------------------------------------------------------------------

  /**
   * True when the file's time range [beginTimestamp, endTimestamp] and [begin, end] overlap in
   * RocketMQ's sense: the query range covers the file, or either query bound lies inside it.
   */
  isTimeMatched(begin: number, end: number): boolean {
    const fileBegin = this.beginTimestamp
    const fileEnd = this.endTimestamp
    return (begin < fileBegin && end > fileEnd) || (begin >= fileBegin && begin <= fileEnd) || (end >= fileBegin && end <= fileEnd)
  }

  /**
   * Appends to `out`, newest first, the phyOffsets of entries whose key hash equals the key's and
   * whose time (beginTimestamp + timeDiff seconds) lies in [begin, end], until `out` holds maxNum.
   * Only hashes are compared: keys with equal hashes are all returned.
   */
  selectPhyOffset(out: number[], key: string, maxNum: number, begin: number, end: number): void {
    this.selectPhyOffsetByHash(out, indexKeyHash(key), maxNum, begin, end)
  }

  selectPhyOffsetByHash(out: number[], keyHash: number, maxNum: number, begin: number, end: number): void {
    out.length = this.collectByHash(keyHash, begin, end, out, out.length, maxNum)
  }

  /**
   * The walk of selectPhyOffsetByHash without objects or callbacks: writes the matching phyOffsets
   * to out[count], out[count + 1], ... until `limit` are there; returns the new count.
   */
  collectByHash(keyHash: number, begin: number, end: number, out: number[], count: number, limit: number): number {
    if (count >= limit) return count
    const mapped = this.mappedFile
    if (!mapped.hold()) return count
    try {
      const indexCount = this.indexCount
      // Nothing to read in an empty file: it is not mapped for it.
      if (indexCount <= 1) return count
      const v = this.readView()
      let cur = v.getInt32(hashSlotPosition(keyHash, this.hashSlotNum))
      // Entry numbers run from 1 to indexCount - 1; anything else is a damaged slot.
      if (cur <= INVALID_INDEX || cur >= indexCount) return count
      const entries = this.entriesStart
      const beginTimestamp = this.beginTimestamp
      for (;;) {
        const pos = entries + cur * INDEX_ENTRY_SIZE
        const timeDiff = v.getInt32(pos + ENTRY_TIME_DIFF_OFFSET)
        if (timeDiff < 0) return count
        const prev = v.getInt32(pos + ENTRY_PREV_INDEX_OFFSET)
        const time = entryTime(beginTimestamp, cur, timeDiff)
        if (v.getInt32(pos + ENTRY_KEY_HASH_OFFSET) === keyHash && time >= begin && time <= end) {
          out[count++] = v.getInt32(pos + ENTRY_PHY_OFFSET_OFFSET) * TWO_POW_32 + v.getUint32(pos + ENTRY_PHY_OFFSET_OFFSET + 4)
          if (count >= limit) return count
        }
        // As walkByHash: a valid chain only goes to older entries.
        if (prev <= INVALID_INDEX || prev >= cur || time < begin) return count
        cur = prev
      }
    } finally {
      mapped.release()
    }
  }

  /**
   * Walks the chain of `keyHash`, newest entry first, calling `visit` with the phyOffset of each entry whose
   * hash matches and whose time lies in [begin, end], until `visit` returns true (and so does the walk then).
   */
  walkByHash(keyHash: number, begin: number, end: number, visit: (phyOffset: number) => boolean): boolean {
    const mapped = this.mappedFile
    if (!mapped.hold()) return false
    try {
      const indexCount = this.indexCount
      // Nothing to read in an empty file: it is not mapped for it.
      if (indexCount <= 1) return false
      const v = this.mapping()
      let cur = v.getInt32(hashSlotPosition(keyHash, this.hashSlotNum))
      // Entry numbers run from 1 to indexCount - 1; anything else is a damaged slot.
      if (cur <= INVALID_INDEX || cur >= indexCount || indexCount <= 1) return false
      for (;;) {
        const entry = readIndexEntry(v, this.entriesStart + cur * INDEX_ENTRY_SIZE)
        const prev = entry.prevIndex
        if (entry.timeDiff < 0) return false
        const time = entryTime(this.beginTimestamp, cur, entry.timeDiff)
        if (entry.keyHash === keyHash && time >= begin && time <= end && visit(entry.phyOffset)) return true
        // A valid chain only goes to older entries; `prev >= cur` (RocketMQ checks ==) also ends a damaged chain's loop.
        if (prev <= INVALID_INDEX || prev >= cur || time < begin) return false
        cur = prev
      }
    } finally {
      mapped.release()
    }
  }

  // ---- flush and lifetime -------------------------------------------------------------------

  /**
   * Prepares the MappedFile's positions so its flush covers every byte this file may have
   * changed: from the header to the end of the last entry. Returns false when nothing can be
   * flushed (read-only or shut down).
   */
  private prepareFlush(): boolean {
    const mapped = this.mappedFile
    if (this.readOnly || !mapped.isAvailable() || !this.hasUnflushedChanges()) return false
    this.reservation!.slot(0)
    this.writeHeader()
    const used = Math.min(this.fileSize, this.entriesStart + this.indexCount * INDEX_ENTRY_SIZE)
    mapped.wrotePosition = used
    mapped.committedPosition = used
    mapped.flushedPosition = 0
    return true
  }

  /**
   * Forces the header, the slots and the written entries to disk on the calling thread; a file
   * with no change since its last flush (or since it was opened) is left alone, unmapped.
   */
  flush(): void {
    const changes = this.changes
    if (!this.prepareFlush()) return
    this.mappedFile.flush(0)
    this.flushedChanges = changes
  }

  /**
   * Forces entry-table bytes [from, to) to disk on the libuv pool: a burst's sync behind the writer
   * (IndexService.kickWriteback). Not the slot table: a sync makes the pages it cleans read-only to
   * the writer, whose next key into each would fault. The entries' pages are dropped from the
   * mapping first (the page cache keeps them): a sync write-protects every page still mapped, one
   * TLB shootdown each, each stopping the writer's CPU (an index rebuilt at open paid thousands).
   */
  async syncEntriesAsync(from: number, to: number, after: WriteAfterSync | null = null): Promise<void> {
    const mapped = this.mappedFile
    if (this.readOnly || !mapped.isAvailable() || to <= from) return
    mapped.dropPages(from, to, false)
    // With a write after it, the sync covers the table from its first page (see index-durable.ts).
    mapped.flushedPosition = after === null ? from : Math.floor(this.entriesStart / native.pageSize) * native.pageSize
    mapped.wrotePosition = to
    mapped.committedPosition = to
    await mapped.flushAsync(0, after)
  }

  /** The mark of the entries a sync of the entry table up to `syncedTo` makes durable (index-durable.ts), or null. */
  durableMark(syncedTo: number): IndexDurableMark | null {
    const v = this.writeView()
    const entries = markableEntries(v, this.hashSlotNum, this.indexCount, syncedTo)
    if (entries < 1) return null
    const lastPhyOffset = getInt64(v, this.entriesStart + entries * INDEX_ENTRY_SIZE + ENTRY_PHY_OFFSET_OFFSET)
    const { beginPhyOffset, beginTimestamp } = this
    return { fileName: basename(this.fileName), entries, lastPhyOffset, beginPhyOffset, beginTimestamp }
  }

  /** After a power cut: keeps the entries `mark` names and rebuilds the slots from them (rebuildFromMark); false when they do not check out. */
  keepDurablePrefix(mark: IndexDurableMark): boolean {
    if (this.readOnly || mark.fileName !== basename(this.fileName)) return false
    const reservation = this.reservation!
    const whole = reservation.tableForRebuild(mark.entries)
    const kept = rebuildFromMark(this.writeView(), this.hashSlotNum, this.indexNum, mark, whole ? null : (pos) => reservation.slot(pos))
    if (kept === null) return false
    this.indexCount = kept.entries + 1
    this.hashSlotCount = kept.slots
    this.endPhyOffset = kept.endPhyOffset
    this.endTimestamp = kept.endTimestamp
    reservation.slot(0)
    this.writeHeader()
    this.changes++
    return true
  }

  /** The same as flush, with msync on the libuv pool; the file stays mapped until it completes. */
  async flushAsync(): Promise<void> {
    const changes = this.changes
    if (!this.prepareFlush()) return
    await this.mappedFile.flushAsync(0)
    this.flushedChanges = changes
  }

  /** Drops the file's pages from its mapping, the bytes kept in the page cache (MappedFile.dropPages). */
  dropPages(): void {
    this.mappedFile.dropPages(0, this.mappedFile.fileSize, false)
  }

  /** Waits for the warm-ups of its reserved pages (see IndexReservation), so that a shutdown can unmap at once. */
  settle(): Promise<void> {
    return this.mappedFile.settle()
  }

  /** Unmaps the file (once no flush is in flight). It does not flush. */
  shutdown(): void {
    this.mappedFile.shutdown(0)
  }

  /** Shuts the file down and deletes it once nothing holds it; false means "call again later". */
  destroy(intervalForcibly: number, now: number = Date.now()): boolean {
    return this.mappedFile.destroy(intervalForcibly, now)
  }

  toString(): string {
    return `IndexFile(${this.fileName}, count=${this.indexCount}, end=${this.endPhyOffset}@${this.endTimestamp})`
  }
}
