// One memory-mapped segment file, with RocketMQ's three positions and its reference counting
// (hold / release / shutdown / destroy).
//
// Disk blocks: the file always has its full logical size (names and sizes are RocketMQ's), but its
// blocks may be reserved in chunks ahead of the writer (`reserveChunkBytes`), so a new store takes
// a few MB instead of whole files. A page is written only once its blocks are reserved, so a full
// disk is a failed reservation (a status for the caller), never a SIGBUS on a page fault.
//
// Positions, all relative to the file start:
//   wrotePosition      bytes appended (to the write buffer when one is attached, else the mapping)
//   committedPosition  bytes copied from the write buffer into the file (write buffer only)
//   flushedPosition    bytes known to be forced to disk
//   readPosition       wrotePosition without a write buffer, committedPosition with one;
//                      readers never see past it.
//
// Lifetime: the owner holds one reference from creation. Every reader holds one more while it uses
// a view (`selectMappedBuffer` returns a held result that must be released exactly once).
// `shutdown(interval)` drops the owner's reference; if readers still hold the file after `interval`
// ms, a later shutdown forces the count negative and unmaps anyway. Unmapping detaches the
// ArrayBuffer first, so a reader that kept a view sees an empty buffer, never freed memory.
import * as fs from 'node:fs'
import { basename } from 'node:path'

import { ioError, MQStoreError } from '../../errors.js'
import { native, type MapHandle } from '../../native.js'
import { syncDirectory } from './directory.js'
import { parseOffsetName } from './segment-name.js'
import { staleRanges } from './stale-tail.js'
import type { TransientStorePool } from './transient-store-pool.js'

/** RocketMQ's logical page for flush and commit thresholds (not the OS page size). */
export const OS_PAGE_SIZE = 4096

/** What a commit-log append callback reports back. */
export interface AppendOutcome {
  /** Bytes written at the position, or the blank length for an end-of-file blank. */
  wroteBytes: number
}

/**
 * Writes one or more records at `pos` of `target` (the write buffer or the mapping) with at most
 * `maxBlank` bytes of room left in the file, and says how many bytes it wrote.
 */
export type AppendCallback<R extends AppendOutcome> = (
  target: Buffer,
  pos: number,
  maxBlank: number,
  fileFromOffset: number,
) => R

/** A held view of part of a mapped file. Release it exactly once. */
export class SelectMappedBufferResult {
  readonly startOffset: number
  readonly buffer: Buffer
  readonly size: number
  private mappedFile: MappedFile | null

  constructor(startOffset: number, buffer: Buffer, size: number, mappedFile: MappedFile) {
    this.startOffset = startOffset
    this.buffer = buffer
    this.size = size
    this.mappedFile = mappedFile
  }

  get file(): MappedFile | null {
    return this.mappedFile
  }

  /** Drops the hold on the file. Idempotent: a second call does nothing. */
  release(): void {
    const file = this.mappedFile
    if (file === null) return
    this.mappedFile = null
    file.release()
  }
}

export interface MappedFileOptions {
  /** Borrow a write buffer from this pool (commit log with transientStorePoolEnable). */
  transientStorePool?: TransientStorePool | null
  /** Map read-only: a private copy-on-write map that never writes to the file. */
  readOnly?: boolean
  /**
   * The file's start offset, for files not named by it (index files are named by creation time).
   * Without it the name must be a 20-digit start offset.
   */
  fileFromOffset?: number
  /**
   * Reserve disk blocks in chunks of this many bytes ahead of the writer (see `reserve`) instead
   * of the whole file at creation. Writers of such a file must call `reserve` (or
   * `reserveRange`) before they write a page.
   */
  reserveChunkBytes?: number
}

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

  private fd: number
  private readonly handle: MapHandle
  /** A Buffer over the whole mapping; empty once unmapped. */
  private readonly mapped: Buffer
  private writeBuffer: Buffer | null = null
  /** A second, private copy-on-write mapping whose views may be handed to users; made on demand. */
  private sharedOut: { handle: MapHandle; view: Buffer } | null = null
  private readonly pool: TransientStorePool | null

  private refCount = 1
  private available = true
  private cleanupOver = false
  private firstShutdownTimestamp = 0
  private warmed = false
  /** Warm-ups of newly reserved chunks in flight (each holds the file until it ends). */
  private readonly warming = new Set<Promise<unknown>>()

  /** Blocks of [0, reservedPosition) are reserved on disk; nothing is written past it. */
  private reservedTo: number
  /** Bytes reserved per step; the file size when the whole file is reserved at creation. */
  readonly reserveChunkBytes: number
  /** Why the last reservation failed (a NO_SPACE or IO_ERROR MQStoreError), for the caller's report. */
  lastReserveError: MQStoreError | null = null

  private constructor(fileName: string, fileSize: number, fd: number, options: MappedFileOptions, reservedTo: number) {
    const start = options.fileFromOffset ?? parseOffsetName(basename(fileName))
    if (start === null) {
      throw new MQStoreError('BAD_FILE_NAME', `${fileName}: not a 20-digit segment name`)
    }
    this.fileName = fileName
    this.fileSize = fileSize
    this.fileFromOffset = start
    this.readOnly = options.readOnly === true
    this.fd = fd
    try {
      this.handle = native.map(fd, fileSize, !this.readOnly)
    } catch (cause) {
      fs.closeSync(fd)
      throw ioError(`cannot map ${fileName}`, cause)
    }
    this.mapped = Buffer.from(this.handle.buffer, 0, fileSize)
    this.pool = this.readOnly ? null : (options.transientStorePool ?? null)
    if (this.pool !== null) this.writeBuffer = this.pool.borrowBuffer()
    this.reserveChunkBytes = reserveChunk(options, fileSize)
    this.reservedTo = this.readOnly ? fileSize : reservedTo
  }

  /**
   * Creates a new segment at full size. Its first chunk of blocks (the whole file without
   * `reserveChunkBytes`) is reserved before the file appears under its name (written as
   * `<name>.tmp`, sized, preallocated, synced, renamed), so a full disk is an error here, never a
   * SIGBUS on a later page fault, and a crash never leaves a short segment behind.
   */
  static create(fileName: string, fileSize: number, options: MappedFileOptions = {}): MappedFile {
    assertFileSize(fileSize)
    const first = reserveChunk(options, fileSize)
    const temp = `${fileName}.tmp`
    let fd = -1
    try {
      fd = fs.openSync(temp, 'w+', 0o644)
      // The rest of the file is a hole until the writer reserves it.
      if (first < fileSize) fs.ftruncateSync(fd, fileSize)
      native.allocate(fd, 0, first)
      fs.fsyncSync(fd)
      fs.renameSync(temp, fileName)
    } catch (cause) {
      if (fd >= 0) fs.closeSync(fd)
      fs.rmSync(temp, { force: true })
      throw ioError(`cannot create ${fileName} (${fileSize} bytes)`, cause)
    }
    syncDirectory(fileName)
    return new MappedFile(fileName, fileSize, fd, options, first)
  }

  /**
   * Maps an existing segment, which must be exactly `fileSize` bytes long. Opened for writing, its
   * blocks are reserved first: a segment may be sparse (RocketMQ creates them so; `cp` and restores
   * may too), and a write into a hole on a full disk would otherwise be a SIGBUS, not an error.
   */
  static open(fileName: string, fileSize: number, options: MappedFileOptions = {}): MappedFile {
    assertFileSize(fileSize)
    let fd: number
    try {
      fd = fs.openSync(fileName, options.readOnly === true ? 'r' : 'r+')
    } catch (cause) {
      throw ioError(`cannot open ${fileName}`, cause)
    }
    const length = fs.fstatSync(fd).size
    if (length !== fileSize) {
      fs.closeSync(fd)
      throw new MQStoreError(
        'BAD_FILE_SIZE',
        `${fileName} is ${length} bytes, but segments of this queue are ${fileSize} bytes`,
      )
    }
    const chunked = options.reserveChunkBytes !== undefined
    if (options.readOnly !== true && !chunked) {
      try {
        reserveBlocks(fd, fileSize)
      } catch (cause) {
        fs.closeSync(fd)
        throw ioError(`cannot reserve the blocks of ${fileName} (${fileSize} bytes)`, cause)
      }
    }
    // A chunked file is reserved in chunks here too, lazily: what an earlier run reserved is not
    // known, so the first reservation covers [0, end + chunk) from the file start, holes included
    // (a sparse file from RocketMQ or a copy), and nothing is ever written past it. A file that is
    // never written again (every full segment) gets no blocks it does not already have.
    return new MappedFile(fileName, fileSize, fd, options, chunked ? 0 : fileSize)
  }

  // ---- disk reservation ---------------------------------------------------------------------

  /** End of the reserved prefix: writes below it cannot fault on a full disk. */
  get reservedPosition(): number {
    return this.reservedTo
  }

  /**
   * Makes sure the blocks of [0, end) are reserved. When `end` comes within half a chunk of the
   * reserved end, reserves through the chunk after the one holding `end`, so the writer reserves
   * once per chunk. Returns false when the file system refuses (`lastReserveError` says why).
   */
  reserve(end: number): boolean {
    const reserved = this.reservedTo
    if (reserved >= this.fileSize || end + (this.reserveChunkBytes >>> 1) <= reserved) return true
    const chunk = this.reserveChunkBytes
    const target = Math.min(this.fileSize, Math.ceil(end / chunk) * chunk + chunk)
    if (!this.reserveRange(reserved, target - reserved)) return false
    this.reservedTo = target
    if (this.warmed) this.warmRange(reserved, target)
    return true
  }

  /**
   * Reserves the blocks of [offset, offset + length) (for writers that do not write in order:
   * the index file's hash slots). False when the file system refuses (`lastReserveError`).
   */
  reserveRange(offset: number, length: number): boolean {
    this.assertWritable()
    const end = Math.min(this.fileSize, offset + length)
    if (offset < 0 || end <= offset) return true
    try {
      native.allocate(this.fd, offset, end - offset)
      this.lastReserveError = null
      return true
    } catch (cause) {
      this.lastReserveError = ioError(`cannot reserve ${end - offset} bytes at ${offset} of ${this.fileName}`, cause)
      return false
    }
  }

  /** Faults a newly reserved range in off the JS thread, as warm() did for the first chunk. */
  private warmRange(from: number, to: number): void {
    if (!this.hold()) return
    const warming: Promise<unknown> = this.handle
      .warmAsync(from, to - from)
      .catch(() => undefined)
      .finally(() => {
        this.warming.delete(warming)
        this.release()
      })
    this.warming.add(warming)
  }

  /** Waits for warm-ups of reserved chunks, so that a shutdown can unmap at once. */
  async settle(): Promise<void> {
    while (this.warming.size > 0) await Promise.all([...this.warming])
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

  /**
   * Commit-log append: the callback writes into the write buffer (if any) or the mapping at the
   * write position, and the position advances by what it reports.
   */
  appendWith<R extends AppendOutcome>(callback: AppendCallback<R>): R {
    this.assertWritable()
    const pos = this.wrotePosition
    if (pos >= this.fileSize) throw new MQStoreError('CORRUPTION', `${this.fileName} is already full`)
    const target = this.writeBuffer ?? this.mapped
    const outcome = callback(target, pos, this.fileSize - pos, this.fileFromOffset)
    if (outcome.wroteBytes < 0 || pos + outcome.wroteBytes > this.fileSize) {
      throw new RangeError(`append of ${outcome.wroteBytes} bytes at ${pos} overflows ${this.fileName}`)
    }
    this.wrotePosition = pos + outcome.wroteBytes
    return outcome
  }

  /** Raw append: succeeds only if the bytes fit and their blocks could be reserved. */
  appendMessage(data: Uint8Array, offset = 0, length = data.length - offset): boolean {
    this.assertWritable()
    const pos = this.wrotePosition
    if (pos + length > this.fileSize) return false
    if (!this.reserve(pos + length)) return false
    this.mapped.set(data.subarray(offset, offset + length), pos)
    this.wrotePosition = pos + length
    return true
  }

  /**
   * Direct access for fixed-size unit writers (consume queue, index): the Buffer over the whole
   * mapping. Only the owner of the file may write through it, below fileSize.
   */
  mappedBuffer(): Buffer {
    this.assertWritable()
    return this.mapped
  }

  private assertWritable(): void {
    if (this.readOnly) throw new TypeError(`${this.fileName} is mapped read-only`)
    if (!this.available) throw new MQStoreError('STORE_CLOSED', `${this.fileName} is shut down`)
  }

  // ---- commit and flush ---------------------------------------------------------------------

  private isAbleToFlush(flushLeastPages: number): boolean {
    const flushed = this.flushedPosition
    const write = this.readPosition
    if (this.isFull()) return write > flushed
    if (flushLeastPages > 0) {
      return Math.floor(write / OS_PAGE_SIZE) - Math.floor(flushed / OS_PAGE_SIZE) >= flushLeastPages
    }
    return write > flushed
  }

  private flushRange(): { from: number; to: number } | null {
    const from = this.flushedPosition
    const to = this.readPosition
    return to > from ? { from, to } : null
  }

  /** Forces [flushedPosition, readPosition) to disk on the calling thread; returns flushedPosition. */
  flush(flushLeastPages: number): number {
    if (!this.isAbleToFlush(flushLeastPages)) return this.flushedPosition
    if (!this.hold()) {
      this.flushedPosition = this.readPosition
      return this.flushedPosition
    }
    try {
      const range = this.flushRange()
      if (range !== null) this.force(range.from, range.to)
      this.flushedPosition = range === null ? this.flushedPosition : range.to
    } finally {
      this.release()
    }
    return this.flushedPosition
  }

  /** The same, with msync on the libuv pool; the file is held until it completes. */
  async flushAsync(flushLeastPages: number): Promise<number> {
    if (!this.isAbleToFlush(flushLeastPages)) return this.flushedPosition
    if (!this.hold()) {
      this.flushedPosition = this.readPosition
      return this.flushedPosition
    }
    try {
      const range = this.flushRange()
      if (range !== null) {
        if (this.writeBuffer !== null || this.committedThroughWrites) {
          await fdatasync(this.fd)
        } else {
          await this.handle.syncAsync(range.from, range.to - range.from)
          if (native.platform === 'darwin') await fdatasync(this.fd)
        }
        if (range.to > this.flushedPosition) this.flushedPosition = range.to
      }
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
      if (this.writeBuffer !== null || this.committedThroughWrites) {
        fs.fdatasyncSync(this.fd)
      } else {
        this.handle.sync(from, to - from)
        // macOS msync reaches the file system but not the drive; Node's fdatasync adds F_FULLFSYNC.
        if (native.platform === 'darwin') fs.fdatasyncSync(this.fd)
      }
    } catch (cause) {
      throw ioError(`flush of ${this.fileName} failed`, cause)
    }
  }

  /**
   * Zeroes what lies past `position` (records a recovery dropped) and forces it to disk: else a
   * power cut that reverts a page of new, unsynced appends brings them back, valid and chained to
   * the new records (see staleRanges for where it stops). Returns the bytes zeroed.
   */
  eraseStaleTail(position: number, quietBytes: number): number {
    this.assertWritable()
    let erased = 0
    for (const [from, to] of staleRanges(this.fd, position, this.fileSize, quietBytes)) {
      this.mapped.fill(0, from, to)
      this.force(from, to)
      erased += to - from
    }
    return erased
  }

  private isAbleToCommit(commitLeastPages: number): boolean {
    const committed = this.committedPosition
    const write = this.wrotePosition
    if (this.isFull()) return write > committed
    if (commitLeastPages > 0) {
      return Math.floor(write / OS_PAGE_SIZE) - Math.floor(committed / OS_PAGE_SIZE) >= commitLeastPages
    }
    return write > committed
  }

  /** Copies [committed, wrote) of the write buffer into the file; returns committedPosition. */
  commit(commitLeastPages: number): number {
    const buffer = this.writeBuffer
    if (buffer === null) return this.wrotePosition
    if (this.isAbleToCommit(commitLeastPages) && this.hold()) {
      try {
        const from = this.committedPosition
        const to = this.wrotePosition
        let done = 0
        while (done < to - from) {
          done += fs.writeSync(this.fd, buffer, from + done, to - from - done, from + done)
        }
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
    const view = this.mapped.subarray(pos, pos + size)
    return new SelectMappedBufferResult(this.fileFromOffset + pos, view, size, this)
  }

  /**
   * An unheld view over [0, readPosition) for the owner's own scans (recovery, dispatch), which
   * run on the thread that alone may destroy the file.
   */
  readableBuffer(): Buffer {
    return this.mapped.subarray(0, this.readPosition)
  }

  /**
   * Like readableBuffer, but over a private copy-on-write mapping of the file, for views that
   * leave the store (zero-copy reads). A write through such a view changes a private copy of the
   * page, never the file; a view whose ArrayBuffer was transferred away empties ours, so a new
   * mapping replaces it (the old one becomes anonymous memory at close, see native/mapping.h).
   * Pages nobody wrote follow the file, which is what Linux and macOS do for MAP_PRIVATE; a page
   * someone wrote no longer does, which is why readers verify what they serve from here.
   * Empty once the file is cleaned up. Callers hold the file.
   */
  exposedBuffer(): Buffer {
    if (this.fd < 0 || this.cleanupOver) return this.mapped.subarray(0, 0)
    let out = this.sharedOut
    if (out !== null && out.view.length !== this.fileSize) {
      out.handle.close()
      out = null
    }
    if (out === null) {
      const handle = native.map(this.fd, this.fileSize, false)
      out = { handle, view: Buffer.from(handle.buffer, 0, this.fileSize) }
      this.sharedOut = out
    }
    return out.view.subarray(0, this.readPosition)
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
   * Drops the owner's reference. Called again while readers still hold the file, it forces the
   * release once `intervalForcibly` ms have passed since the first call. `now` is the caller's
   * clock (cleanup passes its injected one, so a test can move past the interval).
   */
  shutdown(intervalForcibly: number, now: number = Date.now()): void {
    if (this.available) {
      this.available = false
      this.firstShutdownTimestamp = now
      this.release()
    } else if (this.refCount > 0) {
      if (now - this.firstShutdownTimestamp >= intervalForcibly) {
        this.refCount = -1000 - this.refCount
        this.release()
      }
    }
  }

  private cleanup(): boolean {
    if (this.available) return false
    if (this.cleanupOver) return true
    this.handle.close()
    this.sharedOut?.handle.close()
    this.sharedOut = null
    if (this.writeBuffer !== null) {
      this.pool?.returnBuffer(this.writeBuffer)
      this.writeBuffer = null
    }
    if (this.fd >= 0) {
      fs.closeSync(this.fd)
      this.fd = -1
    }
    return true
  }

  /**
   * Shuts down and, once no reader holds it (or the interval forced it), deletes the file and
   * syncs its directory, so the deletion survives a power cut.
   */
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
    try {
      return fs.statSync(this.fileName).mtimeMs
    } catch {
      return 0
    }
  }

  /**
   * Faults every page in on the libuv pool so the writer does not take page faults, and with
   * `lock` also mlocks the file (best effort: returns false when the OS refuses).
   */
  async warm(lock = false): Promise<boolean> {
    if (this.warmed || !this.hold()) return false
    try {
      // Only the reserved prefix: populating a hole would allocate its blocks behind the
      // reservation's back (and fault on a full disk). Later chunks are warmed as they are reserved.
      this.warmed = true
      const reserved = this.reservedTo
      await this.handle.warmAsync(0, reserved)
      if (!lock) return true
      try {
        this.handle.lock(0, reserved)
        return true
      } catch {
        return false
      }
    } finally {
      this.release()
    }
  }

  /** Unlocks pages locked by warm(lock = true); best effort. */
  munlock(): void {
    if (!this.hold()) return
    try {
      this.handle.unlock(0, this.fileSize)
    } catch {
      // never locked, or already unmapped: nothing to undo
    } finally {
      this.release()
    }
  }

  toString(): string {
    return `MappedFile(${this.fileName}, wrote=${this.wrotePosition}, flushed=${this.flushedPosition})`
  }
}

/**
 * Reserves the blocks of an existing file that has holes, keeping its modification time: retention
 * reads a file's age from it, and fallocate counts as a modification. A file whose blocks already
 * cover its size (the usual case) costs one fstat.
 */
function reserveBlocks(fd: number, fileSize: number): void {
  const stat = fs.fstatSync(fd)
  if (stat.blocks * 512 >= fileSize) return
  native.allocate(fd, 0, fileSize)
  fs.futimesSync(fd, stat.atime, stat.mtime)
}

/** The reservation step of a file: a page multiple, at most the file size. */
function reserveChunk(options: MappedFileOptions, fileSize: number): number {
  const chunk = options.reserveChunkBytes
  if (chunk === undefined || options.readOnly === true) return fileSize
  if (!Number.isSafeInteger(chunk) || chunk <= 0) {
    throw new RangeError(`reserveChunkBytes must be a positive integer, got ${chunk}`)
  }
  const page = native.pageSize
  return Math.min(fileSize, Math.ceil(chunk / page) * page)
}

function assertFileSize(fileSize: number): void {
  if (!Number.isSafeInteger(fileSize) || fileSize <= 0) {
    throw new RangeError(`file size must be a positive integer, got ${fileSize}`)
  }
}

function fdatasync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())))
}
