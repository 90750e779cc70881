// The commit log as a read-only opener sees it: records read by offset (checked before they are
// served), the first offset still on disk, and where the written records end.
import { Buffer } from 'node:buffer'
import {
  BLANK_MAGIC_CODE,
  MESSAGE_MAGIC_CODE,
  MIN_RECORD_LENGTH,
  OFFSET_MAGIC,
  OFFSET_PHYSICALOFFSET,
  OFFSET_QUEUEID,
  OFFSET_QUEUEOFFSET,
  OFFSET_SYSFLAG,
  OFFSET_TOTALSIZE,
  storeTimestampOffset,
} from '../commitlog/record.js'
import { readInt64BE } from '../bytes.js'
import { CQ_STORE_UNIT_SIZE, readUnitOffset, readUnitSize } from '../queue/cq-unit.js'
import { ReadBatch, type BatchOutcome } from '../read/read-batch.js'
import { hasKey, hasTagIn, textEquals } from '../read/record-bytes.js'
import { emptyQueuePlace, placeFor, type QueuePlace } from '../read/record-identity.js'
import { LISTING_MAX_AGE_MS, ReadOnlySegments } from './read-only-segments.js'

/** The head of a record a unit is checked against: through PHYSICALOFFSET. */
const RECORD_HEAD_BYTES = OFFSET_PHYSICALOFFSET + 8
/** A record's head through its store time, with an IPv6 born host (the longest it can be). */
const STAMP_HEAD_BYTES = 96
/** A record longer than this is damage (maxMessageSize is at most a few MiB plus headroom). */
const MAX_RECORD_BYTES = 64 * 1024 * 1024
/** Bytes read per step when walking the last file for the log's end. */
const WALK_CHUNK_BYTES = 1024 * 1024
/** The least size of the buffer a queue read's records are read into (it grows to what reads need). */
const READ_BUFFER_BYTES = 256 * 1024
/** A lookup reads this much at a record's offset, and the rest of a longer record with a second read. */
const LOOKUP_READ_BYTES = 4096
/** A read's pread runs on over the next units' records while each starts within this of the last one's end... */
const READ_AHEAD_GAP_BYTES = 16 * 1024
/** ...and the whole read stays within this. */
const READ_AHEAD_BYTES = 128 * 1024
const EMPTY = Buffer.alloc(0)

/**
 * What takeRecord() did with a consume-queue unit's record: taken (served by finishRead() unless
 * its body fails its CRC), refused by the read's tag filter, missing (no whole record there: a
 * file gone, or not written yet), or other (a whole record, but not the one the unit names).
 */
export type RecordTake = 'taken' | 'refused' | 'missing' | 'other'

/** What a lookup by key asks of a record besides its offset: its topic, a key, a store-time range (ms). */
export interface KeyedLookup {
  topic: string
  key: string
  keyIsAscii: boolean
  from: number
  to: number
}

export class ReadOnlyCommitLog {
  readonly files: ReadOnlySegments
  /** Where the walk for the log's end stopped last time (it resumes there). */
  private walkedTo = -1
  /** When the folder was last listed (Date.now()). */
  private listedAt = 0
  /** A record's head, read for holdsRecord() and storeTimestampAt(). */
  private readonly head = Buffer.alloc(STAMP_HEAD_BYTES)
  /** Records not served because their body failed its CRC. */
  bodyCrcFailures = 0
  // A queue read (beginRead, takeRecord, finishRead): the records are read into `buffer` one
  // after another, checked there, and copied out with their CRCs in one pass, as the writer's reads
  // do (read/read-batch.ts), so that messages are lazy views rather than decoded field by field.
  private readonly batch = new ReadBatch({ zeroCopy: false, verify: true })
  private buffer = Buffer.alloc(0)
  private bufferView = new DataView(this.buffer.buffer, this.buffer.byteOffset, 0)
  private bufferUsed = 0
  /** The units of the read, and the commit-log range [windowFrom, windowEnd) its last pread brought to buffer[windowAt]. */
  private units: Buffer = EMPTY
  private windowFrom = -1
  private windowEnd = -1
  private windowAt = 0
  private readonly place: QueuePlace = emptyQueuePlace()

  constructor(dir: string) {
    this.files = new ReadOnlySegments(dir)
  }

  refresh(now = Date.now()): void {
    this.listedAt = now
    if (this.files.refresh().replaced) this.walkedTo = -1
  }

  /** refresh() when the last one is LISTING_MAX_AGE_MS old (reads in a row; see ReadOnlyQueue.refreshFor). */
  refreshIfOld(now: number): void {
    if (now - this.listedAt >= LISTING_MAX_AGE_MS) this.refresh(now)
  }

  /** The first offset as the last listing saw it, -1 when it held no file. */
  knownMinOffset(): number {
    return this.files.segments[0]?.offset ?? -1
  }

  /** The first offset still on disk, -1 when the log holds no file. */
  minOffset(): number {
    this.refresh()
    return this.knownMinOffset()
  }

  /**
   * Where the records end: the walk goes on from where it stopped, record header by record
   * header, to the first bytes that are not a record (a blank record closes a file).
   */
  maxOffset(): number {
    this.refresh()
    const segments = this.files.segments
    if (segments.length === 0) return 0
    if (this.walkedTo < segments[0].offset) this.walkedTo = segments[0].offset
    for (let steps = 0; steps < 1 << 20; steps++) {
      const segment = this.files.segmentOf(this.walkedTo)
      if (segment === null) break
      const within = this.walkedTo - segment.offset
      const chunk = this.files.read(segment, within, WALK_CHUNK_BYTES)
      let pos = 0
      let closed = false
      while (pos + 8 <= chunk.length) {
        const size = chunk.readInt32BE(pos + OFFSET_TOTALSIZE)
        const magic = chunk.readInt32BE(pos + OFFSET_MAGIC)
        if (magic === BLANK_MAGIC_CODE) {
          closed = true
          break
        }
        if (magic !== MESSAGE_MAGIC_CODE || size < MIN_RECORD_LENGTH || pos + size > chunk.length) break
        pos += size
      }
      this.walkedTo += pos
      if (closed) {
        // The next file starts where this one ends: the first listed file after it.
        const next = segments.find((s) => s.offset > segment.offset)
        if (next === undefined) break
        this.walkedTo = next.offset
        continue
      }
      // A record cut by the chunk's end: read on from it; anything else ends the data.
      if (pos === 0 || chunk.length < WALK_CHUNK_BYTES) break
    }
    return this.walkedTo
  }

  /**
   * True when a whole record of `size` bytes for (queueId, queueOffset) starts at `offset`: a
   * consume-queue unit is served only once the record it points at is all there.
   */
  holdsRecord(offset: number, size: number, queueId: number, queueOffset: number): boolean {
    const segment = this.files.segmentOf(offset)
    if (segment === null) return false
    const head = this.files.read(segment, offset - segment.offset, RECORD_HEAD_BYTES, this.head)
    return (
      head.length === RECORD_HEAD_BYTES &&
      head.readInt32BE(OFFSET_TOTALSIZE) === size &&
      head.readInt32BE(OFFSET_MAGIC) === MESSAGE_MAGIC_CODE &&
      head.readInt32BE(OFFSET_QUEUEID) === queueId &&
      readInt64BE(head, OFFSET_QUEUEOFFSET) === queueOffset &&
      readInt64BE(head, OFFSET_PHYSICALOFFSET) === offset
    )
  }

  /**
   * The store time in the record at `offset` (of `size` bytes when given), read from its head as
   * the writer's pickupStoreTimestamp reads it, the head checked (size, magic, its own offset); -1
   * when no such record is there.
   */
  storeTimestampAt(offset: number, size = -1): number {
    if (offset < 0) return -1
    for (let attempt = 0; ; attempt++) {
      const segment = this.files.segmentOf(offset)
      const head = segment === null ? EMPTY : this.files.read(segment, offset - segment.offset, STAMP_HEAD_BYTES, this.head)
      if (head.length >= RECORD_HEAD_BYTES) {
        if (head.readInt32BE(OFFSET_MAGIC) !== MESSAGE_MAGIC_CODE || readInt64BE(head, OFFSET_PHYSICALOFFSET) !== offset) return -1
        const length = head.readInt32BE(OFFSET_TOTALSIZE)
        if (length < MIN_RECORD_LENGTH || (size >= 0 && length !== size)) return -1
        const at = storeTimestampOffset(head.readInt32BE(OFFSET_SYSFLAG))
        return at + 8 <= head.length ? readInt64BE(head, at) : -1
      }
      // Not (yet) in a file listed: a file rolled to, or rebuilt.
      if (attempt === 1 || !this.files.refresh().changed) return -1
    }
  }

  /**
   * Starts a read of `topic`'s queue `queueId` whose consume-queue units are `units` (takeRecord()
   * reads ahead over the records of the units after the one it is given).
   */
  beginRead(topic: string, queueId: number, units: Buffer): void {
    placeFor(this.place, topic, queueId)
    this.begin(units)
  }

  /**
   * Takes the record the unit at byte `unitAt` of the read's units names (`size` bytes at
   * `offset`) when it is the record of queue offset `queueOffset` (and has one of `tags`, when
   * given). Its bytes come from the read's buffer, read ahead when an earlier unit's read brought
   * them, else read now.
   */
  takeRecord(unitAt: number, offset: number, size: number, queueOffset: number, tags: readonly string[] | undefined): RecordTake {
    if (offset < 0 || size < MIN_RECORD_LENGTH || size > MAX_RECORD_BYTES) return 'missing'
    let at: number
    if (this.windowFrom >= 0 && offset >= this.windowFrom && offset + size <= this.windowEnd) {
      at = this.windowAt + (offset - this.windowFrom)
    } else {
      at = this.readWindow(unitAt, offset, size)
      if (at < 0) return 'missing'
    }
    const view = this.bufferView
    if (view.getInt32(at + OFFSET_TOTALSIZE) !== size) return 'other'
    const batch = this.batch
    this.place.queueOffset = queueOffset
    // Its size is the unit's, and locating checks every field against it: nothing past it is read.
    if (!batch.locateIn(this.buffer, view, at, offset, this.place)) return 'other'
    const fields = batch.fields
    if (tags !== undefined && !hasTagIn(batch.source, fields.propertiesAt, fields.propertiesAt + fields.propertiesLength, tags)) {
      batch.takeRefused()
      return 'refused'
    }
    batch.take(null)
    return 'taken'
  }

  /**
   * Starts a read of records by their commit-log offsets (lookups by key or by offset): takeAt()
   * each, then finishRead().
   */
  beginLookups(): void {
    this.begin(EMPTY)
  }

  /** A new read: an empty batch, the buffer from its start, no read-ahead window. */
  private begin(units: Buffer): void {
    this.batch.begin()
    this.units = units
    this.bufferUsed = 0
    this.windowFrom = -1
    this.windowEnd = -1
  }

  /**
   * Takes the record at `offset`, checked as the writer checks a lookup's candidate: a whole record
   * that says it is at `offset`, and with `keyed`, `keyed.topic`'s, holding the key (in KEYS or as
   * UNIQ_KEY) and stored within the range. False when it is not taken.
   */
  takeAt(offset: number, keyed: KeyedLookup | null): boolean {
    const at = this.readRecord(offset)
    if (at < 0) return false
    const batch = this.batch
    if (!batch.locateIn(this.buffer, this.bufferView, at, offset, null)) return false
    if (keyed !== null) {
      const fields = batch.fields
      const source = batch.source
      if (!textEquals(source, fields.topicAt, fields.topicAt + fields.topicLength, keyed.topic)) return false
      if (!hasKey(source, fields.propertiesAt, fields.propertiesAt + fields.propertiesLength, keyed.key, keyed.keyIsAscii)) return false
      const stored = readInt64BE(source, fields.storeTimestampAt)
      if (stored < keyed.from || stored > keyed.to) return false
    }
    batch.take(null)
    this.bufferUsed = at + batch.fields.totalSize
    return true
  }

  /**
   * Reads the record at `offset` into the read's buffer (after what was taken): one pread of up to
   * LOOKUP_READ_BYTES, and one of the whole record when it is longer. Where it starts, -1 when no
   * whole record of a plausible size is there.
   */
  private readRecord(offset: number): number {
    if (offset < 0) return -1
    let at = this.roomFor(LOOKUP_READ_BYTES)
    let got = this.readAt(offset, at, LOOKUP_READ_BYTES, MIN_RECORD_LENGTH)
    if (got < MIN_RECORD_LENGTH) return -1
    const size = this.bufferView.getInt32(at + OFFSET_TOTALSIZE)
    if (size < MIN_RECORD_LENGTH || size > MAX_RECORD_BYTES) return -1
    if (size > got) {
      at = this.roomFor(size)
      got = this.readAt(offset, at, size, size)
    }
    return got >= size ? at : -1
  }

  /** Where `length` bytes fit in the read's buffer after what was taken (a new buffer when they do not). */
  private roomFor(length: number): number {
    if (this.bufferUsed + length > this.buffer.length) {
      // Records taken from the last buffer stay there until finishRead() copies them.
      this.buffer = Buffer.allocUnsafeSlow(Math.max(READ_BUFFER_BYTES, 2 * this.buffer.length, length))
      this.bufferView = new DataView(this.buffer.buffer, this.buffer.byteOffset, this.buffer.length)
      this.bufferUsed = 0
    }
    return this.bufferUsed
  }

  /**
   * Reads up to `length` bytes at commit-log `offset` into buffer[at...] (not past the end of the
   * file holding it) and returns how many came; when fewer than `needed` came, the files are listed
   * again and, if the listing changed (a file rolled to, or rebuilt), the read is repeated.
   */
  private readAt(offset: number, at: number, length: number, needed: number): number {
    for (let attempt = 0; ; attempt++) {
      const segment = this.files.segmentOf(offset)
      const target = this.buffer.subarray(at, at + length)
      const got = segment === null ? 0 : this.files.read(segment, offset - segment.offset, length, target).length
      if (got >= needed || attempt === 1 || !this.files.refresh().changed) return got
    }
  }

  /** The messages of the records taken whose bodies pass their CRC (the others are counted), at most `limit`. */
  finishRead(limit?: number): BatchOutcome {
    const outcome = this.batch.finish(limit)
    this.bodyCrcFailures += outcome.badBodies.length
    this.units = EMPTY
    return outcome
  }

  /**
   * Reads the record at `offset` into the read's buffer with one pread, together with the records
   * of the units after `unitAt` that follow it in the same file closely enough (each within
   * READ_AHEAD_GAP_BYTES of the one before, READ_AHEAD_BYTES in all): a queue's records lie a few
   * hundred bytes to a few kilobytes apart, and a system call costs more than copying that much.
   * Returns where the record starts in the buffer, -1 when it is not all there.
   */
  private readWindow(unitAt: number, offset: number, size: number): number {
    const segment = this.files.segmentOf(offset)
    if (segment === null) return -1
    let end = offset + size
    const units = this.units
    for (let u = unitAt + CQ_STORE_UNIT_SIZE; u + CQ_STORE_UNIT_SIZE <= units.length; u += CQ_STORE_UNIT_SIZE) {
      const next = readUnitOffset(units, u)
      const nextEnd = next + readUnitSize(units, u)
      if (next < end || next - end > READ_AHEAD_GAP_BYTES || nextEnd - offset > READ_AHEAD_BYTES) break
      if (this.files.segmentOf(next) !== segment) break
      end = nextEnd
    }
    const at = this.roomFor(end - offset)
    const got = this.readAt(offset, at, end - offset, size)
    if (got < size) return -1
    this.windowFrom = offset
    this.windowEnd = offset + got
    this.windowAt = at
    this.bufferUsed = at + got
    return at
  }

  close(): void {
    this.files.close()
  }
}
