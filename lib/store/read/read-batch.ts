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
// Zero-copy mode (copyMessageBody: false): bodies are views of a private copy-on-write mapping of
// the commit-log file (MappedFile.exposedBuffer). Writing through one changes a private copy of
// the page, never the file; the CRC is checked on the bytes handed out, and when they differ from
// what is stored (someone wrote through an earlier view of the page) the record is served as a
// copy of the stored bytes instead.
import { Buffer } from 'node:buffer'
import type { CommitLogReader } from '../commitlog/commit-log.js'
import {
  decodeMessage,
  emptyRecordFields,
  MIN_RECORD_LENGTH,
  OFFSET_BODYCRC,
  OFFSET_PHYSICALOFFSET,
  type DecodedMessage,
} from '../commitlog/record.js'
import type { MessageExt } from '../types.js'
import { bodyCrcOf } from '../commitlog/body-crc.js'
import { getInt64 } from '../bytes.js'
import { native } from '../../native.js'
import { identifyRecord, type QueuePlace } from './record-identity.js'
import { ReadBytes, StoredMessage } from './stored-message.js'

const EMPTY = Buffer.alloc(0)
const INITIAL_RECORDS = 32
/**
 * Entries per record in copyCrcRanges' table: two rows of six. The first copies the fields before
 * the body (start, length, place in the private buffer) and the body (start, length, place in the
 * bodies, with its CRC); the second the fields after the body, right behind the first part, with
 * an empty body part (its CRC, 0, is not looked at).
 */
const ROW = 12
const ROW_HEAD_LENGTH = 1
const ROW_RECORD_TO = 2
const ROW_BODY_AT = 3
const ROW_BODY_LENGTH = 4
const ROW_BODY_TO = 5
const ROW_TAIL_AT = 6
const ROW_TAIL_LENGTH = 7
const ROW_TAIL_TO = 8
/** Table rows (and CRCs out) per record. */
const ROWS_PER_RECORD = 2
/**
 * The private copies of records are cut from slabs of this size, so a read allocates one buffer
 * (its bodies) rather than two: an ArrayBuffer costs more than reading a record. A message kept
 * keeps its slab alive (at most this many bytes more than its read's own).
 */
const RECORD_SLAB_BYTES = 64 * 1024

export interface ReadBatchOptions {
  /** copyMessageBody: false hands out views of the private mapping. */
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
  private sourceAt = 0
  private taken = 0
  // Copying mode, per record queued (k < queued): its rows of copyCrcRanges' table (see ROW), the
  // body's stored CRC, and (two per record) the CRCs computed.
  private queued = 0
  private table = new Float64Array(ROW * INITIAL_RECORDS)
  private expected = new Int32Array(INITIAL_RECORDS)
  private actual = new Int32Array(ROWS_PER_RECORD * INITIAL_RECORDS)
  private recordBytes = 0
  private bodyBytes = 0
  /** The source of each run of queued records, and where the run ends (reads rarely span two files). */
  private sources: Buffer[] = []
  private runEnds: number[] = []
  /** The slab the private record copies are cut from, and how much of it is used. */
  private slab: Buffer = EMPTY
  private slabView: DataView = new DataView(new ArrayBuffer(0))
  private slabUsed = 0
  private runCount = 0
  // Zero-copy mode: messages decoded as they come.
  private decoded: DecodedMessage[] = []
  private decodedBytes = 0
  private zeroCopyBad: number[] = []
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
    if (this.zeroCopy) {
      this.decoded = []
      this.decodedBytes = 0
      this.zeroCopyBad = []
    }
  }

  /**
   * Locates the record at `at` of the reader's held file and checks that it is the record at
   * commit-log offset `offset` (and of `place`, when given): see record-identity.ts. On success
   * `fields` and `source` describe it, and the caller takes it (take()), takes it without serving
   * it (takeRefused(), the read's filter said no), or leaves it. False when it is not that record.
   */
  locate(reader: CommitLogReader, at: number, offset: number, place: QueuePlace | null): boolean {
    const source = reader.data
    if (at < 0 || at + MIN_RECORD_LENGTH > source.length) return false
    this.source = source
    this.sourceAt = at
    return identifyRecord(source, reader.views.of(source), at, offset, place, this.fields)
  }

  /** Takes the record locate() found (and serves it, unless its body fails its CRC). */
  take(reader: CommitLogReader): void {
    this.taken++
    if (this.zeroCopy) {
      this.takeView(reader, this.sourceAt)
      return
    }
    const k = this.queued
    if (k === this.expected.length) this.grow()
    const source = this.source
    const runs = this.runCount
    if (runs === 0 || this.sources[runs - 1] !== source) {
      if (runs > 0) this.runEnds[runs - 1] = k
      this.sources[runs] = source
      this.runCount = runs + 1
    }
    const fields = this.fields
    const at = this.sourceAt
    const bodyAt = fields.bodyAt
    const bodyLength = fields.bodyLength
    const headLength = bodyAt - at
    const tailLength = fields.totalSize - headLength - bodyLength
    const recordTo = this.recordBytes
    const row = this.table
    const r = ROW * k
    row[r] = at
    row[r + ROW_HEAD_LENGTH] = headLength
    row[r + ROW_RECORD_TO] = recordTo
    row[r + ROW_BODY_AT] = bodyAt
    row[r + ROW_BODY_LENGTH] = bodyLength
    row[r + ROW_BODY_TO] = this.bodyBytes
    row[r + ROW_TAIL_AT] = bodyAt + bodyLength
    row[r + ROW_TAIL_LENGTH] = tailLength
    row[r + ROW_TAIL_TO] = recordTo + headLength
    row[r + 9] = 0
    row[r + 10] = 0
    row[r + 11] = 0
    this.expected[k] = reader.views.of(source).getInt32(at + OFFSET_BODYCRC)
    this.recordBytes = recordTo + headLength + tailLength
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
    this.actual = new Int32Array(ROWS_PER_RECORD * n)
  }

  private takeView(reader: CommitLogReader, at: number): void {
    const exposed = reader.exposed()
    let message = exposed.length > at ? decodeMessage(exposed, at, false) : null
    if (message !== null && this.verify && bodyCrcOf(message.body) !== message.bodyCRC) message = null
    if (message === null) {
      // Not what the file holds (a write through an earlier view of the page, or a page copied
      // before the writer reached it): judge and serve the stored bytes, as a copy.
      message = decodeMessage(reader.data, at, true)
      if (message === null) return
      if (this.verify && bodyCrcOf(message.body) !== message.bodyCRC) {
        this.zeroCopyBad.push(message.commitLogOffset)
        return
      }
    }
    this.decoded.push(message)
    this.decodedBytes += message.storeSize
  }

  /**
   * Copies and checks what was taken, and makes the messages: the first `limit` whose bodies pass
   * (the rest are zeroed like failing ones, so no served body's buffer reaches them).
   */
  finish(limit: number = Number.MAX_SAFE_INTEGER): BatchOutcome {
    if (this.zeroCopy) {
      let messages = this.decoded
      let bytes = this.decodedBytes
      if (messages.length > limit) {
        messages = messages.slice(0, limit)
        bytes = messages.reduce((sum, m) => sum + m.storeSize, 0)
      }
      const outcome = this.outcome
      outcome.messages = messages
      outcome.bytes = bytes
      outcome.badBodies = this.zeroCopyBad
      this.decoded = []
      this.zeroCopyBad = []
      return outcome
    }
    const count = this.queued
    if (count === 0) return this.done([], 0)
    const badBodies = this.badBodies
    // The bodies' buffer holds exactly the bytes copied into it: nothing to zero first
    // (allocUnsafeSlow: its own ArrayBuffer, not the shared pool).
    const bodies = Buffer.allocUnsafeSlow(this.bodyBytes)
    const base = this.reserveRecords(this.recordBytes)
    const records = this.slab
    const table = this.table
    if (base > 0) {
      for (let k = 0; k < count; k++) {
        table[ROW * k + ROW_RECORD_TO] += base
        table[ROW * k + ROW_TAIL_TO] += base
      }
    }
    const crcs = this.verify ? this.actual : null
    const runs = this.runCount
    if (runs === 1) {
      this.copyRun(this.sources[0], 0, count, records, bodies, crcs)
    } else {
      for (let r = 0, first = 0; r < runs; r++) {
        const end = r < runs - 1 ? this.runEnds[r] : count
        this.copyRun(this.sources[r], first, end, records, bodies, crcs)
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
    for (let k = 0; k < count; k++) {
      const r = ROW * k
      const bodyAt = table[r + ROW_BODY_TO]
      const bodyLength = table[r + ROW_BODY_LENGTH]
      const recordAt = table[r + ROW_RECORD_TO]
      if (crcs !== null && actual[ROWS_PER_RECORD * k] !== expected[k]) {
        badBodies.push(getInt64(bytes.dv, recordAt + OFFSET_PHYSICALOFFSET))
        bodies.fill(0, bodyAt, bodyAt + bodyLength)
        continue
      }
      if (n >= limit) {
        bodies.fill(0, bodyAt, bodyAt + bodyLength)
        continue
      }
      messages[n++] = new StoredMessage(bytes, recordAt, bodyAt, bodyLength)
      served += table[r + ROW_HEAD_LENGTH] + bodyLength + table[r + ROW_TAIL_LENGTH]
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

  /** Copies queued records [first, end), all from `source`, and their bodies, in one native call. */
  private copyRun(source: Buffer, first: number, end: number, records: Buffer, bodies: Buffer, crcs: Int32Array | null): void {
    const rowCount = ROWS_PER_RECORD * (end - first)
    if (first === 0) {
      native.copyCrcRanges(source, this.table, rowCount, records, bodies, crcs)
      return
    }
    const rows = this.table.subarray(ROW * first)
    native.copyCrcRanges(source, rows, rowCount, records, bodies, crcs === null ? null : crcs.subarray(ROWS_PER_RECORD * first))
  }

  private done(messages: MessageExt[], bytes: number): BatchOutcome {
    this.queued = 0
    // The mappings read are not kept reachable past the read.
    for (let r = 0; r < this.runCount; r++) this.sources[r] = EMPTY
    this.runCount = 0
    this.source = EMPTY
    const outcome = this.outcome
    outcome.messages = messages
    outcome.bytes = bytes
    outcome.badBodies = this.badBodies
    return outcome
  }
}
