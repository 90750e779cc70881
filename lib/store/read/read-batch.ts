// The messages of one read, built so that nothing a consumer does with them reaches the store.
//
// Default (copying) mode: every record served is copied out of the mapping into one zero-filled
// ArrayBuffer per read, its body CRC is checked on that copy (so the bytes checked are the bytes
// served), and messages are lazy views of it (stored-message.ts). A consumer may write into a
// body, keep it, or transfer its ArrayBuffer: only its own copy changes. `body.buffer` reaches the
// records of this read and nothing else: records that are not served (a CRC failure, a tag-hash
// collision) are zeroed before the read returns.
//
// Zero-copy mode (copyMessageBody: false): bodies are views of a private copy-on-write mapping of
// the commit-log file (MappedFile.exposedBuffer). Writing through one changes a private copy of
// the page, never the file; the CRC is checked on the bytes handed out, and when they differ from
// what is stored (someone wrote through an earlier view of the page) the record is served as a
// copy of the stored bytes instead.
import type { CommitLogReader } from '../commitlog/commit-log.js'
import {
  decodeMessage,
  emptyRecordFields,
  locateRecordFields,
  MIN_RECORD_LENGTH,
  OFFSET_BODYCRC,
  type DecodedMessage,
} from '../commitlog/record.js'
import type { MessageExt } from '../types.js'
import { BodyCrcBatch, bodyCrcOf } from '../commitlog/body-crc.js'
import { StoredMessage } from './stored-message.js'

/** The smallest batch buffer: below this, growing would cost more than the bytes it saves. */
const MIN_BATCH_BYTES = 1024
const EMPTY = Buffer.alloc(0)

export interface ReadBatchOptions {
  /** copyMessageBody: false hands out views of the private mapping. */
  zeroCopy: boolean
  /** checkCRCOnRead: records whose body fails its CRC are not served. */
  verify: boolean
}

/** What a finished batch served and what it refused. */
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
  private readonly fields = emptyRecordFields()
  private readonly crc = new BodyCrcBatch()
  // Copying mode: the batch buffer and where each record starts in it.
  private bytes: Buffer = EMPTY
  private dv = new DataView(this.bytes.buffer)
  private used = 0
  private source: Buffer = EMPTY
  private sourceDv: DataView = new DataView(new ArrayBuffer(0))
  /** Per record taken: where it starts, and where its body starts and ends, in `bytes`. */
  private starts: number[] = []
  private bodyStarts: number[] = []
  private bodyEnds: number[] = []
  // Zero-copy mode: messages decoded as they come.
  private decoded: DecodedMessage[] = []
  private decodedBytes = 0
  private zeroCopyBad: number[] = []

  constructor(options: ReadBatchOptions) {
    this.zeroCopy = options.zeroCopy
    this.verify = options.verify
  }

  /** Records taken so far (served or still to be checked). */
  get count(): number {
    return this.zeroCopy ? this.decoded.length + this.zeroCopyBad.length : this.starts.length
  }

  /** Starts a batch expected to take about `estimateBytes` (it grows if needed). */
  begin(estimateBytes: number): void {
    this.used = 0
    this.starts = []
    this.bodyStarts = []
    this.bodyEnds = []
    this.crc.reset()
    this.decoded = []
    this.decodedBytes = 0
    this.zeroCopyBad = []
    if (!this.zeroCopy) {
      this.bytes = Buffer.alloc(Math.max(MIN_BATCH_BYTES, estimateBytes))
      this.dv = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength)
    }
  }

  /**
   * Takes the record at `at` of the reader's held file. False when the bytes there are not a
   * complete message record (the caller skips it, as decodeMessage's null always meant).
   */
  add(reader: CommitLogReader, at: number): boolean {
    const source = reader.data
    if (at < 0 || at + MIN_RECORD_LENGTH > source.length) return false
    return this.zeroCopy ? this.addView(reader, at) : this.addCopy(source, at)
  }

  /** A DataView over the reader's bytes, made once per file the reader holds. */
  private sourceView(source: Buffer): DataView {
    if (source !== this.source) {
      this.source = source
      this.sourceDv = new DataView(source.buffer, source.byteOffset, source.byteLength)
    }
    return this.sourceDv
  }

  private addCopy(source: Buffer, at: number): boolean {
    // Checked where it lies, so a damaged length never sizes a copy.
    const fields = this.fields
    if (!locateRecordFields(this.sourceView(source), at, source.length, fields)) return false
    const size = fields.totalSize
    if (this.used + size > this.bytes.length) this.grow(this.used + size)
    const start = this.used
    source.copy(this.bytes, start, at, at + size)
    const bodyAt = start + (fields.bodyAt - at)
    this.used = start + size
    this.starts.push(start)
    this.bodyStarts.push(bodyAt)
    this.bodyEnds.push(bodyAt + fields.bodyLength)
    // The CRC runs on the copy at finish(): the bytes checked are the bytes served.
    if (this.verify) this.crc.add(bodyAt, fields.bodyLength, this.dv.getInt32(start + OFFSET_BODYCRC))
    return true
  }

  private grow(needed: number): void {
    const bigger = Buffer.alloc(Math.max(needed, this.bytes.length * 2))
    this.bytes.copy(bigger, 0, 0, this.used)
    this.bytes = bigger
    this.dv = new DataView(bigger.buffer, bigger.byteOffset, bigger.byteLength)
  }

  private addView(reader: CommitLogReader, at: number): boolean {
    const exposed = reader.exposed()
    let message = exposed.length > at ? decodeMessage(exposed, at, false) : null
    if (message !== null && this.verify && bodyCrcOf(message.body) !== message.bodyCRC) message = null
    if (message === null) {
      // Not what the file holds (a write through an earlier view of the page, or a page copied
      // before the writer reached it): judge and serve the stored bytes, as a copy.
      message = decodeMessage(reader.data, at, true)
      if (message === null) return false
      if (this.verify && bodyCrcOf(message.body) !== message.bodyCRC) {
        this.zeroCopyBad.push(message.commitLogOffset)
        return true
      }
    }
    this.decoded.push(message)
    this.decodedBytes += message.storeSize
    return true
  }

  /**
   * Checks the CRCs and makes the messages. `keep` (the exact-tag check) may refuse a message;
   * a refused or failing record is zeroed, so no served body's buffer reaches it.
   */
  finish(keep?: (message: MessageExt) => boolean): BatchOutcome {
    if (this.zeroCopy) {
      const messages = keep === undefined ? this.decoded : this.decoded.filter(keep)
      let bytes = this.decodedBytes
      if (messages.length !== this.decoded.length) bytes = messages.reduce((sum, m) => sum + m.storeSize, 0)
      const outcome = { messages, bytes, badBodies: this.zeroCopyBad }
      this.decoded = []
      this.zeroCopyBad = []
      return outcome
    }
    const starts = this.starts
    const bodyStarts = this.bodyStarts
    const bodyEnds = this.bodyEnds
    const dv = this.dv
    const bytes = this.bytes
    const end = this.used
    const crc = this.crc
    if (this.verify) crc.run(bytes)
    const messages: MessageExt[] = []
    const badBodies: number[] = []
    let served = 0
    for (let k = 0; k < starts.length; k++) {
      const at = starts[k]
      const recordEnd = k + 1 < starts.length ? starts[k + 1] : end
      const message = new StoredMessage(bytes, dv, at, bodyStarts[k], bodyEnds[k])
      if (this.verify && crc.failed(k)) {
        badBodies.push(message.commitLogOffset)
        bytes.fill(0, at, recordEnd)
      } else if (keep !== undefined && !keep(message)) {
        bytes.fill(0, at, recordEnd)
      } else {
        messages.push(message)
        served += recordEnd - at
      }
    }
    this.starts = []
    this.bodyStarts = []
    this.bodyEnds = []
    this.bytes = EMPTY
    this.source = EMPTY
    crc.reset()
    return { messages, bytes: served, badBodies }
  }
}
