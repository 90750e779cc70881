// One compaction-log file: commit-log records of one queue, copied byte for byte (the physical
// offset field keeps the record's commit-log offset, so its msgId does not change), in queue-offset
// order, named by its base queue offset (20 digits). The file is mapped with MappedFile; which
// queue offsets it holds, and where, is kept in memory (built by a scan at open), so that reads skip
// removed offsets with a binary search and the cleaner needs no second file per segment.
//
// The active (last) file is preallocated at the topic's segmentBytes and filled up to a zero tail;
// a cleaned file is exactly as long as what it kept (possibly zero bytes, then it is not mapped).
import * as fs from 'node:fs'

import { MQStoreError } from '../../errors.js'
import { bodyLengthAt, checkRecord, decodeMessage } from '../commitlog/record.js'
import { MappedFile } from '../mapped/mapped-file.js'

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

export class CompactionSegment {
  readonly baseOffset: number
  /** The current name of the file (it changes through .cleaned → .swap → final → .deleted). */
  path: string
  readonly capacity: number
  /** Clock time the segment was created or loaded, for time-based rolls of a file without records. */
  readonly createdAt: number
  private readonly file: MappedFile | null
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

  private constructor(path: string, baseOffset: number, capacity: number, file: MappedFile | null, createdAt: number) {
    this.path = path
    this.baseOffset = baseOffset
    this.capacity = capacity
    this.file = file
    this.createdAt = createdAt
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
    const size = fs.statSync(path).size
    const file = size === 0 ? null : MappedFile.open(path, size, { fileFromOffset: baseOffset })
    const segment = new CompactionSegment(path, baseOffset, size, file, now)
    if (file !== null) {
      if (known === undefined) {
        file.setPositions(size)
        segment.scan(file.readableBuffer())
      } else {
        // The writer of a cleaned file knows what it wrote: no second read of the file.
        for (const r of known) segment.index(r.queueOffset, r.position, r.size, r.storeTimestamp, r.tagsCode, r.horizon)
      }
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
    if (this.file === null || record.length > this.room) return false
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

  /** Holds the mapping for a read; false when the file is gone (or empty). Pair with release(). */
  hold(): boolean {
    return this.file !== null && this.file.hold()
  }

  release(): void {
    this.file?.release()
  }

  /** The mapped bytes [0, bytes). Read them only while holding the segment (or as its owner). */
  data(): Buffer {
    return this.file === null ? Buffer.alloc(0) : this.file.readableBuffer().subarray(0, this.bytes)
  }

  /** Drops records from index `i` on (recovery truncation of the active file). */
  truncateTo(i: number): void {
    if (i >= this.count) return
    this.count = i
    this.bytes = i === 0 ? 0 : this.positions[i - 1] + this.sizes[i - 1]
    if (this.file !== null) {
      // Zero the cut-off bytes so a later scan cannot take them for records.
      const buf = this.file.readableBuffer()
      buf.fill(0, this.bytes)
      this.file.setPositions(this.bytes)
    }
    this.largestTimestamp = 0
    this.minHorizon = Infinity
    for (let k = 0; k < this.count; k++) if (this.timestamps[k] > this.largestTimestamp) this.largestTimestamp = this.timestamps[k]
  }

  /** Forces the written bytes to disk. */
  flush(): void {
    this.file?.flush(0)
  }

  async renameAsync(to: string): Promise<void> {
    await fs.promises.rename(this.path, to)
    this.path = to
  }

  rename(to: string): void {
    fs.renameSync(this.path, to)
    this.path = to
  }

  /** Drops the owner's reference; the mapping goes once readers release it. The file stays. */
  close(): void {
    this.file?.shutdown(0)
  }
}

/** The delete horizon a tombstone carries, 0 when it has none. */
export function horizonOf(buf: Buffer, pos: number): number {
  const message = decodeMessage(buf, pos, false)
  const text = message?.properties[DELETE_HORIZON_PROPERTY]
  const horizon = text === undefined ? 0 : Number(text)
  return Number.isSafeInteger(horizon) && horizon > 0 ? horizon : 0
}
