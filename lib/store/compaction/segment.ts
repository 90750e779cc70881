// One compaction-log file: commit-log records of one queue, copied byte for byte (the physical
// offset field keeps the record's commit-log offset, so its msgId does not change), in queue-offset
// order, named by its base queue offset (20 digits). The file is mapped with MappedFile; which
// queue offsets it holds, and where, is kept in memory (built by a scan at open), so that reads skip
// removed offsets with a binary search and the cleaner needs no second file per segment.
//
// The active (last) file is preallocated at the topic's segmentBytes and filled up to a zero tail,
// and stays mapped. A sealed file (older ones; a cleaned file is exactly as long as what it kept,
// possibly zero bytes) is unmapped when sealed and mapped again on first use, within two budgets: a
// count of sealed files per store (maxMappedFiles), and the store's budget of mapped bytes, which
// also unmaps a sealed file once it has been idle for the store's idle time. A queue with many
// files, or a store with many queues, does not run into the process's limits on mappings.
import * as fs from 'node:fs'

import { MQStoreError } from '../../errors.js'
import { bodyLengthAt, checkRecord, decodeMessage } from '../commitlog/record.js'
import { MappedFile } from '../mapped/mapped-file.js'
import type { MappingBudget as BytesBudget } from '../mapped/mapping-budget.js'

/**
 * Property a cleaned tombstone carries: the wall-clock ms after which a pass may drop it (the
 * first pass that kept it + deleteRetentionMs). Written once; never moved by later passes.
 */
export const DELETE_HORIZON_PROPERTY = 'DELETE_HORIZON'

const INITIAL_ENTRIES = 64

export interface EntryInfo {
  queueOffset: number
  position: number
  size: number
  storeTimestamp: number
  tagsCode: number
}

/** What a writer of a file knows of each record it wrote (so the file needs no scan to be indexed). */
export interface IndexedRecord extends EntryInfo {
  horizon: number
}

/** A mapped view of a segment's records, held until released. */
export interface SegmentLease {
  readonly data: Buffer
  release(): void
}

/**
 * The sealed files opened for reads, least recently used first; past `maxMapped` the oldest is
 * closed (readers that hold it keep it until they release it). With `bytes` (the store's budget of
 * mapped bytes), an opened file is mapped on first use within it and unmapped when idle.
 */
export class MappingBudget {
  readonly maxMapped: number
  readonly bytes: BytesBudget | null
  private readonly lru = new Set<CompactionSegment>()

  constructor(maxMapped: number, bytes: BytesBudget | null = null) {
    if (!Number.isSafeInteger(maxMapped) || maxMapped < 1) throw new RangeError(`maxMapped must be a positive integer, got ${maxMapped}`)
    this.maxMapped = maxMapped
    this.bytes = bytes
  }

  /** Sealed files mapped right now (an opened file the bytes budget unmapped is not). */
  get mapped(): number {
    let n = 0
    for (const segment of this.lru) if (segment.isMapped) n++
    return n
  }

  touch(segment: CompactionSegment): void {
    this.lru.delete(segment)
    this.lru.add(segment)
    while (this.lru.size > this.maxMapped) {
      const oldest = this.lru.values().next().value as CompactionSegment
      this.lru.delete(oldest)
      oldest.unmap()
    }
  }

  forget(segment: CompactionSegment): void {
    this.lru.delete(segment)
  }
}

/** The budget of segments opened without one (tests of single files, recovery scans). */
const UNBOUNDED = new MappingBudget(Number.MAX_SAFE_INTEGER)

export class CompactionSegment {
  readonly baseOffset: number
  /** The current name of the file (it changes through .cleaned → .swap → final → .deleted). */
  path: string
  readonly capacity: number
  /** Clock time the segment was created or loaded, for time-based rolls of a file without records. */
  readonly createdAt: number
  private file: MappedFile | null
  /** Only the active file takes appends; it is never unmapped by the budget. */
  private active: boolean
  private budget: MappingBudget = UNBOUNDED
  private offsets = new Float64Array(INITIAL_ENTRIES)
  private positions = new Int32Array(INITIAL_ENTRIES)
  private sizes = new Int32Array(INITIAL_ENTRIES)
  private timestamps = new Float64Array(INITIAL_ENTRIES)
  private tagsCodes = new Float64Array(INITIAL_ENTRIES)
  count = 0
  /** Bytes of records written. */
  bytes = 0
  /** Store time of the first and the largest store time of all records, 0 when empty. */
  firstTimestamp = 0
  largestTimestamp = 0
  /** Smallest delete horizon among the tombstones that carry one; Infinity when none. */
  minHorizon = Infinity
  /** Where open's scan met bytes that are not a record (a torn write, damage); -1 at a clean end. */
  cutShortAt = -1

  private constructor(path: string, baseOffset: number, capacity: number, file: MappedFile | null, createdAt: number) {
    this.path = path
    this.baseOffset = baseOffset
    this.capacity = capacity
    this.file = file
    this.active = file !== null
    this.createdAt = createdAt
  }

  /** Makes this a sealed file under `budget`: unmapped now, mapped again when read. */
  seal(budget: MappingBudget): void {
    this.budget = budget
    // The flush runs on the libuv pool and holds the mapping, so the unmap below waits for it.
    if (this.active && this.file !== null) this.file.flushAsync(0).catch(() => undefined)
    this.active = false
    this.unmap()
  }

  /** Keeps the file mapped for appends (the active file of its log). */
  activate(budget: MappingBudget): void {
    this.budget = budget
    this.active = true
    budget.forget(this)
  }

  /** Drops the mapping of a sealed file (readers holding it keep it until they release it). */
  unmap(): void {
    if (this.active || this.file === null) return
    this.file.shutdown(0)
    this.file = null
    this.budget.forget(this)
  }

  /** True while the file is mapped. */
  get isMapped(): boolean {
    return this.file?.isMapped === true
  }

  private mapping(): MappedFile | null {
    if (this.file === null) {
      if (this.capacity === 0) return null
      // A sealed file under the store's budget maps at its first read, not here (the active one
      // is open already); it is idle once no lease holds it, its bytes flushed.
      const bytes = this.active ? null : this.budget.bytes
      const file = MappedFile.open(this.path, this.capacity, { fileFromOffset: this.baseOffset, budget: bytes, unmapOnlyFlushed: true })
      file.setPositions(this.bytes)
      this.file = file
    }
    if (!this.active) this.budget.touch(this)
    return this.file
  }

  /**
   * The records' bytes, mapped and held until the lease is released; null for a file without
   * records. Throws when the file cannot be mapped.
   */
  acquire(): SegmentLease | null {
    if (this.bytes === 0) return null
    const file = this.mapping()
    if (file === null || !file.hold()) return null
    const data = file.readableBuffer().subarray(0, this.bytes)
    let released = false
    return {
      data,
      release: () => {
        if (released) return
        released = true
        file.release()
      },
    }
  }

  /** A new empty file of `capacity` bytes, reserved on disk before it appears under its name. */
  static create(path: string, baseOffset: number, capacity: number, now: number): CompactionSegment {
    if (capacity === 0) {
      fs.writeFileSync(path, '')
      return new CompactionSegment(path, baseOffset, 0, null, now)
    }
    const file = MappedFile.create(path, capacity, { fileFromOffset: baseOffset })
    return new CompactionSegment(path, baseOffset, capacity, file, now)
  }

  /**
   * Maps an existing file and indexes its records. The scan stops at the first thing that is not
   * a record whose queue offset follows the previous one (the zero tail, or a torn last write of
   * the active file); `bytes` ends there and appends continue from it.
   */
  static open(path: string, baseOffset: number, now: number, known?: readonly IndexedRecord[]): CompactionSegment {
    // Opened mapped (for the scan) and counted as active until the log seals it.
    const size = fs.statSync(path).size
    if (known !== undefined) {
      // The writer of a cleaned file knows what it wrote: no second read, and no mapping yet.
      const segment = new CompactionSegment(path, baseOffset, size, null, now)
      for (const r of known) segment.index(r.queueOffset, r.position, r.size, r.storeTimestamp, r.tagsCode, r.horizon)
      return segment
    }
    const file = size === 0 ? null : MappedFile.open(path, size, { fileFromOffset: baseOffset })
    const segment = new CompactionSegment(path, baseOffset, size, file, now)
    if (file !== null) {
      file.setPositions(size)
      segment.scan(file.readableBuffer())
      file.setPositions(segment.bytes)
    }
    return segment
  }

  private scan(buf: Buffer): void {
    let pos = 0
    let last = this.baseOffset - 1
    while (pos < buf.length) {
      const r = checkRecord(buf, pos, buf.length, false)
      if (r.status !== 'OK' || r.queueOffset <= last) break
      let horizon = 0
      if (bodyLengthAt(buf, pos) <= 0) horizon = horizonOf(buf, pos)
      this.index(r.queueOffset, pos, r.size, r.storeTimestamp, r.tagsCode, horizon)
      last = r.queueOffset
      pos += r.size
    }
    // A file's records are followed by zeros: a non-zero length where the next record would start
    // is a record cut short (or damage), not the end.
    if (pos + 4 <= buf.length && buf.readInt32BE(pos) !== 0) this.cutShortAt = pos
  }

  /**
   * Zeroes what follows the records of the active file (up to a run of `quietBytes` zero bytes)
   * and syncs it; the number of bytes zeroed. New records go there, and a stale one left behind
   * them would be read back at the next open, under an offset handed out again since.
   */
  eraseTail(quietBytes: number): number {
    const file = this.active ? this.file : null
    if (file === null || !file.hold()) return 0
    try {
      return file.eraseStaleTail(this.bytes, quietBytes)
    } finally {
      file.release()
    }
  }

  private index(queueOffset: number, position: number, size: number, storeTimestamp: number, tagsCode: number, horizon: number): void {
    if (this.count === this.offsets.length) this.grow()
    const i = this.count++
    this.offsets[i] = queueOffset
    this.positions[i] = position
    this.sizes[i] = size
    this.timestamps[i] = storeTimestamp
    this.tagsCodes[i] = tagsCode
    this.bytes = position + size
    if (i === 0) this.firstTimestamp = storeTimestamp
    if (storeTimestamp > this.largestTimestamp) this.largestTimestamp = storeTimestamp
    if (horizon > 0 && horizon < this.minHorizon) this.minHorizon = horizon
  }

  private grow(): void {
    const n = this.offsets.length * 2
    const widen = <T extends Float64Array | Int32Array>(a: T, make: (n: number) => T): T => {
      const b = make(n)
      b.set(a)
      return b
    }
    this.offsets = widen(this.offsets, (k) => new Float64Array(k))
    this.positions = widen(this.positions, (k) => new Int32Array(k))
    this.sizes = widen(this.sizes, (k) => new Int32Array(k))
    this.timestamps = widen(this.timestamps, (k) => new Float64Array(k))
    this.tagsCodes = widen(this.tagsCodes, (k) => new Float64Array(k))
  }

  get room(): number {
    return this.capacity - this.bytes
  }

  /**
   * Copies one whole record (bytes of a record checkRecord found OK) to the end; false when it
   * does not fit. `horizon` is the record's delete horizon (0 for none).
   */
  append(record: Uint8Array, queueOffset: number, storeTimestamp: number, tagsCode: number, horizon = 0): boolean {
    if (!this.active || this.file === null || record.length > this.room) return false
    if (this.count > 0 && queueOffset <= this.offsets[this.count - 1]) {
      throw new MQStoreError('CORRUPTION', `${this.path}: offset ${queueOffset} does not follow ${this.lastOffset()}`)
    }
    const position = this.bytes
    if (!this.file.appendMessage(record)) return false
    this.index(queueOffset, position, record.length, storeTimestamp, tagsCode, horizon)
    return true
  }

  firstOffset(): number {
    return this.count > 0 ? this.offsets[0] : -1
  }

  lastOffset(): number {
    return this.count > 0 ? this.offsets[this.count - 1] : -1
  }

  offsetAt(i: number): number {
    return this.offsets[i]
  }

  entry(i: number): EntryInfo {
    return {
      queueOffset: this.offsets[i],
      position: this.positions[i],
      size: this.sizes[i],
      storeTimestamp: this.timestamps[i],
      tagsCode: this.tagsCodes[i],
    }
  }

  positionAt(i: number): number {
    return this.positions[i]
  }

  sizeAt(i: number): number {
    return this.sizes[i]
  }

  timestampAt(i: number): number {
    return this.timestamps[i]
  }

  tagsCodeAt(i: number): number {
    return this.tagsCodes[i]
  }

  /** Index of the first record with queue offset ≥ `queueOffset` (count when there is none). */
  lowerBound(queueOffset: number): number {
    let lo = 0
    let hi = this.count
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.offsets[mid] < queueOffset) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** Index of the first record stored at or after `timestamp` (count when there is none). */
  firstAtOrAfterTime(timestamp: number): number {
    for (let i = 0; i < this.count; i++) if (this.timestamps[i] >= timestamp) return i
    return this.count
  }

  /** Drops records from index `i` on (recovery truncation of the active file). */
  truncateTo(i: number): void {
    if (i >= this.count) return
    this.count = i
    const file = this.mapping()
    if (file?.hold()) {
      try {
        // Zero the cut-off bytes so a later scan cannot take them for records, and sync them: a
        // dropped record that came back after a power cut would overlap the next file's offsets.
        file.eraseStaleTail(i === 0 ? 0 : this.positions[i - 1] + this.sizes[i - 1], this.capacity)
      } finally {
        file.release()
      }
    }
    this.bytes = i === 0 ? 0 : this.positions[i - 1] + this.sizes[i - 1]
    this.file?.setPositions(this.bytes)
    this.largestTimestamp = 0
    this.minHorizon = Infinity
    for (let k = 0; k < this.count; k++) if (this.timestamps[k] > this.largestTimestamp) this.largestTimestamp = this.timestamps[k]
  }

  /** Forces the written bytes to disk. */
  flush(): void {
    this.file?.flush(0)
  }

  /** The same, with msync on the libuv pool (the periodic flush: puts keep running meanwhile). */
  async flushAsync(): Promise<void> {
    await this.file?.flushAsync(0)
  }

  async renameAsync(to: string): Promise<void> {
    await fs.promises.rename(this.path, to)
    this.renamed(to)
  }

  rename(to: string): void {
    fs.renameSync(this.path, to)
    this.renamed(to)
  }

  /**
   * A sealed file's MappedFile knows it by its old name, and would map that name again after an
   * idle unmap: it is closed (a lease keeps its mapping), and the next read opens the new name.
   */
  private renamed(to: string): void {
    this.path = to
    this.unmap()
  }

  /** Drops the owner's reference; the mapping goes once readers release it. The file stays. */
  close(): void {
    this.file?.shutdown(0)
    this.file = null
    this.active = false
    this.budget.forget(this)
  }
}

/** The delete horizon a tombstone carries, 0 when it has none. */
export function horizonOf(buf: Buffer, pos: number): number {
  const message = decodeMessage(buf, pos, false)
  const text = message?.properties[DELETE_HORIZON_PROPERTY]
  const horizon = text === undefined ? 0 : Number(text)
  return Number.isSafeInteger(horizon) && horizon > 0 ? horizon : 0
}
