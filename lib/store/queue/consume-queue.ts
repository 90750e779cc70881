// One consume queue: the index of one (topic, queueId), stored in `<root>/<topic>/<queueId>/` as an
// array of fixed-size units, one per message, in queue-offset order. Files are named by the logic
// byte offset (queue offset × 20) of their first unit, like every other segment queue.
//
// The 20-byte unit and its validity rules are in cq-unit.ts.
import { join } from 'node:path'

import { ioError, MQStoreError } from '../../errors.js'
import { MIN_RECORD_LENGTH } from '../commitlog/record.js'
import type { MappedFile } from '../mapped/mapped-file.js'
import { MappedFileQueue, type DeleteOptions } from '../mapped/mapped-file-queue.js'
import type { MappingBudget } from '../mapped/mapping-budget.js'
import type { SelectMappedBufferResult } from '../mapped/mapped-file.js'
import {
  checkQueueArgs,
  CQ_BLANK_UNIT_SIZE,
  CQ_STORE_UNIT_SIZE,
  isBlankUnit,
  isValidUnit,
  queueOffsetAt,
  readUnitOffset,
  readUnitSize,
  readUnitTagsCode,
  firstValidUnitInFile,
  isQuiet,
  STALE_UNITS_QUIET_BYTES,
  unitRunDamage,
  isUnitIndex,
  isUnitsEnd,
  NEAR_END_BYTES,
  unitsEnd,
  UnitWindow,
  type UnitWalk,
  walkUnits,
  writeUnit,
} from './cq-unit.js'
import { QueueDirectories, type OwedSync } from './queue-directories.js'
import { QueueFirstFile } from './queue-first-file.js'

export { CQ_BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE } from './cq-unit.js'
/**
 * Disk blocks of a consume-queue file are reserved ahead of the writer, at most this far (3,276
 * units), never a whole file at once.
 */
export const CQ_RESERVE_CHUNK_BYTES = 64 * 1024
/** A new queue's first reservation: a page (204 units), doubling with the queue up to the chunk. */
export const CQ_RESERVE_FIRST_BYTES = 4096

/** What a consume queue needs from the commit log. */
export interface CommitLogView {
  /** The commit log's min physical offset, -1 when it holds no file. */
  getMinOffset(): number
  /** Store time of the record at (physicalOffset, size), -1 if it cannot be read. */
  pickupStoreTimestamp(physicalOffset: number, size: number): number
}

export interface ConsumeQueueOptions {
  /** Open the files read-only: nothing in the queue's directory is created, written or deleted. */
  readOnly?: boolean
  /** The store's budget of mapped bytes: files are mapped on first use and unmapped when idle. */
  budget?: MappingBudget | null
  /** Creates queue folders and pays their directory syncs (shared by a store's queues). */
  directories?: QueueDirectories
}

export class ConsumeQueue {
  readonly topic: string
  readonly queueId: number
  readonly storePath: string
  readonly mappedFileSize: number
  readonly mappedFileQueue: MappedFileQueue
  readonly readOnly: boolean
  /** The queue's first file, made off the JS thread when dispatch asks for it. */
  readonly firstFile: QueueFirstFile
  /**
   * Puts whose queue offset was ahead of the queue's end (a gap; the unit is still appended, as
   * RocketMQ does after logging the error). Counted for diagnostics.
   */
  orderingErrors = 0

  private readonly commitLog: CommitLogView
  private readonly directories: QueueDirectories
  /** Directory syncs the queue's next flush owes for the folders its first put created. */
  private owedSyncs: OwedSync[] = []
  /** Commit-log end (offset + size) of the last unit written or recovered; -1 for none. */
  private maxPhysicOffset = -1
  /** Logic byte offset of the first unit still pointing into the commit log. */
  private minLogicOffset = 0
  private closed = false
  /**
   * Why recover() found the queue damaged, not short (a bad unit before valid ones, say): ending it
   * there would hand its later queue offsets out again, so the store rebuilds it (recovery Q3).
   */
  loadDamage: string | null = null

  // The file units are appended to, with a DataView over its mapping, cached across puts. The
  // cache is used only while the file is still the queue's last file and not full.
  private writeFile: MappedFile | null = null
  private writeView: DataView | null = null
  /** Why the last unit could not be written (no file, or no disk blocks for it). */
  lastWriteFailure: MQStoreError | null = null
  /** The write file's mapGeneration when writeView was taken (an idle unmap invalidates it). */
  private writeGeneration = -1

  constructor(
    topic: string,
    queueId: number,
    consumeQueueRoot: string,
    mappedFileSize: number,
    commitLog: CommitLogView,
    options: ConsumeQueueOptions = {},
  ) {
    checkQueueArgs(topic, queueId, mappedFileSize)
    this.topic = topic
    this.queueId = queueId
    this.storePath = join(consumeQueueRoot, topic, String(queueId))
    this.mappedFileSize = mappedFileSize
    this.commitLog = commitLog
    this.readOnly = options.readOnly === true
    this.directories = options.directories ?? new QueueDirectories()
    // Files are mapped on first use within the store's budget, and created without the fsync
    // chain: a consume queue is derived, and its files become durable with their first flush.
    // Blocks are reserved in steps that grow with the queue (a new queue takes a page); a page
    // fault reads no pages around it, which for a small queue would be megabytes of zeros.
    this.mappedFileQueue = new MappedFileQueue(this.storePath, mappedFileSize, {
      readOnly: this.readOnly,
      reserveChunkBytes: CQ_RESERVE_CHUNK_BYTES,
      reserveFirstBytes: CQ_RESERVE_FIRST_BYTES,
      budget: options.budget ?? null,
      syncOnFirstFlush: !this.readOnly,
      // Dispatch writes into pages faulted in ahead, off the JS thread.
      warmChunks: !this.readOnly,
      exposeReserved: true,
      readAround: false,
    })
    this.firstFile = new QueueFirstFile(this.storePath, this.mappedFileQueue, this.directories, (owed) => this.owedSyncs.push(...owed))
  }

  // ---- unit decoding (no allocation; used in read loops) -------------------------------------

  /** commitLogOffset of the unit at byte `pos` of `view`. */
  static readOffset(view: Buffer, pos: number): number {
    return readUnitOffset(view, pos)
  }

  /** size of the unit at byte `pos` of `view`. */
  static readSize(view: Buffer, pos: number): number {
    return readUnitSize(view, pos)
  }

  /** tagsCode of the unit at byte `pos` of `view`. */
  static readTagsCode(view: Buffer, pos: number): number {
    return readUnitTagsCode(view, pos)
  }

  /** The whole unit at byte `pos` of `view` (allocates; prefer the three readers in loops). */
  static readUnit(view: Buffer, pos: number): { offset: number; size: number; tagsCode: number } {
    return { offset: readUnitOffset(view, pos), size: readUnitSize(view, pos), tagsCode: readUnitTagsCode(view, pos) }
  }

  // ---- load and recovery --------------------------------------------------------------------

  /** Maps the queue's files (all positions at the file size until recover). */
  load(): void {
    this.mappedFileQueue.load()
  }

  /**
   * After a clean shutdown (the store's shutdown record vouches for it) every file but the last is
   * full and the last holds a prefix of units followed by zeros, so its end is found by bisection:
   * a clean open reads a few units per queue instead of every unit of the last three files.
   * Returns false, changing nothing, when the unit after the end found is not zeros. (A hole
   * further on is not seen here; the store compares the units found with its shutdown record.)
   * `recordedEnd` (the queue's max offset at that close) is checked first, on the bytes up to a
   * page past it: a bisection faults a page in at each step, and exposes the whole file.
   */
  recoverClean(recordedEnd: number | null = null): boolean {
    const files = this.mappedFileQueue.mappedFiles
    if (files.length === 0) return true
    const size = this.mappedFileSize
    const last = files[files.length - 1]
    const units = size / CQ_STORE_UNIT_SIZE
    const guess = recordedEnd === null ? -1 : recordedEnd - last.fileFromOffset / CQ_STORE_UNIT_SIZE
    const near = isUnitIndex(guess, units) ? last.selectMappedBuffer(0, Math.min(size, guess * CQ_STORE_UNIT_SIZE + NEAR_END_BYTES)) : null
    // Released at once: the queue's own reference keeps the file, as for its unheld scans.
    near?.release()
    const buffer = near !== null && isUnitsEnd(near.buffer, units, guess) ? near.buffer : this.wholeFile(last)
    const end = (buffer === near?.buffer ? guess : unitsEnd(buffer, units)) * CQ_STORE_UNIT_SIZE
    // Bisection assumes a prefix of units; a damaged unit before the end or units after it (the
    // queue would come back short and hand its offsets out again) make this no clean prefix.
    if (unitRunDamage(buffer, 0, end) !== null || !isQuiet(buffer, end, size)) return false
    let lastUnit: Buffer | null = end > 0 ? buffer.subarray(end - CQ_STORE_UNIT_SIZE, end) : null
    if (lastUnit === null && files.length > 1) {
      const previous = this.wholeFile(files[files.length - 2])
      lastUnit = previous.subarray(size - CQ_STORE_UNIT_SIZE, size)
    }
    if (lastUnit !== null) {
      const offset = ConsumeQueue.readOffset(lastUnit, 0)
      const unitSize = ConsumeQueue.readSize(lastUnit, 0)
      if (!isValidUnit(offset, unitSize)) return false
      if (!isBlankUnit(offset, unitSize)) this.maxPhysicOffset = offset + unitSize
    }
    this.endRecoveryAt(last.fileFromOffset + end)
    return true
  }

  /**
   * Finds the end of the data: scans from the third file from the end, unit by unit, while units
   * are valid; the first invalid unit (or the end of the last file) is the end. Later bytes and
   * files are cut off, and maxPhysicOffset is the end of the last valid unit. When the units
   * scanned are not a clean prefix (see loadDamage) the queue is damaged, not short. A unit whose
   * record would end past `logEnd` (the end of the commit log's last file) is no valid unit.
   */
  recover(logEnd = Number.POSITIVE_INFINITY): void {
    this.loadDamage = null
    const files = this.mappedFileQueue.mappedFiles
    if (files.length === 0) return
    const size = this.mappedFileSize
    let index = Math.max(0, files.length - 3)
    let processOffset = 0
    const walk: UnitWalk = { lastEnd: -1, overlapAt: -1 }
    for (;;) {
      const file = files[index]
      const units = new UnitWindow(file.fileName, size)
      let end = 0
      while (end < size) {
        // A window of units at a time; the walk stops at the first that ends the data.
        const at = units.hold(end)
        const to = at + Math.min(units.bytes.length - at, size - end)
        const stop = walkUnits(units.view, at, to, logEnd, walk)
        // Records do not overlap and a queue's units follow the log: each starts past the last.
        if (walk.overlapAt >= 0 && this.loadDamage === null) {
          const unitAt = file.fileFromOffset + end + walk.overlapAt - at
          this.loadDamage = `the unit at queue offset ${queueOffsetAt(unitAt)} points into the record before it`
        }
        walk.overlapAt = -1
        end += stop - at
        if (stop < to) break
      }
      const lastEnd = walk.lastEnd
      if (lastEnd >= 0) this.maxPhysicOffset = lastEnd
      processOffset = file.fileFromOffset + end
      if (end < size || index + 1 >= files.length) {
        if (this.loadDamage === null) this.loadDamage = this.unitsAfter(index, end)
        break
      }
      index += 1
    }
    this.endRecoveryAt(processOffset)
  }

  /**
   * Why the data does not end at byte `end` of file `index` although the scan stopped there: the
   * unit there is not zeros (damaged, or torn by a cut: the units after it may be lost too), a
   * valid unit follows in that file, or a later file exists. Null when only zeros follow.
   */
  private unitsAfter(index: number, end: number): string | null {
    const files = this.mappedFileQueue.mappedFiles
    const stop = `the units stop at queue offset ${queueOffsetAt(files[index].fileFromOffset + end)}`
    if (index + 1 < files.length) return `${stop} but ${files.length - index - 1} later file(s) follow`
    const file = files[index]
    const buffer = this.wholeFile(file)
    if (end < this.mappedFileSize && !isQuiet(buffer, end, end + CQ_STORE_UNIT_SIZE)) return `${stop}, at a unit that is not zeros`
    // The rest is mostly holes (blocks are reserved as the queue grows): read, not mapped.
    const at = firstValidUnitInFile(file.fileName, end + CQ_STORE_UNIT_SIZE, this.mappedFileSize)
    return at < 0 ? null : `${stop} but a unit at queue offset ${queueOffsetAt(file.fileFromOffset + at)} follows`
  }

  /** The queue's data ends at `processOffset`: positions there, later files cut off. */
  private endRecoveryAt(processOffset: number): void {
    this.mappedFileQueue.flushedWhere = processOffset
    this.mappedFileQueue.committedWhere = processOffset
    if (this.readOnly) this.cutTailInMemory(processOffset)
    else this.mappedFileQueue.truncateDirtyFiles(processOffset)
    this.writeFile = null
    this.writeView = null
  }

  /** Read-only recovery deletes nothing: the file at `offset` gets its positions, later files are unmapped and dropped from the list. */
  private cutTailInMemory(offset: number): void {
    const files = this.mappedFileQueue.mappedFiles
    let keep = files.length
    for (let i = 0; i < files.length; i++) {
      const file = files[i]
      if (file.fileFromOffset + this.mappedFileSize <= offset) continue
      if (offset >= file.fileFromOffset) {
        file.setPositions(offset - file.fileFromOffset)
      } else {
        keep = Math.min(keep, i)
      }
    }
    for (const file of files.splice(keep)) file.shutdown(0)
  }

  /** The whole mapping of `file`, whatever its positions (a read-only file is scanned as loaded). */
  private wholeFile(file: MappedFile): Buffer {
    return file.readOnly ? file.readableBuffer() : file.mappedBuffer()
  }

  // ---- writing ------------------------------------------------------------------------------

  /**
   * Appends the unit for queue offset `cqOffset` (the dispatcher's put). Replays are no-ops: a
   * unit whose record ends at or below maxPhysicOffset, or whose queue offset is below the write
   * position, is skipped and reported as success. Returns false only when no file could be
   * created or the unit did not fit; the caller decides whether to retry.
   */
  putMessagePositionInfo(offset: number, size: number, tagsCode: number, cqOffset: number): boolean {
    if (offset + size <= this.maxPhysicOffset) return true
    const expectLogicOffset = cqOffset * CQ_STORE_UNIT_SIZE

    let file: MappedFile | null = null
    const files = this.mappedFileQueue.mappedFiles
    if (files.length > 0) {
      const last = files[files.length - 1]
      if (last === this.writeFile && last.wrotePosition < this.mappedFileSize && last.mapGeneration === this.writeGeneration) {
        file = last
      }
    }
    if (file === null) {
      file = this.fileForAppend(expectLogicOffset)
      if (file === null) return false
    }

    if (cqOffset !== 0) {
      if (file.wrotePosition === 0 && file.firstCreateInQueue) {
        this.fillPreBlank(file, expectLogicOffset)
      }
      const currentLogicOffset = file.fileFromOffset + file.wrotePosition
      if (expectLogicOffset < currentLogicOffset) return true
      if (expectLogicOffset !== currentLogicOffset) {
        this.orderingErrors += 1
        // Records a rebuild could not read (damage in the log): blanks keep their places, so this
        // unit lands at its own queue offset (RocketMQ appends it, at another). When the missing
        // records cannot fit before this one, its queue offset is what is damaged: left out.
        const missing = (expectLogicOffset - currentLogicOffset) / CQ_STORE_UNIT_SIZE
        if (missing * MIN_RECORD_LENGTH > offset - Math.max(0, this.maxPhysicOffset)) return true
        file = this.fillGap(currentLogicOffset, expectLogicOffset)
        if (file === null) return false
      }
    }
    // Only a unit that was written counts: a failed write must not make its retry look like a replay.
    if (!this.appendUnit(file, offset, size, tagsCode)) return false
    this.maxPhysicOffset = offset + size
    return true
  }

  /** Blanks over logic bytes [from, to) (maxPhysicOffset unchanged); the file for `to`, or null. */
  private fillGap(from: number, to: number): MappedFile | null {
    for (let at = from; at <= to; at += CQ_STORE_UNIT_SIZE) {
      const file = this.fileForAppend(at)
      if (file === null) return null
      if (at === to) return file
      if (!this.appendUnit(file, 0, CQ_BLANK_UNIT_SIZE, 0)) return null
    }
    return null
  }

  /** The last file, or a new one when the queue is empty or its last file is full; caches its view. */
  private fileForAppend(expectLogicOffset: number): MappedFile | null {
    if (this.readOnly) throw new TypeError(`consume queue ${this.storePath} is read-only`)
    if (this.closed) throw new MQStoreError('STORE_CLOSED', `consume queue ${this.storePath} is shut down`)
    if (this.mappedFileQueue.mappedFiles.length === 0 && !this.firstFile.foldersMade) {
      // The queue's first file: its folder is made here with plain mkdirs, synced by the first flush.
      try {
        this.owedSyncs.push(...this.directories.create(this.storePath))
      } catch (error) {
        this.lastWriteFailure = ioError(`cannot create the folder of consume queue ${this.topic}/${this.queueId}`, error)
        return null
      }
    }
    const file = this.mappedFileQueue.getLastMappedFile(expectLogicOffset)
    if (file === null) {
      const error = this.mappedFileQueue.lastCreateError
      this.lastWriteFailure = ioError(`cannot create a file of consume queue ${this.topic}/${this.queueId}`, error)
      return null
    }
    this.takeWriteView(file)
    return file
  }

  /** Caches the view appendUnit writes through: the file's reserved part (new when a reservation widened it), at its mapGeneration. */
  private takeWriteView(file: MappedFile): void {
    const mapping = file.reservedBuffer()
    this.writeFile = file
    this.writeView = new DataView(mapping.buffer, mapping.byteOffset, mapping.byteLength)
    this.writeGeneration = file.mapGeneration
  }

  /** Writes one unit at the write position of the cached write file; false when it does not fit. */
  private appendUnit(file: MappedFile, offset: number, size: number, tagsCode: number): boolean {
    const pos = file.wrotePosition
    if (pos + CQ_STORE_UNIT_SIZE > this.mappedFileSize) return false
    if (!file.reserve(pos + CQ_STORE_UNIT_SIZE)) {
      this.lastWriteFailure = file.lastReserveError
      return false
    }
    if (file.mapGeneration !== this.writeGeneration) this.takeWriteView(file)
    const view = this.writeView!
    writeUnit(view, pos, offset, size, tagsCode)
    file.wrotePosition = pos + CQ_STORE_UNIT_SIZE
    return true
  }

  /**
   * The queue's first-ever file starts at a queue offset other than 0: its units before that
   * offset become blanks, and the queue's min offset and flush/commit marks start there.
   */
  private fillPreBlank(file: MappedFile, expectLogicOffset: number): void {
    this.minLogicOffset = expectLogicOffset
    this.mappedFileQueue.flushedWhere = expectLogicOffset
    this.mappedFileQueue.committedWhere = expectLogicOffset
    const until = expectLogicOffset % this.mappedFileSize
    for (let pos = 0; pos < until; pos += CQ_STORE_UNIT_SIZE) {
      this.appendUnit(file, 0, CQ_BLANK_UNIT_SIZE, 0)
    }
  }

  // ---- reading ------------------------------------------------------------------------------

  /**
   * A held view of the units from queue offset `startIndex` to the readable end of the file that
   * holds it (never into the next file). Null below the min offset, at or past the end, or when
   * the file is gone. The caller releases it.
   */
  getIndexBuffer(startIndex: number): SelectMappedBufferResult | null {
    const offset = startIndex * CQ_STORE_UNIT_SIZE
    if (offset < this.minLogicOffset) return null
    const file = this.mappedFileQueue.findMappedFileByOffset(offset)
    if (file === null) return null
    return file.selectMappedBuffer(offset % this.mappedFileSize)
  }

  /**
   * The queue offset whose record's store time is nearest to `timestamp`, searched by bisection
   * in one file: the first file modified at or after `timestamp`, else the last. Units pointing
   * below the commit log's min offset are skipped. 0 when the queue is empty or a record's store
   * time cannot be read.
   */
  getOffsetInQueueByTime(timestamp: number): number {
    const file = this.mappedFileQueue.getMappedFileByTime(timestamp)
    if (file === null) return 0
    let low = this.minLogicOffset > file.fileFromOffset ? this.minLogicOffset - file.fileFromOffset : 0
    const view = file.selectMappedBuffer(0)
    if (view === null) return 0
    try {
      const buffer = view.buffer
      let high = view.size - CQ_STORE_UNIT_SIZE
      const minPhysicOffset = this.commitLog.getMinOffset()
      let targetOffset = -1
      let leftOffset = -1
      let rightOffset = -1
      let leftValue = -1
      let rightValue = -1
      while (high >= low) {
        const mid = Math.trunc((low + high) / (2 * CQ_STORE_UNIT_SIZE)) * CQ_STORE_UNIT_SIZE
        const physicalOffset = ConsumeQueue.readOffset(buffer, mid)
        const size = ConsumeQueue.readSize(buffer, mid)
        if (physicalOffset < minPhysicOffset) {
          low = mid + CQ_STORE_UNIT_SIZE
          leftOffset = mid
          continue
        }
        const storeTime = this.commitLog.pickupStoreTimestamp(physicalOffset, size)
        if (storeTime < 0) return 0
        if (storeTime === timestamp) {
          targetOffset = mid
          break
        }
        if (storeTime > timestamp) {
          high = mid - CQ_STORE_UNIT_SIZE
          rightOffset = mid
          rightValue = storeTime
        } else {
          low = mid + CQ_STORE_UNIT_SIZE
          leftOffset = mid
          leftValue = storeTime
        }
      }
      let offset: number
      if (targetOffset !== -1) offset = targetOffset
      else if (leftValue === -1) offset = rightOffset
      else if (rightValue === -1) offset = leftOffset
      else offset = Math.abs(timestamp - leftValue) > Math.abs(timestamp - rightValue) ? rightOffset : leftOffset
      // Java's long division truncates toward zero: an empty range gives (start - 1) / 20, which
      // is 0 for the first file (the + 0 turns trunc's -0 into 0).
      return Math.trunc((file.fileFromOffset + offset) / CQ_STORE_UNIT_SIZE) + 0
    } finally {
      view.release()
    }
  }

  // ---- offsets ------------------------------------------------------------------------------

  getMinLogicOffset(): number {
    return this.minLogicOffset
  }

  setMinLogicOffset(minLogicOffset: number): void {
    this.minLogicOffset = minLogicOffset
  }

  getMinOffsetInQueue(): number {
    return Math.floor(this.minLogicOffset / CQ_STORE_UNIT_SIZE)
  }

  /** The next queue offset to be written (0 for an empty queue). */
  getMaxOffsetInQueue(): number {
    return Math.floor(this.mappedFileQueue.getMaxOffset() / CQ_STORE_UNIT_SIZE)
  }

  getMessageTotalInQueue(): number {
    return this.getMaxOffsetInQueue() - this.getMinOffsetInQueue()
  }

  /** Commit-log end (offset + size) of the last unit written or recovered, -1 when none. */
  getMaxPhysicOffset(): number {
    return this.maxPhysicOffset
  }

  /** Commit-log end (offset + size) of the queue's last unit, read from the file; -1 when the last file holds no valid unit. */
  getLastOffset(): number {
    const file = this.mappedFileQueue.getLastMappedFile()
    if (file === null || file.readPosition < CQ_STORE_UNIT_SIZE) return -1
    const view = file.selectMappedBuffer(file.readPosition - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
    if (view === null) return -1
    try {
      const offset = ConsumeQueue.readOffset(view.buffer, 0)
      const size = ConsumeQueue.readSize(view.buffer, 0)
      return isValidUnit(offset, size) ? offset + size : -1
    } finally {
      view.release()
    }
  }

  /** First queue offset of the file after the one holding `index`. */
  rollNextFile(index: number): number {
    const unitsPerFile = this.mappedFileSize / CQ_STORE_UNIT_SIZE
    return index + unitsPerFile - (index % unitsPerFile)
  }

  // ---- expiry and truncation ----------------------------------------------------------------

  /**
   * Moves minLogicOffset to the first unit of the first file that points at or above `minPhy`.
   * When no unit there does and that file is also the last one, every message of the queue is gone
   * from the commit log: the minimum moves to the queue's end, so that reads answer
   * OFFSET_TOO_SMALL rather than MESSAGE_WAS_REMOVING (RocketMQ leaves the minimum unchanged).
   * Otherwise (a later file holds the next units) it is unchanged.
   */
  correctMinOffset(minPhy: number): void {
    const file = this.mappedFileQueue.getFirstMappedFile()
    if (file === null) return
    const view = file.selectMappedBuffer(0)
    if (view === null) return
    try {
      const buffer = view.buffer
      let found = false
      for (let pos = 0; pos + CQ_STORE_UNIT_SIZE <= view.size; pos += CQ_STORE_UNIT_SIZE) {
        if (ConsumeQueue.readOffset(buffer, pos) >= minPhy) {
          this.minLogicOffset = file.fileFromOffset + pos
          found = true
          break
        }
      }
      const end = file.fileFromOffset + view.size - (view.size % CQ_STORE_UNIT_SIZE)
      if (!found && file === this.mappedFileQueue.getLastMappedFile() && end > this.minLogicOffset) this.minLogicOffset = end
    } finally {
      view.release()
    }
  }

  /**
   * Deletes leading files (never the last) whose last unit points below `minPhy`, then corrects
   * the min offset. Returns the number of files deleted.
   */
  deleteExpiredFile(minPhy: number, options: DeleteOptions = {}): number {
    this.assertWritable()
    const count = this.mappedFileQueue.deleteExpiredFileByOffset(minPhy, CQ_STORE_UNIT_SIZE, options)
    this.correctMinOffset(minPhy)
    return count
  }

  /**
   * Cuts off every unit whose record starts at or after `phyOffset` (the commit log was truncated
   * there): whole files from the end, then the tail of the file that keeps data. maxPhysicOffset
   * becomes the end of the last kept unit (`phyOffset` when none is kept).
   */
  truncateDirtyLogicFiles(phyOffset: number): void {
    this.assertWritable()
    const queue = this.mappedFileQueue
    const size = this.mappedFileSize
    this.maxPhysicOffset = phyOffset
    for (;;) {
      const file = queue.getLastMappedFile()
      if (file === null) break
      const buffer = file.mappedBuffer()
      // Units dispatched during recovery are not on disk yet: the cut must not mark them flushed.
      const flushedBefore = file.flushedPosition
      file.setPositions(0)
      const firstOffset = ConsumeQueue.readOffset(buffer, 0)
      const firstSize = ConsumeQueue.readSize(buffer, 0)
      const firstValid = isValidUnit(firstOffset, firstSize)
      // A file that starts with data at or past the cut goes whole. So does an empty tail file
      // when an earlier file exists: the cut may fall inside that earlier file.
      if (firstOffset >= phyOffset || (!firstValid && queue.mappedFiles.length > 1)) {
        queue.deleteLastMappedFile()
        continue
      }
      let end = 0
      while (end < size) {
        const offset = ConsumeQueue.readOffset(buffer, end)
        const unitSize = ConsumeQueue.readSize(buffer, end)
        if (!isValidUnit(offset, unitSize) || offset >= phyOffset) break
        if (!isBlankUnit(offset, unitSize)) this.maxPhysicOffset = offset + unitSize
        end += CQ_STORE_UNIT_SIZE
      }
      file.setPositions(end)
      file.flushedPosition = Math.min(flushedBefore, end)
      // Units past the end would count again once the log grows past what they point at. A page
      // of zeros ends the check: longer holes (pages a power cut reverted) are caught by the
      // open-time checks of the last unit and by dispatch (docs/recovery.md Q4, Q5).
      if (end < size) file.eraseStaleTail(end, STALE_UNITS_QUIET_BYTES)
      break
    }
    // Flush and commit restart from the new end if it is below where they had got to.
    const maxOffset = queue.getMaxOffset()
    if (queue.flushedWhere > maxOffset) queue.flushedWhere = maxOffset
    if (queue.committedWhere > maxOffset) queue.committedWhere = maxOffset
  }

  // ---- flush and lifecycle ------------------------------------------------------------------

  /**
   * Flushes the file holding the flush mark, then syncs the folders the queue created since its
   * last flush (so a new queue's units are durable under their names when this returns); true when
   * nothing moved.
   */
  flush(flushLeastPages: number): boolean {
    const result = this.mappedFileQueue.flush(flushLeastPages)
    if (this.owedSyncs.length > 0) {
      const owed = this.owedSyncs
      this.owedSyncs = []
      try {
        this.directories.sync(owed)
      } catch (error) {
        this.owedSyncs.push(...owed)
        throw error
      }
    }
    return result
  }

  /** flush() with the syncs on the libuv pool; do not run two at once. */
  async flushAsync(flushLeastPages: number): Promise<boolean> {
    const result = await this.mappedFileQueue.flushAsync(flushLeastPages)
    if (this.owedSyncs.length > 0) {
      const owed = this.owedSyncs
      this.owedSyncs = []
      try {
        await this.directories.syncAsync(owed)
      } catch (error) {
        this.owedSyncs.push(...owed)
        throw error
      }
    }
    return result
  }

  /** Drops the mappings (store close). Views still held stay valid until released. */
  shutdown(intervalForcibly = 0): void {
    this.closed = true
    this.writeFile = null
    this.writeView = null
    this.mappedFileQueue.shutdown(intervalForcibly)
  }

  /** Deletes every file and the directory. The queue stays usable and starts empty. */
  destroy(): void {
    this.assertWritable()
    this.maxPhysicOffset = -1
    this.minLogicOffset = 0
    this.writeFile = null
    this.writeView = null
    this.mappedFileQueue.destroy()
  }

  private assertWritable(): void {
    if (this.readOnly) throw new TypeError(`consume queue ${this.storePath} is read-only`)
  }

  toString(): string {
    return `ConsumeQueue(${this.topic}/${this.queueId}, min=${this.getMinOffsetInQueue()}, max=${this.getMaxOffsetInQueue()})`
  }
}
