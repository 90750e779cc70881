// The messages of one read, built so that nothing a consumer does with them reaches the store.
//
// Default (copying) mode, one pass: each record is located and checked where it lies (identity,
// the read's own filter), its positions queued; finish() then copies every queued record in one
// native call per commit-log file: each record without its body (the fields before it, then
// those after it, end to end) into a private buffer the messages' fields are read from, and
// bodies into the buffer the bodies are views of, each body's CRC computed in the same pass as its
// copy (the bytes checked are the bytes served). A body is copied once: copying it with the rest
// of the record as well cost a third more memory written per message, in fresh pages. Both buffers
// are exactly the size of what is copied into them, so they are not zero-filled first.
// `body.buffer` reaches the bodies of this read and nothing else; a body that fails its CRC is
// zeroed before the read returns. Messages are lazy views (stored-message.ts).
//
// Zero-copy mode (copyMessageBody: false): the same pass, but bodies stay where they are: views of
// a private copy-on-write mapping of the commit-log file (MappedFile.exposedBuffer). Writing
// through one changes a private copy of the page, never the file. The fields are still read from
// the private copy of the records, so nothing written through a view reaches them. Every body's
// CRC is computed on the bytes handed out (with checkCRCOnRead off too): when they differ from
// what is stored (someone wrote through an earlier view of the page, or the page was copied before
// the writer reached it) the record is served as a copy of the stored bytes instead.
import { Buffer } from 'node:buffer'
import type { CommitLogReader } from '../commitlog/commit-log.js'
import { emptyRecordFields, MIN_RECORD_LENGTH, OFFSET_BODYCRC, OFFSET_PHYSICALOFFSET } from '../commitlog/record.js'
import type { MessageExt } from '../types.js'
import { bodyCrcAt } from '../commitlog/body-crc.js'
import { getInt64 } from '../bytes.js'
import { native } from '../../native.js'
import { identifyRecord, type QueuePlace } from './record-identity.js'
import { ReadBytes, StoredMessage } from './stored-message.js'

const EMPTY = Buffer.alloc(0)
const EMPTY_VIEW = new DataView(new ArrayBuffer(0))
const INITIAL_RECORDS = 32
/**
 * Entries per record in splitCopyCrc's table: the record's start and length in the source, and its
 * body's start and length (the inner range: it goes to the bodies, with its CRC; the fields before
 * and after it go end to end into the private buffer).
 */
const ROW = 4
const ROW_LENGTH = 1
const ROW_BODY_AT = 2
const ROW_BODY_LENGTH = 3
/**
 * The private copies of records are cut from slabs of this size, so a read allocates one buffer
 * (its bodies) rather than two: an ArrayBuffer costs more than reading a record. A message kept
 * keeps its slab alive (at most this many bytes more than its read's own).
 */
const RECORD_SLAB_BYTES = 64 * 1024

export interface ReadBatchOptions {
  /** copyMessageBody: false hands out views of the private mapping (their CRCs always computed). */
  zeroCopy: boolean
  /** checkCRCOnRead: records whose body fails its CRC are not served. */
  verify: boolean
}

/**
 * What a finished batch served and what it refused. The batch hands out the same object (and
 * badBodies array) every time: read it before the next begin().
 */
export interface BatchOutcome {
  messages: MessageExt[]
  /** Bytes of the records served. */
  bytes: number
  /** Commit-log offsets of records not served because their body failed its CRC. */
  badBodies: number[]
}

export class ReadBatch {
  private readonly zeroCopy: boolean
  private readonly verify: boolean
  /** The positions of the record last located (locate()), in `source`. */
  readonly fields = emptyRecordFields()
  /** The bytes the record last located lies in (the reader's held file). */
  source: Buffer = EMPTY
  private sourceView: DataView = EMPTY_VIEW
  private sourceAt = 0
  private taken = 0
  // Copying mode, per record queued (k < queued): its row of splitCopyCrc's table (see ROW), the
  // body's stored CRC, and the CRC computed.
  private queued = 0
  private table = new Float64Array(ROW * INITIAL_RECORDS)
  private expected = new Int32Array(INITIAL_RECORDS)
  private actual = new Int32Array(INITIAL_RECORDS)
  private recordBytes = 0
  private bodyBytes = 0
  /** The source of each run of queued records, and where the run ends (reads rarely span two files). */
  private sources: Buffer[] = []
  /** Zero-copy mode: each run's file through its private mapping, at the same positions as its source. */
  private exposedSources: Buffer[] = []
  /** Zero-copy mode: the [start, length] of each body of a run, for crc32Ranges. */
  private bodyRanges = new Int32Array(2 * INITIAL_RECORDS)
  private runEnds: number[] = []
  /** The slab the private record copies are cut from, and how much of it is used. */
  private slab: Buffer = EMPTY
  private slabView: DataView = new DataView(new ArrayBuffer(0))
  private slabUsed = 0
  private runCount = 0
  // One outcome per batch, refilled by each finish(): a read allocates what it hands out (the
  // messages, their array and bytes) and nothing for its own bookkeeping.
  private readonly outcome: BatchOutcome = { messages: [], bytes: 0, badBodies: [] }
  private readonly badBodies: number[] = []

  constructor(options: ReadBatchOptions) {
    this.zeroCopy = options.zeroCopy
    this.verify = options.verify
  }

  /** Records taken so far (served, refused by the read's filter, or still to be checked). */
  get count(): number {
    return this.taken
  }

  /** Starts a batch. */
  begin(): void {
    this.taken = 0
    this.queued = 0
    this.recordBytes = 0
    this.bodyBytes = 0
    this.runCount = 0
    this.badBodies.length = 0
  }

  /**
   * Locates the record at `at` of the reader's held file and checks that it is the record at
   * commit-log offset `offset` (and of `place`, when given): see record-identity.ts. On success
   * `fields` and `source` describe it, and the caller takes it (take()), takes it without serving
   * it (takeRefused(), the read's filter said no), or leaves it. False when it is not that record.
   */
  locate(reader: CommitLogReader, at: number, offset: number, place: QueuePlace | null): boolean {
    const source = reader.data
    return this.locateIn(source, reader.views.of(source), at, offset, place)
  }

  /**
   * locate() in bytes of the caller's (`dv` a view of them): records another process's store holds,
   * read into a buffer of the reader's. Copying mode only (take(null)).
   */
  locateIn(source: Buffer, dv: DataView, at: number, offset: number, place: QueuePlace | null): boolean {
    if (at < 0 || at + MIN_RECORD_LENGTH > source.length) return false
    this.source = source
    this.sourceView = dv
    this.sourceAt = at
    return identifyRecord(source, dv, at, offset, place, this.fields)
  }

  /**
   * Takes the record locate() found (and serves it, unless its body fails its CRC); `reader` is
   * the one it was located with (null after locateIn()).
   */
  take(reader: CommitLogReader | null): void {
    this.taken++
    const k = this.queued
    if (k === this.expected.length) this.grow()
    const source = this.source
    const runs = this.runCount
    if (runs === 0 || this.sources[runs - 1] !== source) {
      if (runs > 0) this.runEnds[runs - 1] = k
      this.sources[runs] = source
      if (this.zeroCopy) this.exposedSources[runs] = reader === null ? EMPTY : reader.exposed()
      this.runCount = runs + 1
    }
    const fields = this.fields
    const at = this.sourceAt
    const bodyLength = fields.bodyLength
    const row = this.table
    const r = ROW * k
    row[r] = at
    row[r + ROW_LENGTH] = fields.totalSize
    row[r + ROW_BODY_AT] = fields.bodyAt
    row[r + ROW_BODY_LENGTH] = bodyLength
    this.expected[k] = this.sourceView.getInt32(at + OFFSET_BODYCRC)
    this.recordBytes += fields.totalSize - bodyLength
    this.bodyBytes += bodyLength
    this.queued = k + 1
  }

  /** Counts the record locate() found as taken (for the read's limits) without serving it. */
  takeRefused(): void {
    this.taken++
  }

  private grow(): void {
    const n = this.expected.length * 2
    const table = new Float64Array(ROW * n)
    table.set(this.table)
    const expected = new Int32Array(n)
    expected.set(this.expected)
    this.table = table
    this.expected = expected
    this.actual = new Int32Array(n)
    this.bodyRanges = new Int32Array(2 * n)
  }

  /**
   * Copies and checks what was taken, and makes the messages: the first `limit` whose bodies pass
   * (the rest are zeroed like failing ones, so no served body's buffer reaches them).
   */
  finish(limit: number = Number.MAX_SAFE_INTEGER): BatchOutcome {
    if (this.zeroCopy) return this.finishInPlace(limit)
    const count = this.queued
    if (count === 0) return this.done([], 0)
    const badBodies = this.badBodies
    // The bodies' buffer holds exactly the bytes copied into it: nothing to zero first
    // (allocUnsafeSlow: its own ArrayBuffer, not the shared pool).
    const bodies = Buffer.allocUnsafeSlow(this.bodyBytes)
    const base = this.reserveRecords(this.recordBytes)
    const records = this.slab
    const table = this.table
    const crcs = this.verify ? this.actual : null
    const runs = this.runCount
    if (runs === 1) {
      native.splitCopyCrc(this.sources[0], table, count, records, base, bodies, 0, crcs)
    } else {
      let recordTo = base
      let bodyTo = 0
      for (let r = 0, first = 0; r < runs; r++) {
        const end = r < runs - 1 ? this.runEnds[r] : count
        native.splitCopyCrc(
          this.sources[r],
          table.subarray(ROW * first),
          end - first,
          records,
          recordTo,
          bodies,
          bodyTo,
          crcs === null ? null : crcs.subarray(first),
        )
        for (let k = first; k < end; k++) {
          recordTo += table[ROW * k + ROW_LENGTH] - table[ROW * k + ROW_BODY_LENGTH]
          bodyTo += table[ROW * k + ROW_BODY_LENGTH]
        }
        first = end
      }
    }
    const bytes = new ReadBytes(records, this.slabView, bodies)
    const expected = this.expected
    const actual = this.actual
    // Sized once (most reads serve every record they copied), cut to what was served below.
    const messages: MessageExt[] = new Array(Math.min(count, limit))
    let n = 0
    let served = 0
    // Where each record's copy and body start: the copies lie end to end, as splitCopyCrc wrote them.
    let recordAt = base
    let bodyAt = 0
    for (let k = 0; k < count; k++) {
      const r = ROW * k
      const length = table[r + ROW_LENGTH]
      const bodyLength = table[r + ROW_BODY_LENGTH]
      const at = recordAt
      const bodyFrom = bodyAt
      recordAt += length - bodyLength
      bodyAt += bodyLength
      if (crcs !== null && actual[k] !== expected[k]) {
        badBodies.push(getInt64(bytes.dv, at + OFFSET_PHYSICALOFFSET))
        bodies.fill(0, bodyFrom, bodyFrom + bodyLength)
        continue
      }
      if (n >= limit) {
        bodies.fill(0, bodyFrom, bodyFrom + bodyLength)
        continue
      }
      messages[n++] = new StoredMessage(bytes, at, bodyFrom, bodyLength)
      served += length
    }
    if (n < messages.length) messages.length = n
    return this.done(messages, served)
  }

  /**
   * finish() of zero-copy mode: the records without their bodies are copied as in copying mode
   * (one native call per file), each body's CRC is computed where it lies in the private mapping
   * (one more), and the bodies that match what is stored are served in place.
   */
  private finishInPlace(limit: number): BatchOutcome {
    const count = this.queued
    if (count === 0) return this.done([], 0)
    const badBodies = this.badBodies
    const base = this.reserveRecords(this.recordBytes)
    const records = this.slab
    const dv = this.slabView
    const table = this.table
    const expected = this.expected
    const actual = this.actual
    const ranges = this.bodyRanges
    const messages: MessageExt[] = new Array(Math.min(count, limit))
    let n = 0
    let served = 0
    let recordAt = base
    const runs = this.runCount
    for (let r = 0, first = 0; r < runs; r++) {
      const end = r < runs - 1 ? this.runEnds[r] : count
      const source = this.sources[r]
      const exposed = this.exposedSources[r]
      native.splitCopyCrc(source, first === 0 ? table : table.subarray(ROW * first), end - first, records, recordAt, null, 0, null)
      // A body the private mapping does not reach gets an empty range here and a copy below.
      for (let k = first, j = 0; k < end; k++, j += 2) {
        const bodyAt = table[ROW * k + ROW_BODY_AT]
        const bodyLength = table[ROW * k + ROW_BODY_LENGTH]
        const inside = bodyAt + bodyLength <= exposed.length
        ranges[j] = inside ? bodyAt : 0
        ranges[j + 1] = inside ? bodyLength : 0
      }
      native.crc32Ranges(exposed, ranges, end - first, first === 0 ? actual : actual.subarray(first))
      const bytes = new ReadBytes(records, dv, exposed)
      for (let k = first; k < end; k++) {
        const row = ROW * k
        const length = table[row + ROW_LENGTH]
        const bodyAt = table[row + ROW_BODY_AT]
        const bodyLength = table[row + ROW_BODY_LENGTH]
        const at = recordAt
        recordAt += length - bodyLength
        const inPlace = bodyAt + bodyLength <= exposed.length && actual[k] === expected[k]
        // Not what the file holds: the stored bytes are judged, and served as a copy.
        if (!inPlace && this.verify && bodyCrcAt(source, bodyAt, bodyLength) !== expected[k]) {
          badBodies.push(getInt64(dv, at + OFFSET_PHYSICALOFFSET))
          continue
        }
        if (n >= limit) continue
        if (inPlace) {
          messages[n++] = new StoredMessage(bytes, at, bodyAt, bodyLength)
        } else {
          const copy = Buffer.allocUnsafeSlow(bodyLength)
          source.copy(copy, 0, bodyAt, bodyAt + bodyLength)
          messages[n++] = new StoredMessage(new ReadBytes(records, dv, copy), at, 0, bodyLength)
        }
        served += length
      }
      first = end
    }
    if (n < messages.length) messages.length = n
    return this.done(messages, served)
  }

  /** Where `size` bytes of private record copies start in `slab` (a new slab when it is full). */
  private reserveRecords(size: number): number {
    if (this.slabUsed + size > this.slab.length) {
      this.slab = Buffer.allocUnsafeSlow(Math.max(RECORD_SLAB_BYTES, size))
      this.slabView = new DataView(this.slab.buffer, this.slab.byteOffset, this.slab.byteLength)
      this.slabUsed = 0
    }
    const at = this.slabUsed
    this.slabUsed = at + size
    return at
  }

  private done(messages: MessageExt[], bytes: number): BatchOutcome {
    this.queued = 0
    // The mappings read are not kept reachable past the read.
    for (let r = 0; r < this.runCount; r++) {
      this.sources[r] = EMPTY
      if (this.zeroCopy) this.exposedSources[r] = EMPTY
    }
    this.runCount = 0
    this.source = EMPTY
    this.sourceView = EMPTY_VIEW
    const outcome = this.outcome
    outcome.messages = messages
    outcome.bytes = bytes
    outcome.badBodies = this.badBodies
    return outcome
  }
}
