// An ordered run of equal-size MappedFiles in one directory, each named by its start offset.
// The commit log, every consume queue and (with its own naming) nothing else uses it.
//
// Invariants: files are sorted by start offset; consecutive files are exactly `mappedFileSize`
// apart (load refuses anything else); only the last file is ever written.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

import { ioError, MQStoreError } from '../../errors.js'
import { AHEAD_SUFFIX, formatOffsetName, isTempSegmentName, parseOffsetName, segmentLayoutIssues } from './segment-name.js'
import { ensureDirectory, removeQuietly, syncDirectory, syncDirectoryAsync, syncFileAsync } from './directory.js'
import { MappedFile, type MappedFileOptions } from './mapped-file.js'
import type { WarmChunk } from './mapped-file-types.js'
import { reserveChunk, reserveFirst } from './mapped-file-types.js'
import { createMappedSegmentAsync } from './segment-io.js'
import type { MappingBudget } from './mapping-budget.js'
import type { TransientStorePool } from './transient-store-pool.js'
import { readInt64BE } from '../bytes.js'
import type { MapHandle } from '../../native.js'

/** RocketMQ deletes at most this many files in one expiry pass. */
export const DELETE_FILES_BATCH_MAX = 10

/** How an expiry call reads the time and reports what it deleted. */
export interface DeleteOptions {
  /** The clock for ages and forced intervals (Date.now by default). */
  clock?: () => number
  /** Delete at most this many files (capped at DELETE_FILES_BATCH_MAX). */
  maxFiles?: number
  /** Called for each file deleted, with the readers it still had when it was destroyed. */
  onDeleted?: (file: MappedFile, holders: number) => void
  /** Checked after each pause between files: true ends the call early (the store is closing). */
  shouldStop?: () => boolean
}

export interface MappedFileQueueOptions {
  /** Make the next file ahead of need on the libuv pool when the owner asks (prepareNext: the commit log's allocator). */
  preallocateNext?: boolean
  /** Fault the pages of new files in ahead of the writer (warmMapedFileEnable). */
  warmMappedFiles?: boolean
  /** Fault each new file's chunks in as they are reserved, without keeping it mapped (MappedFile.warmChunks). */
  warmChunks?: boolean
  /** Also mlock warmed files (best effort). */
  lockWarmedFiles?: boolean
  transientStorePool?: TransientStorePool | null
  readOnly?: boolean
  /** Reserve each file's disk blocks in chunks of this size ahead of the writer (MappedFile). */
  reserveChunkBytes?: number
  /** The first reservation step of each file, doubling up to reserveChunkBytes (MappedFile). */
  reserveFirstBytes?: number
  /** How warmed files fault their new chunks in (MappedFileOptions.warmChunk). */
  warmChunk?: WarmChunk
  /** Map files on first use and let this budget unmap idle ones (see MappedFile). */
  budget?: MappingBudget | null
  /** Each file exposes to JavaScript what is reserved or read so far (MappedFileOptions.exposeReserved). */
  exposeReserved?: boolean
  /** False: faults read only the page they touch (MappedFileOptions.readAround). */
  readAround?: boolean
  /**
   * With a budget: only files before the last are under it, each from the flush that completes it
   * (an unflushed file cannot be unmapped, and counting it would only push out files that can);
   * the last file (the one being written) is mapped on first use and stays mapped outside the
   * budget (the commit log). Files found by load() join the budget at the truncation that ends
   * recovery, once the last file is known: what recovery read is not counted as maps, and is
   * unmapped again once idle.
   */
  budgetOldFilesOnly?: boolean
  /** Map the files found by load() on first use, then keep them mapped (see MappedFile). */
  mapOnFirstUse?: boolean
  /**
   * Create files without the fsync chain; their first flush makes them durable (derived files
   * only). At load, a last file shorter than the file size is such a file cut short by a crash
   * before its first flush: it is removed (recovery re-dispatches what it would have held).
   */
  syncOnFirstFlush?: boolean
}

export class MappedFileQueue {
  readonly storePath: string
  readonly mappedFileSize: number
  readonly mappedFiles: MappedFile[] = []
  flushedWhere = 0
  committedWhere = 0
  /** Store time of the last record of the last file flushed with flushLeastPages = 0. */
  storeTimestamp = 0
  /** The last error met while creating a file (kept for the caller's report). */
  lastCreateError: unknown = null

  private readonly options: MappedFileQueueOptions
  private preallocated: MappedFile | null = null
  /** The next file being made on the libuv pool (makeAhead), until it is kept or dropped. */
  private making: Promise<void> | null = null
  /** Where the file prepareNext last asked for starts (-1: none), made once the one under way ends. */
  private wantedNext = -1
  /** Moves on when the file being made is no longer wanted (a close, a truncation). */
  private aheadGeneration = 0
  private closed = false
  /** Warm-ups in flight: each holds its file until it ends. */
  private readonly warming = new Set<Promise<unknown>>()

  constructor(storePath: string, mappedFileSize: number, options: MappedFileQueueOptions = {}) {
    if (!Number.isSafeInteger(mappedFileSize) || mappedFileSize <= 0) {
      throw new RangeError(`mappedFileSize must be a positive integer, got ${mappedFileSize}`)
    }
    this.storePath = storePath
    this.mappedFileSize = mappedFileSize
    this.options = options
  }

  /** Options of a file (under budgetOldFilesOnly, new and loaded files start outside the budget). */
  private fileOptions(): MappedFileOptions {
    const oldOnly = this.options.budgetOldFilesOnly === true
    return {
      transientStorePool: this.options.transientStorePool ?? null,
      readOnly: this.options.readOnly === true,
      reserveChunkBytes: this.options.reserveChunkBytes,
      reserveFirstBytes: this.options.reserveFirstBytes,
      warmChunk: this.options.warmChunk,
      budget: oldOnly ? null : (this.options.budget ?? null),
      unmapOnlyFlushed: oldOnly,
      syncOnFirstFlush: this.options.syncOnFirstFlush === true,
      exposeReserved: this.options.exposeReserved === true,
      readAround: this.options.readAround !== false,
    }
  }

  /**
   * Keeps the last file out of the budget and lets the one before it in if it is flushed
   * (budgetOldFilesOnly), after files were added or removed; `all`: every older file (the end of
   * recovery).
   */
  private budgetOldFiles(all = false): void {
    if (this.options.budgetOldFilesOnly !== true) return
    const files = this.mappedFiles
    for (let i = files.length - 2; i >= (all ? 0 : Math.max(0, files.length - 2)); i--) this.joinBudgetIfFlushed(files[i])
    files.at(-1)?.setBudget(null)
  }

  /** An old file (not the last) whose every byte is flushed joins the budget (budgetOldFilesOnly). */
  private joinBudgetIfFlushed(file: MappedFile): void {
    if (this.options.budgetOldFilesOnly !== true || file.flushedPosition !== this.mappedFileSize) return
    if (file !== this.mappedFiles.at(-1)) file.setBudget(this.options.budget ?? null)
  }

  /**
   * Maps every segment in the directory with all positions at the file size (recovery fixes the
   * tail). Refuses files of the wrong size, names that are not start offsets, and gaps.
   * Leftover `.tmp` files (a creation cut short) are removed.
   */
  load(): void {
    let names: string[]
    try {
      names = fs.readdirSync(this.storePath)
    } catch (cause) {
      if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return
      throw ioError(`cannot list ${this.storePath}`, cause)
    }
    const segments: { name: string; start: number }[] = []
    for (const name of names) {
      if (isTempSegmentName(name)) {
        if (this.options.readOnly !== true) fs.rmSync(join(this.storePath, name), { force: true })
        continue
      }
      const start = parseOffsetName(name)
      if (start === null) {
        throw new MQStoreError('BAD_FILE_NAME', `${join(this.storePath, name)} is not a 20-digit segment name`)
      }
      segments.push({ name, start })
    }
    segments.sort((a, b) => a.start - b.start)
    if (this.options.syncOnFirstFlush === true && this.options.readOnly !== true && segments.length > 0) {
      const last = join(this.storePath, segments[segments.length - 1].name)
      if (fileLength(last) < this.mappedFileSize) {
        fs.rmSync(last, { force: true })
        segments.pop()
      }
    }
    const issue = segmentLayoutIssues(
      segments.map((segment) => segment.start),
      this.mappedFileSize,
    )[0]
    if (issue !== undefined) {
      const { name, start } = segments[issue.index]
      if (issue.kind === 'misaligned') {
        throw new MQStoreError(
          'NON_CONTIGUOUS',
          `${join(this.storePath, name)} starts at ${start}, not a multiple of the file size ${this.mappedFileSize}`,
        )
      }
      throw new MQStoreError(
        'NON_CONTIGUOUS',
        `${this.storePath}: ${segments[issue.index - 1].name} is followed by ${name}; expected ${formatOffsetName(issue.expected)}`,
      )
    }
    const loaded: MappedFile[] = []
    try {
      for (const { name } of segments) {
        const file = MappedFile.open(join(this.storePath, name), this.mappedFileSize, {
          // Under budgetOldFilesOnly every file starts outside the budget (see truncateDirtyFiles).
          ...this.fileOptions(),
          mapOnFirstUse: this.options.mapOnFirstUse === true || this.options.budgetOldFilesOnly === true,
        })
        file.setPositions(this.mappedFileSize)
        loaded.push(file)
      }
    } catch (error) {
      for (const file of loaded) file.shutdown(0)
      throw error
    }
    this.mappedFiles.push(...loaded)
  }

  // ---- lookup -------------------------------------------------------------------------------

  getFirstMappedFile(): MappedFile | null {
    return this.mappedFiles.length > 0 ? this.mappedFiles[0] : null
  }

  getLastMappedFile(): MappedFile | null
  getLastMappedFile(startOffset: number, needCreate?: boolean): MappedFile | null
  getLastMappedFile(startOffset?: number, needCreate = true): MappedFile | null {
    const last = this.mappedFiles.length > 0 ? this.mappedFiles[this.mappedFiles.length - 1] : null
    if (startOffset === undefined) return last
    let createOffset = -1
    if (last === null) createOffset = startOffset - (startOffset % this.mappedFileSize)
    else if (last.isFull()) createOffset = last.fileFromOffset + this.mappedFileSize
    if (createOffset < 0 || !needCreate) return last
    return this.createFile(createOffset)
  }

  private createFile(createOffset: number): MappedFile | null {
    if (this.closed) return null
    let file: MappedFile
    try {
      file = this.takePreallocated(createOffset) ?? this.newFile(createOffset)
    } catch (error) {
      this.lastCreateError = error
      return null
    }
    if (this.mappedFiles.length === 0) file.firstCreateInQueue = true
    this.mappedFiles.push(file)
    this.budgetOldFiles()
    return file
  }

  private newFile(start: number): MappedFile {
    ensureDirectory(this.storePath)
    // As for a file made ahead (keepAhead): the last file's name is made durable before this one's
    // appears, which a creation renames into place before it syncs the folder.
    if (this.getLastMappedFile()?.nameDurable === false) syncDirectory(join(this.storePath, 'x'))
    return this.warmNew(MappedFile.create(join(this.storePath, formatOffsetName(start)), this.mappedFileSize, this.fileOptions()))
  }

  /** Starts faulting a new file in, as the options ask. */
  private warmNew(file: MappedFile): MappedFile {
    file.warmChunks = this.options.warmChunks === true
    if (this.options.warmMappedFiles === true) {
      const warming: Promise<unknown> = file.warm(this.options.lockWarmedFiles === true).catch(() => false)
      this.warming.add(warming)
      void warming.finally(() => this.warming.delete(warming))
    }
    return file
  }

  private takePreallocated(start: number): MappedFile | null {
    const next = this.preallocated
    if (next === null) return null
    this.preallocated = null
    if (next.fileFromOffset === start) return next
    next.destroy(0)
    return null
  }

  /**
   * Asks for the file after the last one to be made ahead of need (the commit log asks once its
   * writer is past the middle of the last file); with one still being made for an earlier place,
   * this one is made when that ends.
   */
  prepareNext(): void {
    const last = this.getLastMappedFile()
    if (this.options.preallocateNext !== true || last === null) return
    this.wantedNext = last.fileFromOffset + this.mappedFileSize
    this.makeAhead(this.wantedNext)
  }

  /**
   * Makes the file at `start` on the libuv pool, so the writer finds it ready: created, sized and
   * given its first blocks as `<name>.ahead.tmp` (a name of its own: an append that cannot wait
   * makes the file itself, through `<name>.tmp`), synced, then linked under its name, which never
   * replaces a file. Its first flush syncs it and its folder (MappedFile's needsCreateSync), as a
   * new queue's first file's does; a crash before that leaves at most an empty tail, as before.
   */
  private makeAhead(start: number): void {
    if (this.making !== null || this.preallocated !== null || this.closed) return
    const generation = this.aheadGeneration
    const name = join(this.storePath, formatOffsetName(start))
    const temp = `${name}${AHEAD_SUFFIX}`
    const options = this.fileOptions()
    const first = reserveFirst(options, reserveChunk(options, this.mappedFileSize))
    const expose = this.options.exposeReserved === true ? first : this.mappedFileSize
    this.making = createMappedSegmentAsync(temp, this.mappedFileSize, first, 0, expose, options.readAround !== false)
      .then((handle) => this.keepAhead(start, name, temp, handle, generation))
      .catch((error: unknown) => {
        removeQuietly(temp)
        // The append that needs this file will try again and report the failure.
        if (generation === this.aheadGeneration && !this.closed) this.lastCreateError = error
      })
      .finally(() => {
        this.making = null
        // Appends that could not wait went past `start` meanwhile, and asked for a later file.
        if (generation === this.aheadGeneration && this.wantedNext > start) this.makeAhead(this.wantedNext)
      })
  }

  /** Puts the file made at `temp` under `name` and keeps it for the append that needs it, unless no longer wanted. */
  private async keepAhead(start: number, name: string, temp: string, handle: MapHandle, generation: number): Promise<void> {
    const wanted = (): boolean => {
      const last = this.getLastMappedFile()
      return (
        !this.closed &&
        generation === this.aheadGeneration &&
        this.preallocated === null &&
        last?.fileFromOffset === start - this.mappedFileSize
      )
    }
    let kept = false
    try {
      await syncFileAsync(temp)
      // The last file's name first, if its first flush has not made it durable yet: a power cut
      // that kept this name and lost that one would leave a gap (NON_CONTIGUOUS at the next load).
      if (this.getLastMappedFile()?.nameDurable === false) await syncDirectoryAsync(temp)
      if (wanted()) {
        fs.linkSync(temp, name)
        kept = true
      }
    } finally {
      if (!kept) handle.close()
      removeQuietly(temp)
    }
    if (!kept) return
    try {
      this.preallocated = this.warmNew(MappedFile.create(name, this.mappedFileSize, this.fileOptions(), handle))
    } catch (error) {
      handle.close()
      removeQuietly(name)
      throw error
    }
  }

  /**
   * Makes the file at `start` ahead of the append that will need it (see takePreallocated), with
   * its slow system calls and the fault of its first pages off the JS thread; for files created
   * without syncs (syncOnFirstFlush). Rejects as a create would fail; the append then tries again.
   */
  async prepareFile(start: number): Promise<void> {
    if (this.closed || this.preallocated !== null) return
    const options = this.fileOptions()
    const name = join(this.storePath, formatOffsetName(start))
    const first = reserveFirst(options, reserveChunk(options, this.mappedFileSize))
    const expose = this.options.exposeReserved === true ? first : this.mappedFileSize
    const handle = await createMappedSegmentAsync(name, this.mappedFileSize, first, first, expose, options.readAround !== false)
    const file = MappedFile.create(name, this.mappedFileSize, options, handle)
    file.warmChunks = this.options.warmChunks === true
    // Closed meanwhile: the file stays as an empty tail, which a load accepts (see shutdown).
    if (this.closed || this.preallocated !== null || this.mappedFiles.length > 0) file.shutdown(0)
    else this.preallocated = file
  }

  /**
   * A close (or a truncation) is under way: the file being made, if any, is not kept, and the
   * pool's creation deletes it when it ends (see makeAhead).
   */
  private cancelPreallocation(): void {
    this.aheadGeneration++
    this.wantedNext = -1
  }

  /**
   * For a clean close: the file made ahead of need goes, unlinked on the libuv pool while close
   * syncs. Left on disk it would be deleted by the next open (it lies past the end the shutdown
   * record names), on the open's time; a crash before the unlink leaves exactly that case.
   */
  async dropPrepared(): Promise<void> {
    this.cancelPreallocation()
    // A file still being made deletes itself when it is (no longer wanted).
    await this.making
    const file = this.preallocated
    if (file === null) return
    this.preallocated = null
    await file.settle()
    file.shutdown(0)
    await fs.promises.unlink(file.fileName).catch(() => undefined)
  }

  /** True while a file made ahead waits for its append. */
  get hasPrepared(): boolean {
    return this.preallocated !== null
  }

  /** Drops the file made ahead of need (it holds no data). */
  private discardPreallocated(): void {
    this.cancelPreallocation()
    if (this.preallocated !== null) {
      this.preallocated.destroy(0)
      this.preallocated = null
    }
  }

  /**
   * The file that holds `offset`, or (with returnFirstOnNotFound) the first file when the offset is
   * outside the queue; null otherwise.
   */
  findMappedFileByOffset(offset: number, returnFirstOnNotFound = false): MappedFile | null {
    const files = this.mappedFiles
    if (files.length === 0) return null
    const first = files[0]
    const last = files[files.length - 1]
    if (offset < first.fileFromOffset || offset >= last.fileFromOffset + this.mappedFileSize) {
      return returnFirstOnNotFound ? first : null
    }
    const index = Math.floor(offset / this.mappedFileSize) - Math.floor(first.fileFromOffset / this.mappedFileSize)
    const guess = files[index]
    if (guess !== undefined && offset >= guess.fileFromOffset && offset < guess.fileFromOffset + this.mappedFileSize) {
      return guess
    }
    for (const file of files) {
      if (offset >= file.fileFromOffset && offset < file.fileFromOffset + this.mappedFileSize) return file
    }
    return returnFirstOnNotFound ? first : null
  }

  /** First file whose modification time is at or after `timestamp`, else the last file. */
  getMappedFileByTime(timestamp: number): MappedFile | null {
    for (const file of this.mappedFiles) {
      if (file.getLastModifiedTimestamp() >= timestamp) return file
    }
    return this.getLastMappedFile()
  }

  getMinOffset(): number {
    const first = this.getFirstMappedFile()
    return first === null ? -1 : first.fileFromOffset
  }

  getMaxOffset(): number {
    const last = this.getLastMappedFile()
    return last === null ? 0 : last.fileFromOffset + last.readPosition
  }

  getMaxWrotePosition(): number {
    const last = this.getLastMappedFile()
    return last === null ? 0 : last.fileFromOffset + last.wrotePosition
  }

  remainHowManyDataToFlush(): number {
    return this.getMaxOffset() - this.flushedWhere
  }

  remainHowManyDataToCommit(): number {
    return this.getMaxWrotePosition() - this.committedWhere
  }

  // ---- commit and flush ---------------------------------------------------------------------

  /** Flushes the file holding flushedWhere; returns true when nothing moved. */
  flush(flushLeastPages: number): boolean {
    const file = this.findMappedFileByOffset(this.flushedWhere, this.flushedWhere === 0)
    if (file === null) return true
    const storeTimestamp = file.storeTimestamp
    const where = file.fileFromOffset + file.flush(flushLeastPages)
    this.joinBudgetIfFlushed(file)
    const unchanged = where === this.flushedWhere
    this.flushedWhere = where
    if (flushLeastPages === 0) this.storeTimestamp = storeTimestamp
    return unchanged
  }

  /** flush() with msync on the libuv pool. Callers must not run two at once. */
  async flushAsync(flushLeastPages: number): Promise<boolean> {
    const file = this.findMappedFileByOffset(this.flushedWhere, this.flushedWhere === 0)
    if (file === null) return true
    const storeTimestamp = file.storeTimestamp
    const where = file.fileFromOffset + (await file.flushAsync(flushLeastPages))
    this.joinBudgetIfFlushed(file)
    const unchanged = where === this.flushedWhere
    if (where > this.flushedWhere) this.flushedWhere = where
    if (flushLeastPages === 0) this.storeTimestamp = storeTimestamp
    return unchanged
  }

  /** Commits the write buffer of the file holding committedWhere; returns true when nothing moved. */
  commit(commitLeastPages: number): boolean {
    const file = this.findMappedFileByOffset(this.committedWhere, this.committedWhere === 0)
    if (file === null) return true
    const where = file.fileFromOffset + file.commit(commitLeastPages)
    const unchanged = where === this.committedWhere
    this.committedWhere = where
    return unchanged
  }

  // ---- truncation and deletion --------------------------------------------------------------

  /**
   * Cuts the queue back to end at `offset`: the file holding it keeps its first `offset mod size`
   * bytes as data, later files are destroyed. With `eraseQuietBytes` >= 0 the bytes after the cut
   * are zeroed and synced (see MappedFile.eraseStaleTail).
   */
  truncateDirtyFiles(offset: number, eraseQuietBytes = -1): void {
    this.discardPreallocated()
    const doomed: MappedFile[] = []
    for (const file of this.mappedFiles) {
      const fileTail = file.fileFromOffset + this.mappedFileSize
      if (fileTail <= offset) continue
      if (offset >= file.fileFromOffset) {
        file.setPositions(offset % this.mappedFileSize)
        if (eraseQuietBytes >= 0 && this.options.readOnly !== true) file.eraseStaleTail(offset % this.mappedFileSize, eraseQuietBytes)
      } else {
        doomed.push(file)
      }
    }
    // Newest first (each unlink is synced before the next: MappedFile.destroy): a power cut among
    // them leaves a contiguous run of files, where oldest first could leave a newer file past a
    // deleted older one, a gap the next open refuses (NON_CONTIGUOUS).
    for (let i = doomed.length - 1; i >= 0; i--) destroyNow(doomed[i])
    this.removeFiles(doomed)
    this.budgetOldFiles(true)
  }

  deleteLastMappedFile(): void {
    const last = this.getLastMappedFile()
    if (last === null) return
    this.discardPreallocated()
    destroyNow(last)
    this.removeFiles([last])
  }

  /**
   * Commit-log expiry: deletes files, oldest first and never the last one, whose modification time
   * is older than `expiredTime` ms (or all of them with cleanImmediately), stopping at the first
   * file that is too young or still held. At most DELETE_FILES_BATCH_MAX per call (fewer with
   * `options.maxFiles`: the cleanup policy passes the count it planned, so this check can only
   * delete less than the plan, never more).
   */
  async deleteExpiredFileByTime(
    expiredTime: number,
    deleteFilesInterval: number,
    intervalForcibly: number,
    cleanImmediately: boolean,
    options: DeleteOptions = {},
  ): Promise<number> {
    const clock = options.clock ?? Date.now
    const maxFiles = Math.min(options.maxFiles ?? DELETE_FILES_BATCH_MAX, DELETE_FILES_BATCH_MAX)
    const candidates = this.mappedFiles.slice(0, -1)
    const removed: MappedFile[] = []
    for (let i = 0; i < candidates.length && removed.length < maxFiles; i++) {
      const file = candidates[i]
      const liveUntil = file.getLastModifiedTimestamp() + expiredTime
      const now = clock()
      if (!(now >= liveUntil || cleanImmediately)) break
      const holders = file.getRefCount() - (file.isAvailable() ? 1 : 0)
      if (!file.destroy(intervalForcibly, now)) break
      removed.push(file)
      options.onDeleted?.(file, holders)
      if (removed.length >= maxFiles) break
      if (deleteFilesInterval > 0 && i + 1 < candidates.length) await sleep(deleteFilesInterval)
      // The queue may have been shut down while this pass slept.
      if (this.closed || options.shouldStop?.() === true) break
    }
    this.removeFiles(removed)
    return removed.length
  }

  /**
   * Consume-queue expiry: deletes files, oldest first and never the last one, whose last unit
   * points below `minPhysicalOffset` in the commit log.
   */
  deleteExpiredFileByOffset(minPhysicalOffset: number, unitSize: number, options: DeleteOptions = {}): number {
    const now = (options.clock ?? Date.now)()
    const candidates = this.mappedFiles.slice(0, -1)
    const removed: MappedFile[] = []
    for (const file of candidates) {
      let destroy: boolean
      const last = file.selectMappedBuffer(this.mappedFileSize - unitSize)
      if (last !== null) {
        const physicalOffset = readInt64BE(last.buffer, 0)
        last.release()
        destroy = physicalOffset < minPhysicalOffset
      } else if (!file.isAvailable()) {
        destroy = true // a half-destroyed file left by an earlier pass
      } else {
        break
      }
      if (!destroy || !file.destroy(60_000, now)) break
      removed.push(file)
      options.onDeleted?.(file, 0)
    }
    this.removeFiles(removed)
    return removed.length
  }

  /** Finishes a destroy of the first file that an earlier pass could not complete. */
  retryDeleteFirstFile(intervalForcibly: number, options: DeleteOptions = {}): boolean {
    const first = this.getFirstMappedFile()
    if (first === null || first.isAvailable()) return false
    const holders = first.getRefCount()
    if (!first.destroy(intervalForcibly, (options.clock ?? Date.now)())) return false
    this.removeFiles([first])
    options.onDeleted?.(first, holders)
    return true
  }

  private removeFiles(files: MappedFile[]): void {
    if (files.length === 0) return
    const gone = new Set(files)
    const kept = this.mappedFiles.filter((file) => !gone.has(file))
    this.mappedFiles.length = 0
    this.mappedFiles.push(...kept)
    // Deleted head files need no flush or commit: a position left inside one would match no file,
    // and every later flush would find nothing to do (nothing would ever be made durable again).
    const head = kept[0]?.fileFromOffset ?? 0
    if (this.flushedWhere < head) this.flushedWhere = head
    if (this.committedWhere < head) this.committedWhere = head
    this.budgetOldFiles()
    if (this.options.readOnly !== true && fs.existsSync(this.storePath)) syncDirectory(join(this.storePath, 'x'))
  }

  // ---- lifecycle ----------------------------------------------------------------------------

  /** Waits for background work on the files (warm-ups), so that a shutdown can unmap at once. */
  async settle(): Promise<void> {
    while (this.making !== null) await this.making
    while (this.warming.size > 0) await Promise.all([...this.warming])
    for (const file of this.mappedFiles) await file.settle()
    if (this.preallocated !== null) await this.preallocated.settle()
  }

  /** Drops the owner's reference of every file (they unmap once readers let go). */
  shutdown(intervalForcibly: number): void {
    this.closed = true
    // A preallocated file stays on disk (zeros, full size); the next load treats it as the
    // empty tail of the queue, exactly like RocketMQ's allocator leaves its next file.
    this.preallocated?.shutdown(0)
    this.preallocated = null
    for (const file of this.mappedFiles) file.shutdown(intervalForcibly)
  }

  /** Destroys every file and the directory. */
  destroy(): void {
    this.discardPreallocated()
    for (const file of this.mappedFiles) file.destroy(3000)
    this.mappedFiles.length = 0
    this.flushedWhere = 0
    this.committedWhere = 0
    fs.rmSync(this.storePath, { recursive: true, force: true })
  }
}

/** The length of a file, -1 when it cannot be read. */
function fileLength(path: string): number {
  try {
    return fs.statSync(path).size
  } catch {
    return -1
  }
}

/**
 * Destroys a file that must go now (data past a truncation point): a reader still holding it is
 * cut off, and its views read as empty rather than keeping stale bytes on disk.
 */
function destroyNow(file: MappedFile): void {
  if (!file.destroy(0)) file.destroy(0)
}
