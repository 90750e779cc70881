// The commit log: every message of every topic, appended to one run of mapped files.
//
// Appends are synchronous and run on the JavaScript thread, which is what RocketMQ's put lock
// guarantees: exactly one appender, store timestamps taken in append order, queue offsets assigned
// densely per (topic, queueId). A record is encoded straight into the mapping (or the transient
// pool's write buffer, or SYNC_FLUSH's write stage); a record that does not fit with 8 bytes to
// spare closes the file with a blank record and goes to the next file.
import { Buffer } from 'node:buffer'
import { join } from 'node:path'

import {
  checkRecord,
  END_FILE_MIN_BLANK_LENGTH,
  MESSAGE_MAGIC_CODE,
  OFFSET_BODYCRC,
  OFFSET_MAGIC,
  OFFSET_SYSFLAG,
  storeTimestampOffset,
  writeBlank,
  writeRecord,
  type DispatchRequest,
  type HostAddress,
  type PreparedRecord,
} from './record.js'
import {
  scanRecords,
  type RecoveredRecordHandler,
  type RecoveryOutcome,
  type RecoveryProgress,
  type ScanResume,
  type ScanSource,
} from './recovery-scan.js'
import { isQueuedRecord } from './sys-flag.js'
import { PutMessageResult } from './put-message-result.js'
import { QueueOffsetTable } from './queue-offset-table.js'
import { DataViewCache, readUInt64BE } from '../bytes.js'
import { WrittenBodyCrcs, type PendingBodyCrc } from './body-crc.js'
import type { MessageStoreConfig } from '../config.js'
import { COMMITLOG_DIR } from '../store-paths.js'
import type { MappedFile, SelectMappedBufferResult } from '../mapped/mapped-file.js'
import { MappedFileQueue } from '../mapped/mapped-file-queue.js'
import { readSegmentBytes } from '../mapped/segment-io.js'
import { HugePagesAhead, transparentHugePageBytes } from './huge-pages-ahead.js'
import { WriteStage } from '../mapped/write-stage.js'
import { ScanMappings } from './scan-mappings.js'
import { StagedRequests } from './staged-requests.js'
import type { MappingBudget } from '../mapped/mapping-budget.js'
import type { TransientStorePool } from '../mapped/transient-store-pool.js'

export type { RecoveredRecordHandler, RecoveryDamage, RecoveryOutcome, RecoveryProgress } from './recovery-scan.js'

export { PutMessageResult, type PutMessageStatus } from './put-message-result.js'
export { QueueOffsetTable } from './queue-offset-table.js'

/**
 * Commit-log blocks are reserved this far ahead of the writer, not a whole file at a time: a new
 * store takes a few MB, and a full disk stops puts with CREATE_MAPEDFILE_FAILED, never a SIGBUS.
 */
export const COMMIT_LOG_RESERVE_CHUNK_BYTES = 2 * 1024 * 1024

const EMPTY = Buffer.alloc(0)

/**
 * Bytes a burst leaves behind the writer before writeBackBehind() starts their write-back, in
 * whole aligned steps (a multiple of 2 MiB: the kernel maps large page-cache folios 2 MiB at a
 * time, and dropping such a range (dropPages) unmaps those mappings whole instead of splitting
 * them). Each write-back wakes a pool thread, which in a virtual machine costs the JS thread tens
 * to hundreds of microseconds: 8 MiB steps make a burst pay that a quarter as often as 2 MiB ones.
 */
export const COMMIT_LOG_WRITE_BACK_STEP = 8 * 1024 * 1024
/** Holds of one file a reader serves from the view it kept before taking a fresh one. */
const REUSE_LIMIT = 256

/**
 * Reads many records with one hold per file instead of one per record: the reader keeps the file
 * of the last record held and reads from a Buffer over its readable part. Close it when done.
 */
export class CommitLogReader {
  private file: MappedFile | null = null
  /** The readable bytes of the held file; record positions from locate() index into it. */
  data: Buffer = EMPTY
  /** The DataView of `data` for the record decoders (kept with the last file's view, below). */
  readonly views = new DataViewCache()
  private exposedOf: MappedFile | null = null
  private exposedData: Buffer = EMPTY
  // The last file's readable view, kept across close() so that a reader used for one read after
  // another does not make a view (and tell the mapping budget) per read: reused while the file is
  // mapped by the same map and its readable end has not moved, and retaken every REUSE_LIMIT holds
  // (so the budget still sees the file used).
  private lastFile: MappedFile | null = null
  private lastGeneration = -1
  private lastData: Buffer = EMPTY
  private reuses = 0

  constructor(private readonly queue: MappedFileQueue) {}

  /** The position of record [offset, offset + size) in `data`, or -1 when it is not readable. */
  locate(offset: number, size: number): number {
    let file = this.file
    if (file === null || offset < file.fileFromOffset || offset >= file.fileFromOffset + file.fileSize) {
      this.close()
      file = this.queue.findMappedFileByOffset(offset)
      if (file === null || !file.hold()) return -1
      this.file = file
      this.data = this.readableOf(file)
    }
    const pos = offset - file.fileFromOffset
    return pos >= 0 && size >= 0 && pos + size <= this.data.length ? pos : -1
  }

  private readableOf(file: MappedFile): Buffer {
    const last = this.lastData
    if (
      file === this.lastFile &&
      file.mapGeneration === this.lastGeneration &&
      last.length === file.readPosition &&
      last.byteLength > 0 &&
      ++this.reuses < REUSE_LIMIT
    ) {
      return last
    }
    const data = file.readableBuffer()
    this.lastFile = file
    this.lastGeneration = file.mapGeneration
    this.lastData = data
    this.reuses = 0
    return data
  }

  /**
   * The held file's bytes through its private mapping (MappedFile.exposedBuffer), at the same
   * positions as `data`: what zero-copy reads hand out.
   */
  exposed(): Buffer {
    if (this.file === null) return EMPTY
    // Once per held file: nothing outside the store runs while a read holds it.
    if (this.exposedOf !== this.file) {
      this.exposedOf = this.file
      this.exposedData = this.file.exposedBuffer()
    }
    return this.exposedData
  }

  close(): void {
    if (this.file !== null) this.file.release()
    this.file = null
    this.data = EMPTY
    this.exposedOf = null
    this.exposedData = EMPTY
  }
}

export class CommitLog {
  readonly mappedFileQueue: MappedFileQueue
  /** The next queue offset to assign per (topic, queueId). */
  readonly topicQueueTable = new QueueOffsetTable()
  private readonly config: MessageStoreConfig
  private readonly storeHost: HostAddress
  /** The DataView of the file being appended to; cleared at shutdown so no mapping outlives it. */
  private readonly views = new DataViewCache()

  /** Where the last append wrote an end-of-file blank before its record, or -1. */
  lastBlankOffset = -1
  /** Offset of the last record appended or recovered, -1 when the log is empty. */
  lastRecordOffset = -1
  /** Body CRCs of records prepared with BODY_CRC_AFTER_WRITE, until finishAppends(). */
  private readonly writtenCrcs = new WrittenBodyCrcs()
  /**
   * Past this position of a file (its middle) the appends ask for the next file, made on the libuv
   * pool (MappedFileQueue.prepareNext), once per file (finishAppends, a slice of a put at a time).
   */
  private readonly nextFileFrom: number
  private nextFileAskedBy: MappedFile | null = null
  /** The file writeBackBehind() last looked at, and where in it the next write-back starts. */
  private writeBackFile: MappedFile | null = null
  private writeBackFrom = 0
  /** SYNC_FLUSH: appends are staged and written into the file by each group commit (write-stage.ts). */
  private readonly stage: WriteStage | null
  /** Appends go to the transient store pool's write buffers (ASYNC_FLUSH with transientStorePoolEnable). */
  private readonly pooled: boolean
  /** Dispatch requests of staged records: the put's own dispatch, made once the record is in the file. */
  private readonly stagedRequests = new StagedRequests()
  /** Huge pages ahead of a fast writer (ASYNC_FLUSH through the mapping, Linux); null otherwise. */
  private readonly hugePages: HugePagesAhead | null

  /**
   * With `budget`, files older than the one being written are mapped on first use within it and
   * unmapped once idle (unheld and flushed); without one they stay mapped once used.
   */
  constructor(
    storeRoot: string,
    config: MessageStoreConfig,
    storeHost: HostAddress,
    pool: TransientStorePool | null,
    readOnly = false,
    budget: MappingBudget | null = null,
  ) {
    this.config = config
    this.storeHost = storeHost
    this.pooled = pool !== null
    this.stage = config.flushDiskType === 'SYNC_FLUSH' && !readOnly && pool === null ? new WriteStage() : null
    const hugePage = !readOnly && pool === null && config.flushDiskType === 'ASYNC_FLUSH' ? transparentHugePageBytes() : 0
    this.hugePages = hugePage > 0 ? new HugePagesAhead(config.flushIntervalCommitLog, hugePage) : null
    this.nextFileFrom = Math.floor(config.mappedFileSizeCommitLog / 2)
    this.mappedFileQueue = new MappedFileQueue(join(storeRoot, COMMITLOG_DIR), config.mappedFileSizeCommitLog, {
      preallocateNext: !readOnly,
      // Fault new files in off the JS thread, so appends never take a first-touch page fault
      // (about 20 times the cost of encoding a 256-byte record); warmMapedFileEnable adds mlock.
      // Not with a write stage: nothing writes through the mapping, and a warm-up would dirty
      // pages of zeros ahead for the group commit's fdatasync to write.
      warmMappedFiles: !readOnly && this.stage === null,
      lockWarmedFiles: config.warmMapedFileEnable,
      reserveChunkBytes: COMMIT_LOG_RESERVE_CHUNK_BYTES,
      warmChunk: this.hugePages?.warmChunk,
      transientStorePool: pool,
      readOnly,
      // A reopen maps the files it reads (the tail, then what readers ask for), not all of them;
      // with a budget, the old files among them are unmapped again once idle.
      mapOnFirstUse: true,
      budget,
      budgetOldFilesOnly: true,
    })
  }

  load(): void {
    this.mappedFileQueue.load()
  }

  // ---- append -------------------------------------------------------------------------------

  /**
   * Appends one prepared record. Synchronous: the caller is the only appender while it runs.
   * `now` is the store timestamp (taken by the caller so that a batch can share a clock read).
   */
  append(record: PreparedRecord, now: number): PutMessageResult {
    const counted = isQueuedRecord(record.sysFlag)
    const queueOffset = counted ? this.topicQueueTable.get(record.topic, record.queueId) : 0

    let file = this.mappedFileQueue.getLastMappedFile()
    if (file === null || file.isFull()) file = this.mappedFileQueue.getLastMappedFile(0)
    if (file === null) return this.createFailed()
    if (!this.reserveFor(file, record)) return this.reserveFailed(file)

    this.lastBlankOffset = -1
    const room = record.length + END_FILE_MIN_BLANK_LENGTH
    if (this.stage?.needsRoom(file, room)) this.prepareStage(file, room)
    let pos = file.wrotePosition
    if (room > file.fileSize - pos) {
      // No room: a blank closes this file and the record goes at the start of the next one.
      writeBlank(file.appendTarget(), pos - file.appendBase, file.fileSize - pos, this.views)
      this.lastBlankOffset = file.fileFromOffset + pos
      file.wrotePosition = file.fileSize
      // The full file's staged bytes go into it now, so the next file can take the stage.
      if (this.stage !== null) this.prepareStage(file, room)
      file = this.mappedFileQueue.getLastMappedFile(0)
      if (file === null) return this.createFailed()
      if (!this.reserveFor(file, record)) return this.reserveFailed(file)
      if (this.stage?.needsRoom(file, room)) this.prepareStage(file, room)
      pos = file.wrotePosition
      if (room > file.fileSize - pos) {
        // A record larger than a whole file: prepareRecord's limits make this unreachable unless
        // mappedFileSizeCommitLog is smaller than maxMessageSize.
        return PutMessageResult.failed(
          'MESSAGE_ILLEGAL',
          `a ${record.length}-byte record does not fit in a ${file.fileSize}-byte commit-log file`,
        )
      }
    }
    const wroteOffset = file.fileFromOffset + pos
    const target = file.appendTarget()
    const at = pos - file.appendBase
    const bodyAt = writeRecord(target, at, record, queueOffset, wroteOffset, now, this.views)
    if (record.bodyCRC < 0) {
      this.writtenCrcs.add(target, this.views.of(target), at + OFFSET_BODYCRC, bodyAt, record.body.length, record as PendingBodyCrc)
    }
    file.wrotePosition = pos + record.length
    this.lastRecordOffset = wroteOffset
    file.storeTimestamp = now
    if (counted) this.topicQueueTable.set(record.topic, record.queueId, queueOffset + 1)
    return new PutMessageResult('PUT_OK', wroteOffset, record.length, queueOffset, now, this.storeHost)
  }

  /**
   * Has the file after `file` made ahead: asked at its middle rather than when it is created, so
   * that a new store's first puts do not share the pool and the disk with the making of a file
   * they do not need, and a log that never reaches the middle of its file never makes one.
   */
  private askNextFile(file: MappedFile): void {
    this.nextFileAskedBy = file
    this.mappedFileQueue.prepareNext()
  }

  /** Bytes appended and not yet in the files: the transient store pool's write buffers, or the write stage. */
  commitBehindBytes(): number {
    const queue = this.mappedFileQueue
    if (this.pooled) return queue.remainHowManyDataToCommit()
    return this.stage === null ? 0 : queue.getMaxWrotePosition() - queue.getMaxOffset()
  }

  /** True when appends are staged (SYNC_FLUSH): readable and dispatched once commitStaged() wrote them. */
  get staged(): boolean {
    return this.stage !== null
  }

  /** Writes the staged records into their file (a group commit, a put that does not wait); false when there were none. */
  commitStaged(): boolean {
    return this.stage?.commit() === true
  }

  /** Keeps a staged record's dispatch request until takeStagedRequests(), after its commit. */
  stageRequest(request: DispatchRequest, blankOffset: number): void {
    this.stagedRequests.add(request, blankOffset)
  }

  /** Hands over the requests kept so far (StagedRequests.take); call after commitStaged(). */
  takeStagedRequests(take: (requests: DispatchRequest[], blanks: number[]) => void): void {
    this.stagedRequests.take(take)
  }

  /** A request object dispatch is done with, to fill in for a record to stage; null when there is none. */
  spareRequest(): DispatchRequest | null {
    return this.stagedRequests.spareRequest()
  }

  /** Writes out the stage (its records completed first: see WriteStage.prepare) and lends it again. */
  private prepareStage(file: MappedFile, room: number): void {
    this.finishAppends()
    this.stage?.prepare(file, room)
  }

  /**
   * A slave's append of bytes replicated from its master (RocketMQ's appendToCommitLog), which
   * may cut records anywhere. An empty log starts at `startOffset`, which must then be file-aligned;
   * else the bytes must continue exactly at the log's end. Null on success, else why not.
   */
  appendRaw(startOffset: number, bytes: Buffer): string | null {
    const fileSize = this.config.mappedFileSizeCommitLog
    let last = this.mappedFileQueue.getLastMappedFile()
    if (last === null && startOffset % fileSize !== 0) return `an empty commit log starts on a file boundary, not at ${startOffset}`
    const end = last === null ? startOffset : last.fileFromOffset + last.wrotePosition
    if (startOffset !== end) return `the bytes start at ${startOffset}, the commit log ends at ${end}`
    // Raw bytes go through the mapping: what the stage holds goes into the file first (and its
    // records to the dispatcher's pass, which reads them there).
    this.stage?.release()
    this.stagedRequests.drop()
    let done = 0
    while (done < bytes.length) {
      if (last === null || last.isFull()) last = this.mappedFileQueue.getLastMappedFile(startOffset + done)
      if (last === null) return this.createFailed().reason ?? 'cannot create a commit-log file'
      const length = Math.min(bytes.length - done, last.fileSize - last.wrotePosition)
      if (!last.appendMessage(bytes, done, length)) return this.reserveFailed(last).reason ?? 'cannot reserve blocks'
      done += length
      last.storeTimestamp = Date.now()
      if (last.wrotePosition >= this.nextFileFrom && last !== this.nextFileAskedBy) this.askNextFile(last)
    }
    return null
  }

  /**
   * Completes the records appended since the last call whose body CRC was left for after the
   * write (BODY_CRC_AFTER_WRITE): their BODYCRC fields and their bodyCRC. A put batch calls it
   * after its appends, before it dispatches or answers; past the middle of the last file, it also
   * asks for the next one (see nextFileFrom).
   */
  finishAppends(): void {
    this.writtenCrcs.finish()
    const last = this.mappedFileQueue.getLastMappedFile()
    if (last !== null && last !== this.nextFileAskedBy && last.wrotePosition >= this.nextFileFrom) this.askNextFile(last)
  }

  /**
   * Asks the kernel to start writing back the whole pages the writer has left behind, a step at a
   * time. A burst of puts that never yields to the event loop starves the timed flush, and would
   * leave everything dirty for close (or for the sync after a crash) to write at once. Durability
   * is unchanged: only a sync makes bytes durable, and the flusher still syncs every one.
   */
  writeBackBehind(): void {
    const file = this.mappedFileQueue.getLastMappedFile()
    if (file === null || file.hasWriteBuffer()) return
    if (file !== this.writeBackFile) {
      this.writeBackFile = file
      this.writeBackFrom = 0
    }
    const from = Math.floor(Math.max(this.writeBackFrom, file.flushedPosition) / COMMIT_LOG_WRITE_BACK_STEP) * COMMIT_LOG_WRITE_BACK_STEP
    const to = Math.floor(file.wrotePosition / COMMIT_LOG_WRITE_BACK_STEP) * COMMIT_LOG_WRITE_BACK_STEP
    if (to - from < COMMIT_LOG_WRITE_BACK_STEP) return
    this.writeBackFrom = to
    file.dropPages(from, to, true)
  }

  /** At each timed flush pass: huge pages ahead of a writer that slowed down go back to small ones (huge-pages-ahead.ts). */
  hugePagesPass(): void {
    this.hugePages?.pass(this.mappedFileQueue.getLastMappedFile())
  }

  /**
   * Reserves the blocks the append may write: the record and the 8 bytes of an end-of-file blank
   * (a blank writes only its header, however much room it closes).
   */
  private reserveFor(file: MappedFile, record: PreparedRecord): boolean {
    return file.reserve(Math.min(file.fileSize, file.wrotePosition + record.length + END_FILE_MIN_BLANK_LENGTH))
  }

  private reserveFailed(file: MappedFile): PutMessageResult {
    const why = file.lastReserveError?.message ?? `cannot reserve blocks in ${file.fileName}`
    return PutMessageResult.failed('CREATE_MAPEDFILE_FAILED', why)
  }

  private createFailed(): PutMessageResult {
    const error = this.mappedFileQueue.lastCreateError
    const why = error instanceof Error ? error.message : 'the store is shutting down'
    return PutMessageResult.failed('CREATE_MAPEDFILE_FAILED', `cannot create the next commit-log file: ${why}`)
  }

  // ---- reads --------------------------------------------------------------------------------

  /** First file's start; the next file's when the first is being destroyed; -1 when empty. */
  getMinOffset(): number {
    const first = this.mappedFileQueue.getFirstMappedFile()
    if (first === null) return -1
    if (first.isAvailable()) return first.fileFromOffset
    return this.rollNextFile(first.fileFromOffset)
  }

  /** The readable end of the commit log. */
  getMaxOffset(): number {
    return this.mappedFileQueue.getMaxOffset()
  }

  rollNextFile(offset: number): number {
    const size = this.config.mappedFileSizeCommitLog
    return offset + size - (offset % size)
  }

  openReader(): CommitLogReader {
    return new CommitLogReader(this.mappedFileQueue)
  }

  /** A held view of one record's bytes, or null when they are not readable. */
  getMessage(offset: number, size: number): SelectMappedBufferResult | null {
    // Only the file that holds the offset: once cleanup deleted the file at 0, offset 0 must not
    // read the first remaining file's bytes (RocketMQ returns the first file for offset 0).
    const file = this.mappedFileQueue.findMappedFileByOffset(offset)
    if (file === null) return null
    return file.selectMappedBuffer(offset % this.config.mappedFileSizeCommitLog, size)
  }

  /** A held view from `offset` to the readable end of its file (dispatch and replication). */
  getData(offset: number, returnFirstOnNotFound = offset === 0): SelectMappedBufferResult | null {
    const file = this.mappedFileQueue.findMappedFileByOffset(offset, returnFirstOnNotFound)
    if (file === null) return null
    return file.selectMappedBuffer(offset % this.config.mappedFileSizeCommitLog)
  }

  /** The store timestamp of the record at `offset`, or -1 when it cannot be read. */
  pickupStoreTimestamp(offset: number, size: number): number {
    if (offset < this.getMinOffset()) return -1
    const view = this.getMessage(offset, size)
    if (view === null) return -1
    try {
      const buffer = view.buffer
      if (buffer.length < OFFSET_SYSFLAG + 4) return -1
      const at = storeTimestampOffset(buffer.readInt32BE(OFFSET_SYSFLAG))
      if (at + 8 > buffer.length) return -1
      return readUInt64BE(buffer, at)
    } finally {
      view.release()
    }
  }

  // ---- recovery -----------------------------------------------------------------------------

  /** The files, as the recovery scan reads them (scan-mappings.ts). */
  private scanSource(mappings: ScanMappings): ScanSource {
    const files = this.mappedFileQueue.mappedFiles
    return {
      fileCount: files.length,
      fileSize: this.config.mappedFileSizeCommitLog,
      fileStart: (index) => files[index].fileFromOffset,
      read: (index, from, to) => mappings.read(index, from, to),
      readInto: (index, from, target) => mappings.readInto(index, from, target),
    }
  }

  private scanFrom(
    startIndex: number,
    onRecord: RecoveredRecordHandler | null,
    onProgress: RecoveryProgress | null,
    resume: ScanResume | null = null,
  ): RecoveryOutcome {
    const mappings = new ScanMappings(this.mappedFileQueue.mappedFiles)
    try {
      const source = this.scanSource(mappings)
      const outcome = scanRecords(source, startIndex, this.config.checkCRCOnRecover, onRecord, onProgress, this.views, resume)
      this.lastRecordOffset = outcome.lastRecordOffset
      return outcome
    } finally {
      this.views.clear()
      mappings.close()
    }
  }

  /**
   * Normal recovery (clean shutdown without a usable shutdown record): the last three files are
   * checked, as RocketMQ does; nothing is dispatched.
   */
  recoverNormally(onProgress: RecoveryProgress | null = null): RecoveryOutcome {
    const files = this.mappedFileQueue.mappedFiles
    if (files.length === 0) return this.recoverEmpty()
    return this.scanFrom(Math.max(0, files.length - 3), null, onProgress)
  }

  /**
   * Clean open: trusts the end offset recorded at the last clean close after checking, in
   * constant time, that the last record it names is intact and ends there. Null when the record
   * does not fit the files (the caller then falls back to a scan).
   */
  recoverFromShutdownRecord(endOffset: number, lastRecordOffset: number): RecoveryOutcome | null {
    const files = this.mappedFileQueue.mappedFiles
    if (files.length === 0) return endOffset === 0 ? this.recoverEmpty() : null
    const first = files[0].fileFromOffset
    const fileSize = this.config.mappedFileSizeCommitLog
    if (endOffset < first || endOffset > files[files.length - 1].fileFromOffset + fileSize) return null
    if (lastRecordOffset < 0) {
      if (endOffset !== first) return null
    } else {
      const file = this.mappedFileQueue.findMappedFileByOffset(lastRecordOffset)
      if (file === null) return null
      // The record and the 8 bytes after it, read without mapping the file (see recordBytesAt).
      const buffer = recordBytesAt(file, lastRecordOffset - file.fileFromOffset, END_FILE_MIN_BLANK_LENGTH)
      const request = checkRecord(buffer, 0, buffer.length, this.config.checkCRCOnRecover)
      if (request.status !== 'OK') return null
      const end = lastRecordOffset + request.size
      // The record ends at the recorded end, or a blank closes its file and the end is the next file.
      const blankCloses = checkRecord(buffer, request.size, buffer.length, false).status === 'BLANK'
      if (end !== endOffset && !(blankCloses && endOffset === this.rollNextFile(end))) return null
    }
    this.lastRecordOffset = lastRecordOffset
    return { processOffset: endOffset, damage: null, stoppedAt: null, scannedBytes: 0, lastRecordOffset }
  }

  /**
   * True when a complete record that names `offset` as its position starts there, or, behind an
   * end-of-file blank at `offset`, at the start of the next file: another writer appended from
   * that point (a broker's first append lands exactly at the end it found).
   */
  recordFollows(offset: number): boolean {
    const fileSize = this.config.mappedFileSizeCommitLog
    for (let at = offset, hops = 0; hops < 2; hops++) {
      const file = this.mappedFileQueue.findMappedFileByOffset(at)
      if (file === null) return false
      const request = checkRecord(recordBytesAt(file, at - file.fileFromOffset, 0), 0, fileSize, false)
      if (request.status === 'OK') return request.commitLogOffset === at
      if (request.status !== 'BLANK') return false
      at = this.rollNextFile(at)
    }
    return false
  }

  /**
   * Abnormal recovery (the abort file was present): start at the newest file whose first record is
   * not newer than the checkpoint's safe timestamp, and re-dispatch every valid record from there.
   */
  recoverAbnormally(
    minTimestamp: number,
    onRecord: RecoveredRecordHandler,
    onProgress: RecoveryProgress | null = null,
    resumeAfter: { end: number; lastRecordOffset: number } | null = null,
  ): RecoveryOutcome {
    const files = this.mappedFileQueue.mappedFiles
    if (files.length === 0) return this.recoverEmpty()
    const start = this.recoveryStartIndex(minTimestamp)
    // After a crash of this boot the records before the dispatched end are whole (dispatch read
    // them), so the scan may start there instead of at the file the checkpoint names.
    if (resumeAfter !== null && resumeAfter.end > files[start].fileFromOffset) {
      let index = files.findIndex((file) => resumeAfter.end < file.fileFromOffset + this.config.mappedFileSizeCommitLog)
      if (index < 0) index = files.length - 1
      const position = Math.max(0, resumeAfter.end - files[index].fileFromOffset)
      if (position < this.config.mappedFileSizeCommitLog) {
        return this.scanFrom(index, onRecord, onProgress, { position, lastRecordOffset: resumeAfter.lastRecordOffset })
      }
    }
    return this.scanFrom(start, onRecord, onProgress)
  }

  /**
   * Offset of the file a crash recovery scans from: the last one whose first record is not newer
   * than `minTimestamp` (the checkpoint vouches for everything before it), else the first.
   */
  recoveryStartOffset(minTimestamp: number): number {
    const files = this.mappedFileQueue.mappedFiles
    return files.length === 0 ? 0 : files[this.recoveryStartIndex(minTimestamp)].fileFromOffset
  }

  private recoveryStartIndex(minTimestamp: number): number {
    const files = this.mappedFileQueue.mappedFiles
    for (let i = files.length - 1; i >= 0; i--) if (this.isMappedFileMatchedRecover(files[i], minTimestamp)) return i
    return 0
  }

  private recoverEmpty(): RecoveryOutcome {
    this.mappedFileQueue.flushedWhere = 0
    this.mappedFileQueue.committedWhere = 0
    this.lastRecordOffset = -1
    return { processOffset: 0, damage: null, stoppedAt: null, scannedBytes: 0, lastRecordOffset: -1 }
  }

  private isMappedFileMatchedRecover(file: MappedFile, minTimestamp: number): boolean {
    const buffer = file.readableBuffer()
    if (buffer.length < 64 || buffer.readInt32BE(OFFSET_MAGIC) !== MESSAGE_MAGIC_CODE) return false
    const at = storeTimestampOffset(buffer.readInt32BE(OFFSET_SYSFLAG))
    const storeTimestamp = readUInt64BE(buffer, at)
    if (storeTimestamp === 0) return false
    return storeTimestamp <= minTimestamp
  }

  /**
   * Cuts the log at `offset`: positions in the file holding it, later files deleted. `erase` is
   * false only where nothing is cut: a clean open at the end the last clean close recorded (C1).
   */
  truncateTo(offset: number, erase = true): void {
    // Requests of records the truncation may remove: newer records could take their offsets.
    this.stagedRequests.drop()
    this.mappedFileQueue.flushedWhere = offset
    this.mappedFileQueue.committedWhere = offset
    // Records past the end are erased for good: after a power cut, a page of new appends that was
    // not synced yet would otherwise bring them back, valid and chained to the new records. A
    // clean close leaves only zeros there (every truncation before it erased and synced its
    // tail), so a clean open does not read the megabytes of zeros that would prove it again.
    this.mappedFileQueue.truncateDirtyFiles(offset, erase ? this.config.maxMessageSize + MIN_RECORD_SIZE_FOR_ERASE : -1)
  }

  /**
   * Flushes everything appended (commit first when a write buffer is used). Each call covers one
   * file, so it takes as many calls as files behind: RocketMQ's ten retries suit 1 GiB files, but
   * a log of small files whose periodic flush lags (one file per pass) would close with the rest
   * of its records never forced to disk, under a shutdown record that vouches for them.
   */
  flushAll(): void {
    this.commitStaged()
    const rounds = this.mappedFileQueue.mappedFiles.length + 10
    for (let i = 0; i < rounds && !this.mappedFileQueue.commit(0); i++);
    for (let i = 0; i < rounds && !this.mappedFileQueue.flush(0); i++);
  }

  /**
   * flushAll with msync on the libuv pool (close waits for it without blocking the thread). Only
   * when nothing else flushes the log: the flusher's loops and group commits have stopped.
   */
  async flushAllAsync(): Promise<void> {
    this.commitStaged()
    const rounds = this.mappedFileQueue.mappedFiles.length + 10
    for (let i = 0; i < rounds && !this.mappedFileQueue.commit(0); i++);
    for (let i = 0; i < rounds && !(await this.mappedFileQueue.flushAsync(0)); i++);
  }

  /** Waits for the sync of the zeros written ahead (if one runs) and lets go of their descriptor. */
  closeZeroAhead(): Promise<void> {
    return this.stage?.zeroAhead?.close() ?? Promise.resolve()
  }

  shutdown(): void {
    this.stage?.zeroAhead?.stop()
    this.views.clear()
    this.mappedFileQueue.shutdown(this.config.destroyMapedFileIntervalForcibly)
  }
}

/**
 * The bytes of the record at `pos` of a file and `extra` bytes after it (fewer at the end of what
 * the file holds; at least its 8-byte header when there is room). A clean open checks one or two
 * records: through the mapping when the file is mapped, else by a positioned read, so that open
 * maps nothing for them (a 128 MiB mapping made every open pay a garbage collection).
 */
function recordBytesAt(file: MappedFile, pos: number, extra: number): Buffer {
  const readable = file.readPosition
  if (pos < 0 || pos >= readable) return Buffer.alloc(0)
  if (file.isMapped) return file.readableBuffer().subarray(pos, readable)
  const head = readSegmentBytes(file.fileName, pos, Math.min(END_FILE_MIN_BLANK_LENGTH, readable - pos))
  if (head.length < END_FILE_MIN_BLANK_LENGTH) return head
  const total = head.readInt32BE(0)
  if (total <= END_FILE_MIN_BLANK_LENGTH || total > readable - pos) return head
  return readSegmentBytes(file.fileName, pos, Math.min(total + extra, readable - pos))
}

/** Slack over maxMessageSize for a record's header, topic and properties. */
const MIN_RECORD_SIZE_FOR_ERASE = 64 * 1024
