// The commit log as a read-only opener sees it: records read by offset (checked before they are
// served), the first offset still on disk, and where the written records end.
import { Buffer } from 'node:buffer'
import { native } from '../../native.js'
import {
  BLANK_MAGIC_CODE,
  decodeMessage,
  MESSAGE_MAGIC_CODE,
  MIN_RECORD_LENGTH,
  OFFSET_MAGIC,
  OFFSET_PHYSICALOFFSET,
  OFFSET_QUEUEID,
  OFFSET_QUEUEOFFSET,
  OFFSET_TOTALSIZE,
  type DecodedMessage,
} from '../commitlog/record.js'
import { readInt64BE } from '../bytes.js'
import { ReadOnlySegments } from './read-only-segments.js'

/** The head of a record a unit is checked against: through PHYSICALOFFSET. */
const RECORD_HEAD_BYTES = OFFSET_PHYSICALOFFSET + 8
/** A record longer than this is damage (maxMessageSize is at most a few MiB plus headroom). */
const MAX_RECORD_BYTES = 64 * 1024 * 1024
/** Bytes read per step when walking the last file for the log's end. */
const WALK_CHUNK_BYTES = 1024 * 1024

export class ReadOnlyCommitLog {
  readonly files: ReadOnlySegments
  /** Where the walk for the log's end stopped last time (it resumes there). */
  private walkedTo = -1
  private readonly head = Buffer.alloc(RECORD_HEAD_BYTES)
  private readonly crcOut = new Int32Array(1)
  /** Records not served because their body failed its CRC. */
  bodyCrcFailures = 0

  constructor(dir: string) {
    this.files = new ReadOnlySegments(dir)
  }

  refresh(): void {
    if (this.files.refresh().replaced) this.walkedTo = -1
  }

  /** The first offset still on disk, -1 when the log holds no file. */
  minOffset(): number {
    this.refresh()
    return this.files.segments[0]?.offset ?? -1
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
   * The message whose record starts at `offset` (of `size` bytes when given), decoded from a
   * private copy of its bytes; null when no whole record is there or its body fails its CRC.
   */
  read(offset: number, size = -1): DecodedMessage | null {
    if (offset < 0) return null
    let segment = this.files.segmentOf(offset)
    if (segment === null) return null
    let within = offset - segment.offset
    let length = size
    if (length < 0) {
      const head = this.files.read(segment, within, 8, this.head)
      if (head.length < 8 || head.readInt32BE(OFFSET_MAGIC) !== MESSAGE_MAGIC_CODE) return null
      length = head.readInt32BE(OFFSET_TOTALSIZE)
    }
    if (length < MIN_RECORD_LENGTH || length > MAX_RECORD_BYTES) return null
    let bytes = this.files.read(segment, within, length)
    if (bytes.length < length && this.files.refresh().changed) {
      // The file may have been replaced (recovery rebuilt it): read the new one.
      segment = this.files.segmentOf(offset)
      if (segment === null) return null
      within = offset - segment.offset
      bytes = this.files.read(segment, within, length)
    }
    if (bytes.length < length || bytes.readInt32BE(OFFSET_TOTALSIZE) !== length) return null
    if (bytes.readInt32BE(OFFSET_MAGIC) !== MESSAGE_MAGIC_CODE) return null
    const message = decodeMessage(bytes, 0, false)
    if (message === null || message.commitLogOffset !== offset) return null
    native.crc32Each([message.body], this.crcOut)
    if (this.crcOut[0] !== message.bodyCRC) {
      this.bodyCrcFailures++
      return null
    }
    return message
  }

  close(): void {
    this.files.close()
  }
}
