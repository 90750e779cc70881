// The key index: an ordered list of index files (oldest first) in one directory. Only the newest
// file is written; it is replaced by a new one (a "roll") when full. Queries walk the files from
// newest to oldest.
//
// Durability: the entries of the file being written are not flushed as they are added. When a
// file fills up, it is flushed in the background and then `onRoll` reports its end time, which
// the store records in the checkpoint as indexMsgTimestamp. After an abnormal exit, `load` drops
// every file that ends after that time and the store's recovery dispatches those messages again.
// The file being written is also written back in the background (periodically, and every so many
// entries within a burst of puts), only so that close has little left to sync: it moves no
// checkpoint time.
//
// Mapping: with the store's budget, files are opened without being mapped (their headers are read
// at load) and mapped by the first query that walks them or the first put into them; the budget
// unmaps them once idle. So a store with many index files maps none of them at open.
import * as fs from 'node:fs'
import { join } from 'node:path'

import { ioError, MQStoreError } from '../../errors.js'
import { indexCoverageBreak, IndexFile, indexFileSize, isIndexFileName, type KeyPlace, topicKeyHash } from './index-file.js'
import { AHEAD_ENTRIES, IndexFileAhead, isCutCreation, WAIT_FOR_FILE_ENTRIES } from './index-file-ahead.js'
import { indexKeyHashesInto, indexKeyHashesOf } from './index-keys.js'
import { IndexDeletions } from './index-deletions.js'
import { encodeMark, IndexMarkFile, readMark, type IndexDurableMark } from './index-durable.js'
import { ensureDirectory, syncDirectory } from '../mapped/directory.js'
import { OS_PAGE_SIZE } from '../mapped/mapped-file.js'
import type { MappingBudget } from '../mapped/mapping-budget.js'

/** Upper bound on the offsets one index query returns (RocketMQ's maxMsgsNumBatch). */
export const MAX_MSGS_NUM_BATCH = 64

/** Attempts at creating a new index file before giving up. */
const CREATE_ATTEMPTS = 3
/**
 * Entries between two syncs of the entries of the file being written, started from the put itself:
 * a burst of puts that never yields to the event loop starves the timed flush, and close then
 * synced every entry of the burst at once.
 */
export const WRITEBACK_KICK_ENTRIES = 65_536
/**
 * Entries before a store's first such sync. Early, so that the put path has run the kick before
 * a long burst: code compiled without ever having run a branch is sent back to the compiler the
 * first time it takes it, and buildIndex is among the put's hottest functions.
 */
export const FIRST_KICK_ENTRIES = 4096
/** Keys a bulk pass holds back before putting them (IndexService.beginBulk). */
const BULK_KEYS = 4096

/**
 * The keys of a bulk pass not put yet: hash, record offset and store time each. The arrays are
 * made at the first key: most opens (a clean one) put none, and should not pay for them.
 */
class IndexBulk {
  hashes = new Int32Array(0)
  phyOffsets = new Float64Array(0)
  timestamps = new Float64Array(0)
  count = 0

  add(hash: number, phyOffset: number, storeTimestamp: number): void {
    const k = this.count
    if (k === this.hashes.length) {
      this.hashes = new Int32Array(BULK_KEYS)
      this.phyOffsets = new Float64Array(BULK_KEYS)
      this.timestamps = new Float64Array(BULK_KEYS)
    }
    this.hashes[k] = hash
    this.phyOffsets[k] = phyOffset
    this.timestamps[k] = storeTimestamp
    this.count = k + 1
  }
}

/** Forced interval when an expired file is destroyed while something still holds it. */
const EXPIRED_DESTROY_INTERVAL = 3000

/** How an expiry call reads the time and reports what it deleted. */
export interface IndexDeleteOptions {
  clock?: () => number
  onDeleted?: (file: IndexFile) => void
}

export interface IndexServiceOptions {
  /** Slots per file (maxHashSlotNum, 5,000,000 by default in RocketMQ). */
  maxHashSlotNum: number
  /** Entries per file (maxIndexNum, 20,000,000 by default); a file holds one fewer. */
  maxIndexNum: number
  /** When false, buildIndex does nothing (queries still read existing files). */
  messageIndexEnable: boolean
  /** Map files read-only: no writes, no deletions, no repair at load. */
  readOnly?: boolean
  /** Map files on first use within this budget, which unmaps idle ones; without it every file is mapped from load to shutdown. */
  budget?: MappingBudget | null
  /** The mark file of the entries known to be on disk (index-durable.ts); without it, none is kept. */
  markPath?: string
}

/** What the dispatcher hands over for one stored record. */
export interface IndexDispatch {
  topic: string
  commitLogOffset: number
  storeTimestamp: number
  /** The KEYS property: keys separated by single spaces. */
  keys: string | undefined
  /** The UNIQ_KEY property (the client-side message id). */
  uniqKey: string | undefined
  sysFlag: number
}

export interface QueryOffsetResult {
  /** Newest first, at most min(maxNum, MAX_MSGS_NUM_BATCH). */
  phyOffsets: number[]
  /** endTimestamp of the newest file (0 without files). */
  indexLastUpdateTimestamp: number
  /** endPhyOffset of the newest file (0 without files). */
  indexLastUpdatePhyoffset: number
}

export class IndexService {
  readonly indexDir: string
  readonly hashSlotNum: number
  readonly indexNum: number
  readonly messageIndexEnable: boolean
  readonly readOnly: boolean
  private readonly budget: MappingBudget | null

  /**
   * Called once a full file has been flushed after a roll, with that file's endTimestamp. The
   * store sets the checkpoint's indexMsgTimestamp from it and flushes the checkpoint.
   */
  onRoll?: (endTimestamp: number) => void

  /** The last error of a background flush after a roll (onRoll is not called for that file). */
  lastFlushError: unknown = null

  private readonly files: IndexFile[] = []
  /** Commit-log offset of the newest record with an entry in any file, -1 when none. */
  private lastIndexedOffset = -1
  /** The next file, made ahead off the JS thread, and the names of new files. */
  private readonly ahead: IndexFileAhead
  private readonly rollFlushes = new Set<Promise<void>>()
  private rollChain: Promise<void> = Promise.resolve()
  private closed = false
  /** The flush of flushCurrentAsync in flight, or null. */
  private periodicFlush: Promise<void> | null = null
  /** Entries put since the last sync kicked by puts (the first comes after FIRST_KICK_ENTRIES). */
  private putsSinceKick = WRITEBACK_KICK_ENTRIES - FIRST_KICK_ENTRIES
  /** The file kickWriteback last looked at, and where its next sync starts. */
  private writeBackFile: IndexFile | null = null
  private writeBackFrom = 0
  /** The key hashes of the record being indexed (one array, reused; most records have a few keys). */
  private readonly keyHashes = new Int32Array(16)
  private readonly mark: IndexMarkFile | null
  private readonly deletions = new IndexDeletions()
  /** Keys held back during a bulk pass (beginBulk), or null. */
  private bulk: IndexBulk | null = null

  constructor(indexDir: string, options: IndexServiceOptions) {
    indexFileSize(options.maxHashSlotNum, options.maxIndexNum) // validates both
    this.indexDir = indexDir
    this.hashSlotNum = options.maxHashSlotNum
    this.indexNum = options.maxIndexNum
    this.messageIndexEnable = options.messageIndexEnable
    this.readOnly = options.readOnly === true
    this.budget = options.budget ?? null
    this.mark = options.markPath === undefined || this.readOnly ? null : new IndexMarkFile(options.markPath)
    this.ahead = new IndexFileAhead(indexDir, indexFileSize(this.hashSlotNum, this.indexNum))
  }

  // ---- load ---------------------------------------------------------------------------------

  /**
   * Opens every index file, oldest first (reading each header; mapped now only without a budget). After an abnormal exit (`lastExitOK` false) files whose
   * endTimestamp is after the checkpoint's `indexMsgTimestamp` are deleted: they may hold
   * entries that never reached the disk, and recovery indexes those messages again. Not after a
   * process crash of this boot (`afterProcessCrash`): the files hold every entry written. Leftover
   * `.tmp` files of an interrupted creation are removed. A file of the wrong size throws
   * BAD_FILE_SIZE and a foreign name BAD_FILE_NAME; nothing stays mapped then.
   */
  load(lastExitOK: boolean, indexMsgTimestamp: number, afterProcessCrash = false): void {
    this.assertOpen()
    let names: string[]
    try {
      names = fs.readdirSync(this.indexDir)
    } catch (cause) {
      if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return
      throw ioError(`cannot list ${this.indexDir}`, cause)
    }
    names.sort()
    const loaded: IndexFile[] = []
    const doomed: IndexFile[] = []
    const mark = this.mark === null || lastExitOK || afterProcessCrash ? null : readMark(this.mark.path)
    let cut = false
    const lastName = names.findLast(isIndexFileName)
    try {
      for (const name of names) {
        const path = join(this.indexDir, name)
        if (name.endsWith('.tmp') || (name === lastName && !this.readOnly && isCutCreation(path, this.ahead.fileSize))) {
          if (!this.readOnly) fs.rmSync(path, { force: true })
          continue
        }
        if (!isIndexFileName(name)) {
          throw new MQStoreError('BAD_FILE_NAME', `${path} is not an index file name (yyyyMMddHHmmssSSS)`)
        }
        const file = IndexFile.open(path, this.hashSlotNum, this.indexNum, { readOnly: this.readOnly, budget: this.budget })
        // After a crash, the first file newer than the checkpoint and every file after it go:
        // keeping a later file past a deleted one would leave a hole in the index.
        // A crash of this boot left every write in the page cache: the files stay (see below).
        const newer = !lastExitOK && !afterProcessCrash && !this.readOnly && file.getEndTimestamp() > indexMsgTimestamp
        if (doomed.length > 0 || cut) doomed.push(file)
        else if (newer && mark !== null && keepsPrefix(file, mark)) {
          // Except the entries of the first such file that the mark names as on disk (index-durable.ts).
          loaded.push(file)
          cut = true
        } else if (newer) doomed.push(file)
        else loaded.push(file)
      }
    } catch (error) {
      for (const file of [...loaded, ...doomed]) file.shutdown()
      throw error
    }
    for (const file of doomed) this.deletions.delete(file)
    if (doomed.length > 0) syncDirectory(doomed[0].fileName)
    // Files must cover the commit log in order without overlapping; anything else (left by a
    // rebuild cut short) cannot be searched or extended correctly, and the store rebuilds it.
    const broken = indexCoverageBreak(
      loaded.map((file) => ({
        beginPhyOffset: file.getBeginPhyOffset(),
        endPhyOffset: file.getEndPhyOffset(),
        indexCount: file.getIndexCount(),
      })),
    )
    if (broken !== null) {
      const file = loaded[broken.index]
      for (const each of loaded) each.shutdown()
      throw new MQStoreError(
        'CORRUPTION',
        `${file.fileName} covers commit-log offsets from ${file.getBeginPhyOffset()}, before the end (${broken.previousEnd}) of the file before it`,
      )
    }
    // The file being written when the process died may hold a put cut short: undo it, so the
    // replay indexes its record again (IndexFile.cutInterruptedRecord). First, so that a file the
    // cut empties (a roll just before the crash) goes with the trailing empty files below.
    if (!lastExitOK && afterProcessCrash && !this.readOnly) loaded.at(-1)?.cutInterruptedRecord()
    // Trailing files without entries go (the next key rolls a new one): the open-time check of
    // the index against the commit log reads the last file's header, and an empty last file
    // (a roll, or a header a power cut left zeroed) would hide a full file before it that
    // indexes records a truncation removed. Replays would then skip new records below its end.
    while (!this.readOnly && loaded.length > 1 && loaded[loaded.length - 1].getIndexCount() <= 1) {
      const empty = loaded.pop()!
      empty.destroy(0)
      syncDirectory(empty.fileName)
    }
    for (const file of loaded) if (file.getIndexCount() > 1) this.lastIndexedOffset = file.getEndPhyOffset()
    this.files.push(...loaded)
    const last = this.lastFile()
    if (last !== null) this.ahead.noteName(last.fileName)
    // The file being written when the last run stopped may have pages no flush forced; every
    // older one was flushed when it rolled. Close flushes only files with changes: this one has.
    if (last !== null && !lastExitOK && !this.readOnly) last.markUnflushed()
  }

  /** Settles once the files load() dropped are deleted. */
  deletionsDone(): Promise<void> {
    return this.deletions.done()
  }

  // ---- write path ---------------------------------------------------------------------------

  /**
   * Indexes one dispatched record: its UNIQ_KEY, then every non-empty KEYS token, each as
   * `topic#key`. Rolled-back transaction records are skipped, and so is a record at or below the
   * end offset of the current file (already indexed: replays after recovery are harmless).
   */
  buildIndex(req: IndexDispatch): void {
    if (!this.messageIndexEnable) return
    this.assertOpen()
    if (this.readOnly) throw new TypeError(`index ${this.indexDir} is read-only`)
    const phyOffset = req.commitLogOffset
    let file = this.lastFile()
    // Replays are no-ops: everything up to the newest indexed record is skipped, that record
    // included (RocketMQ only skips offsets below the end offset, indexing that record twice).
    // Checked before any roll, so a replay at open never creates a file.
    if (file !== null && (phyOffset < file.getEndPhyOffset() || phyOffset <= this.lastIndexedOffset)) return
    const storeTimestamp = req.storeTimestamp
    let hashes: ArrayLike<number> = this.keyHashes
    const count = indexKeyHashesInto(req, this.keyHashes)
    if (count > hashes.length) hashes = indexKeyHashesOf(req)
    const bulk = this.bulk
    if (bulk !== null && file !== null && count > 0 && count <= hashes.length && count < this.indexNum) {
      // Held back and put with the keys around it (see beginBulk); the file gets them all, so a
      // record that would not fit makes the held keys go in first and the file roll.
      if (bulk.count + count > BULK_KEYS || file.getIndexCount() + bulk.count + count > this.indexNum) {
        this.putBulk(file)
        if (file.getIndexCount() + count > this.indexNum) file = this.roll()
      }
      for (let k = 0; k < count; k++) bulk.add(hashes[k], phyOffset, storeTimestamp)
      this.lastIndexedOffset = phyOffset
      return
    }
    if (bulk !== null) this.putBulk(file)
    if (count === 0) {
      // Nothing to index, but the index has seen the record: the newest file's end records it
      // (a full one too: no roll for a record without keys), so a reopen need not replay it.
      // Without any file, one is created, as RocketMQ creates one at its first record.
      if (file === null) file = this.roll()
      file.noteDispatched(phyOffset)
      return
    }
    if (file === null || file.isWriteFull()) file = this.roll()
    // All keys of a record go into one file. Skipping "that record included" on a replay is only
    // right if the record is whole in the file whose end it is: keys split across a roll would
    // lose the ones in the newer file when a crash drops it.
    if (count <= this.indexNum - 1 && file.getIndexCount() + count > this.indexNum) file = this.roll()
    for (let k = 0; k < count; k++) {
      file = this.putKeyHash(file, hashes[k], req)
      this.lastIndexedOffset = phyOffset
    }
    this.putsSinceKick += count
    if (this.putsSinceKick >= WRITEBACK_KICK_ENTRIES) this.kickWriteback(file)
  }

  /** Starts making the file the next key needs when there is none to write into (a new store, a full last file). */
  makeFileAhead(): void {
    if (this.readOnly || !this.messageIndexEnable || this.closed) return
    const last = this.lastFile()
    if (last === null || last.isWriteFull()) this.ahead.start(last?.fileName ?? null)
  }

  /**
   * While the file the next record may need is being made ahead (none to write into, or the last
   * one nearly full), the making, which dispatch waits for rather than make another; else null.
   */
  fileBeingMade(): Promise<void> | null {
    const making = this.ahead.making
    if (making === null) return null
    const last = this.lastFile()
    return last === null || last.getIndexCount() + WAIT_FOR_FILE_ENTRIES >= this.indexNum ? making : null
  }

  /**
   * From now until endBulk, buildIndex holds the keys of records back and puts them a few thousand
   * at a time (IndexFile.putKeyHashes: their slots prefetched together, the per-key work done in one
   * loop), for open's crash scan, which indexes millions of records in one synchronous pass. Nothing
   * reads the index in between; every other method puts the held keys first anyway. Only where a
   * failure ends the pass (the scan's fails the open): a put that fails takes the held keys of
   * earlier records with it, which the dispatcher's retry of one record would not put again.
   */
  beginBulk(): void {
    this.bulk ??= new IndexBulk()
  }

  /** Puts the keys held back and ends the bulk pass. */
  endBulk(): void {
    if (this.bulk === null) return
    try {
      this.putBulk(this.lastFile())
    } finally {
      this.bulk = null
    }
  }

  /** Ends the bulk pass without putting what it holds (open failed; the index is dropped with it). */
  dropBulk(): void {
    this.bulk = null
  }

  /** Puts the held keys into `file`, the newest one, which buildIndex made room in. */
  private putBulk(file: IndexFile | null): void {
    const bulk = this.bulk
    if (bulk === null || bulk.count === 0) return
    const count = bulk.count
    bulk.count = 0
    if (file === null || file.putKeyHashes(bulk.hashes, bulk.phyOffsets, bulk.timestamps, 0, count) !== count) {
      throw new Error(`index: ${count} held keys do not fit ${file?.fileName ?? 'a missing file'}`)
    }
    this.putsSinceKick += count
    if (this.putsSinceKick >= WRITEBACK_KICK_ENTRIES) this.kickWriteback(file)
  }

  /** Puts held keys (if a bulk pass holds any) before anything reads or flushes the index. */
  private settleBulk(): void {
    if (this.bulk !== null && this.bulk.count > 0) this.putBulk(this.lastFile())
  }

  /** Puts one key of the record `at` names, rolling to a new file as long as the current one is full. */
  private putKeyHash(file: IndexFile, keyHash: number, at: KeyPlace): IndexFile {
    while (!file.putKeyHash(keyHash, at)) file = this.roll()
    return file
  }

  /**
   * Creates the next file, its header starting where the previous file ended, then flushes the
   * previous (full) file in the background and reports its end time through onRoll.
   */
  private roll(): IndexFile {
    const prev = this.lastFile()
    const prevEndPhyOffset = prev === null ? 0 : prev.getEndPhyOffset()
    const prevEndTimestamp = prev === null ? 0 : prev.getEndTimestamp()
    // Held from now until its flush ends: neither expiry nor the mapping budget (which the new
    // file's mapping may push over) unmaps it while it waits its turn.
    const held = prev?.getMappedFile().hold() === true
    let lastError: unknown = null
    let file: IndexFile | null = null
    const lastPath = prev?.fileName ?? null
    // The file made ahead if it is ready (index-file-ahead.ts), else one made now (and the one
    // under way, which would sort before it, is not kept).
    let made = this.ahead.take(lastPath)
    if (made === null) this.ahead.supersede()
    for (let attempt = 0; attempt < CREATE_ATTEMPTS && file === null; attempt++) {
      try {
        if (made === null) ensureDirectory(this.indexDir)
        const path = made?.path ?? this.ahead.nextFileName(lastPath)
        const handle = made?.handle
        made = null
        file = IndexFile.create(path, this.hashSlotNum, this.indexNum, prevEndPhyOffset, prevEndTimestamp, this.budget, handle)
      } catch (error) {
        lastError = error
      }
    }
    if (file === null) {
      if (held) prev.getMappedFile().release()
      if (lastError instanceof MQStoreError) throw lastError
      throw ioError(`cannot create an index file in ${this.indexDir}`, lastError)
    }
    this.files.push(file)
    if (prev !== null) this.flushRolled(prev, held)
    return file
  }

  /**
   * Flushes a full file in the background. Flushes run one after another, so onRoll reports end
   * times in file order: the checkpoint never claims a file is complete while an older one is
   * still unflushed. After a failed flush no later roll is reported either.
   */
  private flushRolled(file: IndexFile, held: boolean): void {
    const endTimestamp = file.getEndTimestamp()
    const mapped = file.getMappedFile()
    const done = this.rollChain
      .then(() => file.flushAsync())
      .finally(() => {
        if (held) mapped.release()
        // Idle now: if mapping newer files went over the budget while this one was held, it may go.
        if (!this.closed) this.budget?.shrink(this.budget.maxBytes)
      })
      .then(() => {
        if (!this.closed && endTimestamp > 0 && this.lastFlushError === null) this.onRoll?.(endTimestamp)
      })
      .catch((error: unknown) => {
        this.lastFlushError = error
      })
      .finally(() => {
        this.rollFlushes.delete(done)
      })
    this.rollChain = done
    this.rollFlushes.add(done)
  }

  /** Settles once every background flush started by a roll so far has finished. */
  async waitForRollFlushes(): Promise<void> {
    while (this.rollFlushes.size > 0) await Promise.all([...this.rollFlushes])
  }

  // ---- queries ------------------------------------------------------------------------------

  /**
   * Physical offsets of messages indexed under `topic#key` with a store time in [begin, end],
   * newest first, at most min(maxNum, 64). Only key hashes are compared, so a key with the same
   * hash matches too; the caller reads the messages and may check.
   */
  queryOffset(topic: string, key: string, maxNum: number, begin: number, end: number): QueryOffsetResult {
    const out: number[] = []
    out.length = this.collectOffsets(topic, key, maxNum, begin, end, out)
    return { phyOffsets: out, indexLastUpdateTimestamp: this.lastUpdateTimestamp(), indexLastUpdatePhyoffset: this.lastUpdatePhyOffset() }
  }

  /**
   * queryOffset without a result object: writes the offsets to out[0], out[1], ... and returns how
   * many (out may hold more, left from an earlier call). The key's hash is computed without
   * building `topic#key`.
   */
  collectOffsets(topic: string, key: string, maxNum: number, begin: number, end: number, out: number[]): number {
    this.settleBulk()
    this.assertOpen()
    const limit = Math.min(maxNum, MAX_MSGS_NUM_BATCH)
    const files = this.files
    if (files.length === 0) return 0
    const keyHash = topicKeyHash(topic, key)
    let count = 0
    for (let i = files.length - 1; i >= 0; i--) {
      const file = files[i]
      if (file.isTimeMatched(begin, end)) count = file.collectByHash(keyHash, begin, end, out, count, limit)
      if (file.getBeginTimestamp() < begin) break
      if (count >= limit) break
    }
    return count
  }

  /** endTimestamp of the newest file (0 without files): RocketMQ's indexLastUpdateTimestamp. */
  lastUpdateTimestamp(): number {
    this.settleBulk()
    const files = this.files
    return files.length === 0 ? 0 : files[files.length - 1].getEndTimestamp()
  }

  /** endPhyOffset of the newest file (0 without files). */
  lastUpdatePhyOffset(): number {
    this.settleBulk()
    const files = this.files
    return files.length === 0 ? 0 : files[files.length - 1].getEndPhyOffset()
  }

  /**
   * Offers `accept` the phyOffsets of `topic#key`'s index entries, newest first across every file,
   * until it accepts one (other keys may share the hash; `accept` reads the message to tell).
   * Returns the accepted offset, or -1.
   */
  findNewest(topic: string, key: string, accept: (phyOffset: number) => boolean): number {
    this.settleBulk()
    this.assertOpen()
    const keyHash = topicKeyHash(topic, key)
    let found = -1
    for (let i = this.files.length - 1; i >= 0 && found < 0; i--) {
      this.files[i].walkByHash(keyHash, 0, Number.MAX_SAFE_INTEGER, (phyOffset) => {
        if (!accept(phyOffset)) return false
        found = phyOffset
        return true
      })
    }
    return found
  }

  // ---- expiry -------------------------------------------------------------------------------

  /**
   * Deletes, oldest first, the files that end below `minPhyOffset` (the commit log's new
   * minimum), stopping at the first that does not; the newest file is always kept.
   */
  deleteExpiredFile(minPhyOffset: number, options: IndexDeleteOptions = {}): number {
    this.settleBulk()
    this.assertOpen()
    if (this.readOnly) return 0
    const files = this.files
    if (files.length === 0 || files[0].getEndPhyOffset() >= minPhyOffset) return 0
    const now = (options.clock ?? Date.now)()
    let deleted = 0
    for (let i = 0; i < files.length - 1; i++) {
      const file = files[i]
      if (file.getEndPhyOffset() >= minPhyOffset) break
      // A background flush still holding the file postpones it to a later call.
      if (!file.destroy(EXPIRED_DESTROY_INTERVAL, now)) break
      options.onDeleted?.(file)
      deleted++
    }
    if (deleted > 0) files.splice(0, deleted)
    return deleted
  }

  // ---- flush and lifetime -------------------------------------------------------------------

  /** Flushes every file with unflushed changes on the calling thread (at close); the others stay unmapped. */
  flush(): void {
    this.settleBulk()
    if (this.closed || this.readOnly) return
    for (const file of this.files) file.flush()
  }

  /**
   * The same with msync on the libuv pool (close waits for it without blocking the thread), after
   * the periodic flush in flight, if any. Files are flushed one after another, oldest first.
   */
  async flushAsync(): Promise<void> {
    this.settleBulk()
    await this.periodicFlush
    for (const file of [...this.files]) {
      if (this.closed || this.readOnly) return
      await file.flushAsync()
    }
  }

  /**
   * Starts a sync of the entries `file` gained since the last call, whole pages behind the writer,
   * on the libuv pool without waiting for it (see WRITEBACK_KICK_ENTRIES). Only the entry table,
   * written in order: syncing the slot table too (random writes) made every one of its pages clean,
   * and the next put to each paid a write fault. A sync rather than a mere write-back: it also
   * empties the disk's cache as the burst goes, which close would otherwise wait for all at once.
   * Its completion is not needed to start the next one: within a burst that never yields, none
   * completes in JavaScript's eyes. A failure is kept like a roll's, and close's flush reports it.
   */
  private kickWriteback(file: IndexFile): void {
    this.putsSinceKick = 0
    // The next file is made while this one takes its last keys (a roll then only takes it).
    if (!this.readOnly && file.getIndexCount() + AHEAD_ENTRIES >= this.indexNum) this.ahead.start(file.fileName)
    if (this.closed || this.readOnly || !file.getMappedFile().isMapped) return
    if (file !== this.writeBackFile) {
      this.writeBackFile = file
      this.writeBackFrom = Math.floor(file.entriesStart / OS_PAGE_SIZE) * OS_PAGE_SIZE
    }
    const from = this.writeBackFrom
    const to = Math.floor(file.entriesEnd() / OS_PAGE_SIZE) * OS_PAGE_SIZE
    if (to <= from) return
    this.writeBackFrom = to
    const fd = this.mark?.descriptor() ?? null
    const mark = fd === null ? null : file.durableMark(to)
    file.syncEntriesAsync(from, to, mark === null ? null : { fd: fd!, bytes: encodeMark(mark) }).catch((error: unknown) => {
      this.lastFlushError ??= error
      this.mark?.invalidate()
    })
  }

  /**
   * Writes back the dirty pages of the file being written, on the libuv pool, while puts go on
   * (RocketMQ flushes an index file only when it rolls): run periodically, it leaves a close
   * little to sync. Recovery does not rely on it (after a crash the file being written is deleted
   * and rebuilt, I1), so it moves no checkpoint time. One at a time; a call while one runs waits
   * for that one. Only a mapped file is flushed.
   */
  flushCurrentAsync(): Promise<void> {
    this.settleBulk()
    if (this.periodicFlush !== null) return this.periodicFlush
    const file = this.lastFile()
    // A file the budget unmapped as idle is left to close: mapping it again only to flush it would
    // keep it from ever being idle.
    if (this.closed || this.readOnly || file === null || !file.hasUnflushedChanges() || !file.getMappedFile().isMapped) {
      return Promise.resolve()
    }
    const running = file.flushAsync().finally(() => {
      this.periodicFlush = null
    })
    this.periodicFlush = running
    return running
  }

  getFileCount(): number {
    this.settleBulk()
    return this.files.length
  }

  /** The files, oldest first. */
  getFiles(): readonly IndexFile[] {
    this.settleBulk()
    return this.files
  }

  private lastFile(): IndexFile | null {
    const files = this.files
    return files.length > 0 ? files[files.length - 1] : null
  }

  /** Waits for the page warm-ups of every file, so that shutdown unmaps them at once. */
  async settle(): Promise<void> {
    await this.ahead.settle()
    for (const file of [...this.files]) await file.settle()
  }

  /** Unmaps every file (without flushing: call flush first for durability). */
  shutdown(): void {
    this.bulk = null
    if (this.closed) return
    this.closed = true
    this.mark?.close()
    this.ahead.close()
    for (const file of this.files) file.shutdown()
    this.files.length = 0
  }

  /**
   * Deletes every index file (forced even if a background flush is still running). A read-only
   * service only unmaps them.
   */
  destroy(): void {
    if (this.readOnly) {
      this.shutdown()
      return
    }
    this.closed = true
    this.mark?.invalidate()
    this.ahead.close()
    for (const file of this.files) {
      if (!file.destroy(0)) file.destroy(0)
    }
    this.files.length = 0
  }

  private assertOpen(): void {
    if (this.closed) throw new MQStoreError('STORE_CLOSED', `index ${this.indexDir} is shut down`)
  }
}

/** IndexFile.keepDurablePrefix; a failure (no space for a page of the slot table) means "rebuild it". */
function keepsPrefix(file: IndexFile, mark: IndexDurableMark): boolean {
  try {
    return file.keepDurablePrefix(mark)
  } catch {
    return false
  }
}
