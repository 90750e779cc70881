// One memory-mapped segment file: RocketMQ's positions and reference counting (docs/design.md).
// - Blocks: the file has its full logical size, but blocks are reserved in chunks ahead of the
//   writer (`reserveChunkBytes`); a page is written only once reserved, so a full disk is a failed
//   reservation (a status), never a SIGBUS.
// - Positions: wrotePosition (appended), committedPosition (write buffer copied into the file),
//   flushedPosition (forced to disk), readPosition (what readers see: wrote, or committed).
// - Lifetime: the owner holds one reference; each reader holds one while it uses a view. After
//   shutdown(interval), readers still holding it are overridden once `interval` ms pass. Unmapping
//   detaches the ArrayBuffer first: a kept view is empty, never freed memory.
// - Descriptors and mappings: no descriptor is kept (system calls borrow one from descriptors.ts);
//   a file with a mapping budget is mapped on first use and unmapped while idle (unmapIfIdle).
import * as fs from 'node:fs'
import { basename } from 'node:path'

import { ioError, MQStoreError } from '../../errors.js'
import { type Advice, native, type MapHandle } from '../../native.js'
import { descriptors, openDescriptor } from './descriptors.js'
import { checkLength, createMappedSegment, dropPages, evictPages, fdatasync, fsyncAsync, mapSegment } from './segment-io.js'
import { limitReadAround, reserveBlocks, syncMappedRange, writeAfter, type WriteAfterSync } from './segment-io.js'
import { syncDirectory, syncDirectoryAsync } from './directory.js'
import { assertFileSize, checkLazyLength, exposedPart, isIdle, modifiedTimeMs, PrivateMapping } from './lazy-mapping.js'
import type { MappingBudget } from './mapping-budget.js'
import { parseOffsetName } from './segment-name.js'
import { staleRanges } from './stale-tail.js'
import {
  reservationTarget,
  reserveChunk,
  reserveFirst,
  SelectMappedBufferResult,
  type AppendCallback,
  type AppendOutcome,
  type MappedFileOptions,
  type WarmChunk,
} from './mapped-file-types.js'
import type { TransientStorePool } from './transient-store-pool.js'
import { HeldWork } from './held-work.js'

export { SelectMappedBufferResult }
export type { AppendCallback, AppendOutcome, MappedFileOptions, WriteAfterSync }

/** RocketMQ's logical page for flush and commit thresholds (not the OS page size). */
export const OS_PAGE_SIZE = 4096

const EMPTY = Buffer.alloc(0)

export class MappedFile {
  readonly fileName: string
  readonly fileSize: number
  readonly fileFromOffset: number
  readonly readOnly: boolean

  wrotePosition = 0
  committedPosition = 0
  flushedPosition = 0
  /** Store time of the last record appended (commit log). */
  storeTimestamp = 0
  /** Set when the file was created while its queue had no files. */
  firstCreateInQueue = false

  /** The mapping; null before the first use of a lazy file, while it is unmapped, and after cleanup. */
  private handle: MapHandle | null = null
  /** A Buffer over the mapping's exposed part (see exposeTo; the whole file unless made with less); empty while unmapped. */
  private mapped: Buffer = EMPTY
  private writeBuffer: Buffer | null = null
  /** The file position of writeBuffer[0]: 0 for a pool buffer; where a write stage starts. */
  private writeBase = 0
  /** A second, private copy-on-write mapping whose views may be handed to users; made on demand. */
  private readonly sharedOut = new PrivateMapping()
  private readonly pool: TransientStorePool | null
  /** The budget that may unmap the file while idle; null keeps it mapped once mapped (see setBudget). */
  private budget: MappingBudget | null
  private readonly unmapOnlyFlushed: boolean
  /** Moves at every map and unmap: a view cached across calls is stale once it moves. */
  mapGeneration = 0
  /** MappedFileOptions.exposeReserved (what is reserved or read so far, widened on demand) and readAround. */
  private readonly exposeReserved: boolean
  private readonly readAround: boolean
  /** Created without syncs: the first flush forces the file and its directory entry. */
  private needsCreateSync = false
  /** The file's blocks are known to be reserved (created here, or reserved at its first map). */
  private blocksReserved = false

  private refCount = 1
  private available = true
  private cleanupOver = false
  private firstShutdownTimestamp = 0
  private warmed = false
  /** Fault newly reserved chunks in, unheld (the native mapping outlives a warm-up); unlike `warmed`, not kept mapped (queues). */
  warmChunks = false
  /** Warm-ups of `warmed` files' new chunks in flight (each holds the file until it ends). */
  private readonly warming = new HeldWork()
  /** Faults a `warmed` file's newly reserved chunk in; null: MapHandle.warmAsync (MappedFileOptions.warmChunk). */
  private readonly warmChunk: WarmChunk | null

  /** Blocks of [0, reservedPosition) are reserved on disk; nothing is written past it. */
  private reservedTo: number
  /** Bytes reserved per step; the file size when the whole file is reserved at creation. */
  readonly reserveChunkBytes: number
  /** The first step; later steps double what is reserved, up to reserveChunkBytes. */
  readonly reserveFirstBytes: number
  /** Why the last reservation failed (a NO_SPACE or IO_ERROR MQStoreError), for the caller's report. */
  lastReserveError: MQStoreError | null = null

  private constructor(fileName: string, fileSize: number, options: MappedFileOptions, reservedTo: number) {
    const start = options.fileFromOffset ?? parseOffsetName(basename(fileName))
    if (start === null) {
      throw new MQStoreError('BAD_FILE_NAME', `${fileName}: not a 20-digit segment name`)
    }
    this.fileName = fileName
    this.fileSize = fileSize
    this.fileFromOffset = start
    this.readOnly = options.readOnly === true
    this.budget = options.budget ?? null
    this.unmapOnlyFlushed = options.unmapOnlyFlushed === true
    this.pool = this.readOnly ? null : (options.transientStorePool ?? null)
    this.reserveChunkBytes = reserveChunk(options, fileSize)
    this.reserveFirstBytes = reserveFirst(options, this.reserveChunkBytes)
    this.reservedTo = this.readOnly ? fileSize : reservedTo
    this.exposeReserved = options.exposeReserved === true && !this.readOnly
    this.readAround = options.readAround !== false
    this.warmChunk = options.warmChunk ?? null
  }

  /** Maps an existing file; opened for writing, its blocks are reserved first (once: see `open`): a full disk is no SIGBUS. */
  private reserveAndMap(fd: number): void {
    if (!this.readOnly && !this.blocksReserved) reserveBlocks(fd, this.fileName, this.fileSize)
    this.blocksReserved = true
    const expose = this.exposeReserved ? Math.max(1, this.reservedTo) : this.fileSize
    this.adopt(mapSegment(fd, this.fileName, this.fileSize, !this.readOnly, expose))
  }

  /** Takes `handle` as the file's mapping; `advised`: made with the file's advice (createMappedSegmentAsync). */
  private adopt(handle: MapHandle, advised = false): void {
    if (!this.readAround && !advised) limitReadAround(handle, this.fileSize)
    this.handle = handle
    this.mapped = exposedPart(handle, this.fileSize, this.reservedTo)
    this.mapGeneration++
    this.budget?.mapped(this)
  }

  /** Exposes at least [0, end) and at least twice as much as before (a reader takes a few buffers). Moves mapGeneration. */
  private exposeTo(end: number): Buffer {
    if (this.handle === null || end <= this.mapped.length) return this.mapped
    this.mapped = exposedPart(this.handle, this.fileSize, Math.max(end, 2 * this.mapped.length))
    this.mapGeneration++
    return this.mapped
  }

  /** The mapping, mapped now if need be; empty once cleaned up. TOO_MANY_OPEN_FILES or IO_ERROR if it cannot be. */
  private ensureMapped(): Buffer {
    if (this.handle !== null) {
      this.budget?.used(this)
      return this.mapped
    }
    if (this.cleanupOver || this.refCount <= 0) return this.mapped
    descriptors.use(this.fileName, !this.readOnly, (fd) => this.reserveAndMap(fd))
    return this.mapped
  }

  /** Unmaps a lazy file nobody uses (no reader, write buffer or warm-up); its unflushed bytes stay in the page cache. */
  unmapIfIdle(): boolean {
    const handle = this.handle
    if (handle === null || this.budget === null) return false
    const idle = isIdle({
      refCount: this.refCount,
      available: this.available,
      hasWriteBuffer: this.writeBuffer !== null,
      warmedAndOpen: this.warmed && !this.isFull(),
      exposed: this.sharedOut.isOpen,
      unflushedBytes: this.readPosition - this.flushedPosition,
      unmapOnlyFlushed: this.unmapOnlyFlushed,
    })
    if (!idle) return false
    this.handle = null
    this.mapped = EMPTY
    this.mapGeneration++
    handle.close()
    this.budget.unmapped(this)
    descriptors.forget(this.fileName)
    return true
  }

  /**
   * Creates a new segment at full size. Its first chunk of blocks (the whole file without `reserveChunkBytes`) is
   * reserved before the file appears under its name (`<name>.tmp`, sized, preallocated, synced, renamed), so a full disk
   * is an error here, never a SIGBUS later, and a crash leaves no short segment. `made`: the file made and mapped so off
   * the JS thread, without syncs (`madeDurable`: then synced too) and with the advice `options` asks for (createMappedSegmentAsync).
   */
  static create(fileName: string, fileSize: number, options: MappedFileOptions = {}, made?: MapHandle, madeDurable = false): MappedFile {
    assertFileSize(fileSize)
    const first = reserveFirst(options, reserveChunk(options, fileSize))
    const file = new MappedFile(fileName, fileSize, options, first)
    const cheap = options.syncOnFirstFlush === true || made !== undefined
    file.adopt(made ?? createMappedSegment(fileName, fileSize, first, cheap), made !== undefined)
    file.needsCreateSync = cheap && !madeDurable
    file.blocksReserved = true
    if (file.pool !== null) file.writeBuffer = file.pool.borrowBuffer()
    return file
  }

  /**
   * Maps an existing segment of exactly `fileSize` bytes (a lazy file: on first use). Opened for writing, its blocks are
   * reserved first: a segment may be sparse (RocketMQ's, a copy's), and a write into a hole on a full disk would be a SIGBUS.
   */
  static open(fileName: string, fileSize: number, options: MappedFileOptions = {}): MappedFile {
    assertFileSize(fileSize)
    // A chunked file is reserved lazily: what an earlier run reserved is unknown, so the first reservation covers
    // [0, end + chunk), holes included, and nothing is written past it. Other writable files: see reserveAndMap.
    const chunked = options.reserveChunkBytes !== undefined
    const file = new MappedFile(fileName, fileSize, options, chunked ? 0 : fileSize)
    file.blocksReserved = chunked
    if (file.budget !== null || options.mapOnFirstUse === true) {
      checkLazyLength(fileName, fileSize)
    } else {
      const fd = openDescriptor(fileName, options.readOnly === true ? 'r' : 'r+')
      try {
        checkLength(fileName, fs.fstatSync(fd).size, fileSize)
        file.reserveAndMap(fd)
      } finally {
        fs.closeSync(fd)
      }
    }
    if (file.pool !== null) file.writeBuffer = file.pool.borrowBuffer()
    return file
  }

  /** True while the file is mapped (a lazy file: between its first use and an idle unmap). */
  get isMapped(): boolean {
    return this.handle !== null
  }

  /** Moves the file under `budget` (null: none; it then stays mapped until shutdown), without a map or unmap. */
  setBudget(budget: MappingBudget | null): void {
    if (budget === this.budget) return
    if (this.handle !== null) this.budget?.forget(this)
    this.budget = budget
    if (this.handle !== null) budget?.adopt(this)
  }

  // ---- disk reservation ---------------------------------------------------------------------

  /** End of the reserved prefix: writes below it cannot fault on a full disk. */
  get reservedPosition(): number {
    return this.reservedTo
  }

  /** Reserves [0, end): near the reserved end (half a step), through the step after `end`'s; the step grows from reserveFirstBytes to the chunk. False when refused (`lastReserveError`). */
  reserve(end: number): boolean {
    const reserved = this.reservedTo
    const target = reservationTarget(reserved, end, this.fileSize, this.reserveChunkBytes, this.reserveFirstBytes)
    if (target === reserved) return true
    if (!this.reserveRange(reserved, target - reserved)) return false
    this.reservedTo = target
    if (target > this.mapped.length) this.exposeTo(target)
    if (this.warmed) this.warmRange(reserved, target)
    else if (this.warmChunks) this.handle?.warmAsync(reserved, target - reserved).catch(() => undefined)
    return true
  }

  /** Reserves the blocks of [offset, offset + length) (the index's hash slots); false when refused (`lastReserveError`). */
  reserveRange(offset: number, length: number): boolean {
    this.assertWritable()
    const end = Math.min(this.fileSize, offset + length)
    if (offset < 0 || end <= offset) return true
    try {
      descriptors.use(this.fileName, true, (fd) => native.allocate(fd, offset, end - offset))
      this.lastReserveError = null
      return true
    } catch (cause) {
      this.lastReserveError = ioError(`cannot reserve ${end - offset} bytes at ${offset} of ${this.fileName}`, cause)
      return false
    }
  }

  /** Faults reserved [from, to) in off the JS thread (best effort), so the writer takes no page faults there. */
  warmRange(from: number, to: number): void {
    const handle = this.handle
    const warm = this.warmChunk
    if (handle !== null) this.warming.run(this, () => (warm === null ? handle.warmAsync(from, to - from) : warm(this, handle, from, to)))
  }

  /** With `advice` given first: writes [from, to) back, drops it from the page cache and faults it in again, off the JS thread; a hint. */
  evictRange(from: number, to: number, advice: Advice): void {
    const handle = this.handle
    if (handle !== null && to > from) this.warming.run(this, () => evictPages(handle, this.fileName, from, to, advice))
  }

  /** Waits for warm-ups of reserved chunks, so that a shutdown can unmap at once. */
  settle(): Promise<void> {
    return this.warming.settle()
  }

  // ---- positions ----------------------------------------------------------------------------

  get readPosition(): number {
    return this.writeBuffer === null ? this.wrotePosition : this.committedPosition
  }

  isFull(): boolean {
    return this.wrotePosition === this.fileSize
  }

  hasWriteBuffer(): boolean {
    return this.writeBuffer !== null
  }

  /** Sets all three positions (load sets them to the file size; recovery fixes the tail). */
  setPositions(position: number): void {
    if (!Number.isInteger(position) || position < 0 || position > this.fileSize) {
      throw new RangeError(`position ${position} is outside ${this.fileName}`)
    }
    this.wrotePosition = position
    this.committedPosition = position
    this.flushedPosition = position
  }

  // ---- appends ------------------------------------------------------------------------------

  /** Commit-log append: the callback writes at the write position (write buffer or mapping), which advances by what it reports. */
  appendWith<R extends AppendOutcome>(callback: AppendCallback<R>): R {
    this.assertWritable()
    const pos = this.wrotePosition
    if (pos >= this.fileSize) throw new MQStoreError('CORRUPTION', `${this.fileName} is already full`)
    const target = this.writeBuffer ?? this.wholeMapping()
    const outcome = callback(target, pos, this.fileSize - pos, this.fileFromOffset)
    if (outcome.wroteBytes < 0 || pos + outcome.wroteBytes > this.fileSize) {
      throw new RangeError(`append of ${outcome.wroteBytes} bytes at ${pos} overflows ${this.fileName}`)
    }
    this.wrotePosition = pos + outcome.wroteBytes
    return outcome
  }

  /** Where appendTarget() starts in the file: an appender writes position p at p - appendBase. */
  get appendBase(): number {
    return this.writeBuffer === null ? 0 : this.writeBase
  }

  /** Appends go to `buffer`, holding the file from `base` (write-stage.ts), or to the mapping (null); all so far is committed. */
  setWriteBuffer(buffer: Buffer | null, base: number): void {
    this.committedPosition = this.wrotePosition
    this.writeBuffer = buffer
    this.writeBase = buffer === null ? 0 : base
  }

  /** For an in-place appender (the commit log): the write buffer or mapping; it then moves wrotePosition itself. */
  appendTarget(): Buffer {
    this.assertWritable()
    return this.writeBuffer ?? this.wholeMapping()
  }

  /** Raw append: succeeds only if the bytes fit and their blocks could be reserved. */
  appendMessage(data: Uint8Array, offset = 0, length = data.length - offset): boolean {
    this.assertWritable()
    const pos = this.wrotePosition
    if (pos + length > this.fileSize) return false
    if (!this.reserve(pos + length)) return false
    this.ensureMapped().set(data.subarray(offset, offset + length), pos)
    this.wrotePosition = pos + length
    return true
  }

  /** For fixed-size unit writers (consume queue, index): the Buffer over the whole mapping; only the owner writes. */
  mappedBuffer(): Buffer {
    this.assertWritable()
    return this.wholeMapping()
  }

  /** As mappedBuffer, over at least [0, reservedPosition): all a writer that reserves first may touch. New when mapGeneration moves. */
  reservedBuffer(): Buffer {
    this.assertWritable()
    return this.ensureMapped()
  }

  /** The mapping, mapped now if need be, exposed whole. */
  private wholeMapping(): Buffer {
    this.ensureMapped()
    return this.exposeTo(this.fileSize)
  }

  private assertWritable(): void {
    if (this.readOnly) throw new TypeError(`${this.fileName} is mapped read-only`)
    if (!this.available) throw new MQStoreError('STORE_CLOSED', `${this.fileName} is shut down`)
  }

  // ---- commit and flush ---------------------------------------------------------------------

  /** True when [from, to) holds bytes, and at least `leastPages` pages of them unless the file is full. */
  private hasPagesBetween(from: number, to: number, leastPages: number): boolean {
    if (leastPages > 0 && !this.isFull()) return Math.floor(to / OS_PAGE_SIZE) - Math.floor(from / OS_PAGE_SIZE) >= leastPages
    return to > from
  }

  /** Forces [flushedPosition, readPosition) to disk on the calling thread (a file that cannot be held is gone); returns flushedPosition. */
  flush(flushLeastPages: number): number {
    if (!this.hasPagesBetween(this.flushedPosition, this.readPosition, flushLeastPages)) return this.flushedPosition
    const to = this.readPosition
    if (this.hold()) {
      try {
        this.force(this.flushedPosition, to)
      } finally {
        this.release()
      }
    }
    this.flushedPosition = to
    return to
  }

  /** The same, with msync on the libuv pool; the file is held until it completes. `after` is written once it succeeded. */
  async flushAsync(flushLeastPages: number, after: WriteAfterSync | null = null): Promise<number> {
    if (!this.hasPagesBetween(this.flushedPosition, this.readPosition, flushLeastPages)) return this.flushedPosition
    if (!this.hold()) {
      this.flushedPosition = this.readPosition
      return this.flushedPosition
    }
    const from = this.flushedPosition
    const to = this.readPosition
    try {
      if (this.needsCreateSync) {
        // One fsync forces the data and the file's size; then its directory entry.
        if (this.handle !== null && native.platform === 'darwin') await this.handle.syncAsync(from, to - from)
        await descriptors.useAsync(this.fileName, false, (fd) => fsyncAsync(fd))
        await syncDirectoryAsync(this.fileName)
        this.needsCreateSync = false
      } else if (this.writeBuffer !== null || this.committedThroughWrites || this.handle === null) {
        await this.fdatasyncAsync()
      } else {
        await syncMappedRange(this.handle, from, to, after, () => this.fdatasyncAsync())
        after = null
      }
      if (after !== null) writeAfter(after)
      if (to > this.flushedPosition) this.flushedPosition = to
    } catch (cause) {
      throw ioError(`flush of ${this.fileName} failed`, cause)
    } finally {
      this.release()
    }
    return this.flushedPosition
  }

  /** True once bytes reached the file through positional writes (commit), not the mapping. */
  private committedThroughWrites = false

  private force(from: number, to: number): void {
    try {
      if (this.needsCreateSync) {
        if (this.handle !== null && native.platform === 'darwin') this.handle.sync(from, to - from)
        this.syncCreation()
      } else if (this.writeBuffer !== null || this.committedThroughWrites || this.handle === null) {
        // An unmapped file's dirty pages are in the page cache: fdatasync forces them.
        descriptors.use(this.fileName, false, (fd) => fs.fdatasyncSync(fd))
      } else {
        this.handle.sync(from, to - from)
        // macOS msync reaches the file system but not the drive; Node's fdatasync adds F_FULLFSYNC.
        if (native.platform === 'darwin') descriptors.use(this.fileName, false, (fd) => fs.fdatasyncSync(fd))
      }
    } catch (cause) {
      if (cause instanceof MQStoreError) throw cause
      throw ioError(`flush of ${this.fileName} failed`, cause)
    }
  }

  /** Zeroes and syncs what lies past `position` (records recovery dropped; see stale-tail.ts); returns the bytes zeroed. */
  eraseStaleTail(position: number, quietBytes: number): number {
    this.assertWritable()
    let erased = 0
    const ranges = descriptors.use(this.fileName, false, (fd) => staleRanges(fd, position, this.fileSize, quietBytes))
    for (const [from, to] of ranges) {
      this.wholeMapping().fill(0, from, to)
      this.force(from, to)
      erased += to - from
    }
    return erased
  }

  /** The native handle, mapped now if needed (a flush of a file with unflushed bytes is mapped). */
  private ensureHandle(): MapHandle {
    this.ensureMapped()
    if (this.handle === null) throw new MQStoreError('STORE_CLOSED', `${this.fileName} is unmapped`)
    return this.handle
  }

  private fdatasyncAsync(): Promise<void> {
    return descriptors.useAsync(this.fileName, false, (fd) => fdatasync(fd))
  }

  /** False while a file created without syncs waits for its first flush to make its name durable. */
  get nameDurable(): boolean {
    return !this.needsCreateSync
  }

  /** First flush of a file created without syncs: its size and directory entry become durable. */
  private syncCreation(): void {
    descriptors.use(this.fileName, false, (fd) => fs.fsyncSync(fd))
    syncDirectory(this.fileName)
    this.needsCreateSync = false
  }

  /**
   * Copies [committed, wrote) of the write buffer into the file; returns committedPosition. With
   * `startWriteBack`, their write-back starts at once, on this thread (a group commit's few pages,
   * which its sync on the pool then finds under way).
   */
  commit(commitLeastPages: number, startWriteBack = false): number {
    const buffer = this.writeBuffer
    if (buffer === null) return this.wrotePosition
    if (this.hasPagesBetween(this.committedPosition, this.wrotePosition, commitLeastPages) && this.hold()) {
      try {
        const from = this.committedPosition
        const to = this.wrotePosition
        let done = 0
        descriptors.use(this.fileName, true, (fd) => {
          const at = from - this.writeBase
          while (done < to - from) done += fs.writeSync(fd, buffer, at + done, to - from - done, from + done)
          if (startWriteBack) native.writeBackNow(fd, from, to - from)
        })
        this.committedThroughWrites = true
        this.committedPosition = to
      } catch (cause) {
        throw ioError(`commit of ${this.fileName} failed`, cause)
      } finally {
        this.release()
      }
    }
    if (this.committedPosition === this.fileSize) {
      this.pool?.returnBuffer(buffer)
      this.writeBuffer = null
      this.writeBase = 0
    }
    return this.committedPosition
  }

  // ---- reads --------------------------------------------------------------------------------

  /**
   * A held view of [pos, pos + size), or of [pos, readPosition) when size is omitted; null when
   * the range is not readable or the file is shutting down.
   */
  selectMappedBuffer(pos: number, size?: number): SelectMappedBufferResult | null {
    const readPosition = this.readPosition
    if (size === undefined) {
      if (pos < 0 || pos >= readPosition) return null
      size = readPosition - pos
    } else if (pos < 0 || size < 0 || pos + size > readPosition) {
      return null
    }
    if (!this.hold()) return null
    let mapped: Buffer
    try {
      mapped = this.ensureMapped()
      // A view is never cut short: what it covers is exposed first.
      if (pos + size > mapped.length) mapped = this.exposeTo(pos + size)
    } catch (error) {
      this.release()
      throw error
    }
    const view = mapped.subarray(pos, pos + size)
    return new SelectMappedBufferResult(this.fileFromOffset + pos, view, size, this)
  }

  /**
   * An unheld view over [0, readPosition) for the owner's own scans (recovery, dispatch), which
   * run on the thread that alone may destroy the file.
   */
  readableBuffer(): Buffer {
    this.ensureMapped()
    return this.exposeTo(this.readPosition).subarray(0, this.readPosition)
  }

  /**
   * Like readableBuffer, but over a private copy-on-write mapping of the file, for views that
   * leave the store (zero-copy reads). A write through such a view changes a private copy of the
   * page, never the file (see PrivateMapping). Pages nobody wrote follow the file, which is what Linux and macOS do for MAP_PRIVATE; a page
   * someone wrote no longer does, which is why readers verify what they serve from here.
   * Empty once the file is cleaned up. Callers hold the file.
   */
  exposedBuffer(): Buffer {
    if (this.cleanupOver) return EMPTY
    return this.sharedOut.view(this.fileName, this.fileSize).subarray(0, this.readPosition)
  }

  // ---- reference counting -------------------------------------------------------------------

  hold(): boolean {
    if (this.available && this.refCount > 0) {
      this.refCount += 1
      return true
    }
    return false
  }

  release(): void {
    this.refCount -= 1
    if (this.refCount > 0) return
    this.cleanupOver = this.cleanup()
  }

  getRefCount(): number {
    return this.refCount
  }

  isAvailable(): boolean {
    return this.available
  }

  /** When the first shutdown dropped the owner's reference (0 while the file is available). */
  getFirstShutdownTimestamp(): number {
    return this.firstShutdownTimestamp
  }

  isCleanupOver(): boolean {
    return this.refCount <= 0 && this.cleanupOver
  }

  /**
   * Drops the owner's reference. Called again while readers hold the file, it forces the release once `intervalForcibly`
   * ms have passed since the first call. `now`: the caller's clock (cleanup's injected one, for tests).
   */
  shutdown(intervalForcibly: number, now: number = Date.now()): void {
    if (this.available) {
      this.available = false
      this.firstShutdownTimestamp = now
      this.release()
    } else if (this.refCount > 0 && now - this.firstShutdownTimestamp >= intervalForcibly) {
      this.refCount = -1000 - this.refCount
      this.release()
    }
  }

  private cleanup(): boolean {
    if (this.available) return false
    if (this.cleanupOver) return true
    const handle = this.handle
    this.handle = null
    this.mapped = EMPTY
    if (handle !== null) {
      handle.close()
      this.budget?.unmapped(this)
    }
    this.sharedOut.close()
    if (this.writeBuffer !== null) {
      this.pool?.returnBuffer(this.writeBuffer)
      this.writeBuffer = null
    }
    descriptors.forget(this.fileName)
    return true
  }

  /** Shuts down and, once no reader holds it (or the interval forced it), deletes the file and syncs its directory. */
  destroy(intervalForcibly: number, now: number = Date.now()): boolean {
    this.shutdown(intervalForcibly, now)
    if (!this.isCleanupOver()) return false
    fs.rmSync(this.fileName, { force: true })
    syncDirectory(this.fileName)
    return true
  }

  // ---- time, warm-up ------------------------------------------------------------------------

  /** The file's modification time in ms, as the file system reports it (0 if it is gone). */
  getLastModifiedTimestamp(): number {
    return modifiedTimeMs(this.fileName)
  }

  /** Faults the reserved pages in on the libuv pool, and with `lock` mlocks them (best effort: false when refused). */
  async warm(lock = false): Promise<boolean> {
    if (this.warmed || !this.hold()) return false
    try {
      // Only the reserved prefix: populating a hole would allocate its blocks behind the
      // reservation's back (and fault on a full disk). Later chunks are warmed as they are reserved.
      const handle = this.ensureHandle()
      this.warmed = true
      const reserved = this.reservedTo
      await (this.warmChunk?.(this, handle, 0, reserved) ?? handle.warmAsync(0, reserved))
      if (!lock) return true
      try {
        handle.lock(0, reserved)
        return true
      } catch {
        return false
      }
    } finally {
      this.release()
    }
  }

  /** Drops the page-table entries of [from, to) (dropPages), then with `writeBack` starts the range's write-back, both off the JS thread. */
  dropPages(from: number, to: number, writeBack: boolean): void {
    dropPages(this.handle, from, to, writeBack ? this.fileName : null)
  }

  toString(): string {
    return `MappedFile(${this.fileName}, wrote=${this.wrotePosition}, flushed=${this.flushedPosition})`
  }
}
