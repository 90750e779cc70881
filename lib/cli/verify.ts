// `mqstore verify <dir>`: checks a store directory without changing it.
//
// Nothing is locked, created, written or deleted: every file is opened read-only and read with
// plain positioned reads in bounded chunks, so it is safe to run against a store another process
// has open (what it reports about the live tail of such a store may then be out of date).
//
// One sequential pass over the commit log does the work. Every record is checked (CRC included) in
// order; the consume-queue units and index entries are streamed alongside it, merged by the
// commit-log offset they point at, so each pointer is matched against the record the walk is on.
// Pointers that arrive out of order (a damaged file) are checked with a random read instead.
//
// What is checked:
//   commit log      20-digit names, one file size, no gaps; every record valid up to the end of the
//                   data (zeros), a blank record closing each full file, and no data beyond the end
//   consume queues  units point at the start of a valid record of their topic and queue id, with
//                   the record's size, queue offset and tags code; queue files contiguous; no queue
//                   ends before the last of its records (after a clean shutdown)
//   index           file dimensions; entries point at a record one of whose keys has the entry's
//                   hash; hash chains only link to older entries of the same slot
//   checkpoint      present, 4096 bytes (reported); abort file (reported)
import * as fs from 'node:fs'
import { join } from 'node:path'

import { EMBEDDED_DEFAULTS, ROCKETMQ_SIZES } from '../store/config.js'
import { CQ_BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE } from '../store/queue/consume-queue.js'
import {
  BLANK_MAGIC_CODE,
  checkRecord,
  MESSAGE_MAGIC_CODE,
  MIN_RECORD_LENGTH,
  SysFlag,
  type DispatchRequest,
} from '../store/commitlog/record.js'
import { parseOffsetName } from '../store/mapped/segment-name.js'
import {
  HASH_SLOT_SIZE,
  INDEX_COUNT_OFFSET,
  INDEX_ENTRY_SIZE,
  INDEX_HEADER_SIZE,
  indexFileSize,
  indexKeyHash,
  parseIndexFileName,
} from '../store/index/index-file.js'
import { CHECKPOINT_FILE_SIZE } from '../store/store-checkpoint.js'

// ---------------------------------------------------------------------------------------------
// Report

export interface VerifyProblem {
  /** The file, relative to the store directory, with '/' separators. */
  file: string
  /** Byte position in that file. */
  offset: number
  reason: string
  /** The commit-log (physical) offset concerned, when there is one. */
  phyOffset?: number
  /** Queue offset of a consume-queue unit. */
  queueOffset?: number
  /** Number of an index entry. */
  entry?: number
}

interface ProblemList {
  /** The first problems found (at most `maxProblems`). */
  problems: VerifyProblem[]
  /** How many more were found and left out. */
  moreProblems: number
}

export interface CommitLogReport extends ProblemList {
  files: number
  /** The size of the commit-log files (taken from the files found). */
  fileSize: number
  /** Valid records walked, and the sum of their sizes. */
  records: number
  bytes: number
  /** Start of the first file: offsets below it have expired. */
  minOffset: number
  /** Where valid data ends: the offset after the last valid record (or blank). */
  validEnd: number
  /** Why the walk stopped. */
  endReason: 'empty' | 'end-of-data' | 'end-of-files' | 'damage' | 'gap'
  /** Store time of the last valid record, 0 when there is none. */
  lastStoreTimestamp: number
}

export interface ConsumeQueueReport extends ProblemList {
  queues: number
  files: number
  fileSize: number
  /** Valid units read (expired ones included), pre-fill blanks not counted. */
  units: number
  /** Units pointing below the commit log's first file (informational). */
  expired: number
  /** Pre-fill blank units skipped. */
  blanks: number
  /**
   * Records in the commit log past the end of their queue: messages no consumer can reach. A
   * problem after a clean shutdown; otherwise a note (the store's next open dispatches them).
   */
  missing: number
}

export interface IndexFileReport {
  file: string
  /** 0 when the dimensions could not be determined. */
  hashSlotNum: number
  indexNum: number
  entries: number
}

export interface IndexReport extends ProblemList {
  files: number
  /** Entries checked (indexCount - 1 per file of known dimensions). */
  entries: number
  /** Entries pointing below the commit log's first file (informational). */
  expired: number
  details: IndexFileReport[]
}

export interface CheckpointReport extends ProblemList {
  present: boolean
  size: number
  physicMsgTimestamp: number
  logicsMsgTimestamp: number
  indexMsgTimestamp: number
}

export interface VerifyReport {
  /** True when no problem was found anywhere. */
  ok: boolean
  /** Total number of problems, including those left out of the lists. */
  problemCount: number
  dir: string
  commitLog: CommitLogReport
  consumeQueues: ConsumeQueueReport
  index: IndexReport
  checkpoint: CheckpointReport
  /** False when the abort file is present: the store is open, or was not shut down cleanly. */
  cleanShutdown: boolean
  /** Informational remarks (ignored files, data written during the check, ...). */
  notes: string[]
  elapsedMs: number
}

export interface VerifyOptions {
  /** Called now and then with commit-log bytes checked so far and the total. */
  onProgress?: (done: number, total: number) => void
  /** The store's index dimensions; without them the embedded and RocketMQ defaults are tried. */
  maxHashSlotNum?: number
  maxIndexNum?: number
  /** Problems kept per section (default 100); the rest are only counted. */
  maxProblems?: number
}

/** The directory does not exist or does not look like a store. */
export class NotAStoreError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'NotAStoreError'
  }
}

// ---------------------------------------------------------------------------------------------
// Small helpers

const TWO_POW_32 = 4294967296
/** Tags codes at or below this are consume-queue extension addresses (Integer.MIN_VALUE - 1). */
const CQ_EXT_MAX_ADDRESS = -2147483649
const WALK_CHUNK = 8 * 1024 * 1024
const RANDOM_CHUNK = 256 * 1024
const SCAN_CHUNK = 1024 * 1024
const PROGRESS_STEP = 16 * 1024 * 1024
const ZEROS = Buffer.alloc(SCAN_CHUNK)
/**
 * Records are read whole; none is larger than maxMessageSize (4 MiB by default) plus 64 KiB, so a
 * TOTALSIZE beyond this is damage, not a reason to allocate that much.
 */
const MAX_RECORD_LENGTH = 64 * 1024 * 1024

function readLong(buf: Buffer, at: number): number {
  return buf.readInt32BE(at) * TWO_POW_32 + buf.readUInt32BE(at + 4)
}

/** Reads up to `length` bytes at `position`; fewer only at the end of the file. */
function readFully(fd: number, buf: Buffer, offset: number, length: number, position: number): number {
  let done = 0
  while (done < length) {
    const n = fs.readSync(fd, buf, offset + done, length - done, position + done)
    if (n <= 0) break
    done += n
  }
  return done
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

function listDir(path: string): string[] | null {
  try {
    return fs.readdirSync(path)
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return null
    throw error
  }
}

function isDirectory(path: string): boolean {
  try {
    return fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

class Problems implements ProblemList {
  problems: VerifyProblem[] = []
  moreProblems = 0
  constructor(private readonly max: number) {}

  add(problem: VerifyProblem): void {
    if (this.problems.length < this.max) this.problems.push(problem)
    else this.moreProblems++
  }

  get count(): number {
    return this.problems.length + this.moreProblems
  }
}

/** A segment file (commit log or consume queue): named by its start offset. */
interface Segment {
  /** Path relative to the store directory. */
  rel: string
  path: string
  start: number
  /** Actual length on disk. */
  size: number
}

/**
 * The segment files of one directory, sorted by start offset. Names that are not 20-digit offsets
 * are problems (the store refuses to load them), except the `.tmp` leftovers it ignores.
 */
function listSegments(dir: string, relDir: string, problems: Problems, notes: string[]): Segment[] {
  const names = listDir(dir) ?? []
  const out: Segment[] = []
  for (const name of names.sort()) {
    const rel = `${relDir}/${name}`
    if (name.endsWith('.tmp')) {
      notes.push(`${rel}: a temporary file (a file being created, or left by an interrupted creation), ignored`)
      continue
    }
    const start = parseOffsetName(name)
    let stat: fs.Stats
    try {
      stat = fs.statSync(join(dir, name))
    } catch (error) {
      if (errorCode(error) === 'ENOENT') continue // deleted since the listing
      throw error
    }
    if (start === null || !stat.isFile()) {
      problems.add({ file: rel, offset: 0, reason: `not a segment file (a 20-digit start offset): the store would refuse to load` })
      continue
    }
    out.push({ rel, path: join(dir, name), start, size: stat.size })
  }
  return out.sort((a, b) => a.start - b.start)
}

/**
 * The file size of a segment queue, from the files themselves: the distance between the first two
 * names when a file has that size, else the most common size (ties: the largest).
 */
function inferFileSize(files: readonly Segment[]): number {
  if (files.length === 0) return 0
  if (files.length >= 2) {
    const gap = files[1].start - files[0].start
    if (gap > 0 && files.some((f) => f.size === gap)) return gap
  }
  return mostCommon(files.map((f) => f.size))
}

function mostCommon(sizes: readonly number[]): number {
  const counts = new Map<number, number>()
  for (const s of sizes) counts.set(s, (counts.get(s) ?? 0) + 1)
  let best = 0
  let bestCount = 0
  for (const [size, count] of counts) {
    if (count > bestCount || (count === bestCount && size > best)) {
      best = size
      bestCount = count
    }
  }
  return best
}

/** Checks names against the file size: starts at multiples of it, each file where the last ended. */
function checkSegmentLayout(files: readonly Segment[], fileSize: number, problems: Problems, what: string): Set<number> {
  const gapsBefore = new Set<number>()
  for (let i = 0; i < files.length; i++) {
    const f = files[i]
    if (fileSize > 0 && f.size !== fileSize) {
      problems.add({ file: f.rel, offset: f.size, reason: `wrong size: ${f.size} bytes, the ${what} files are ${fileSize}` })
    }
    if (fileSize > 0 && f.start % fileSize !== 0) {
      problems.add({ file: f.rel, offset: 0, reason: `starts at ${f.start}, not a multiple of the file size ${fileSize}` })
    }
    if (i > 0 && fileSize > 0) {
      const expected = files[i - 1].start + fileSize
      if (f.start !== expected) {
        gapsBefore.add(i)
        const why = f.start > expected ? `a gap: the files for ${expected}..${f.start - 1} are missing` : `overlaps the previous file, which ends at ${expected}`
        problems.add({ file: f.rel, offset: 0, reason: `not contiguous with ${files[i - 1].rel}: ${why}` })
      }
    }
  }
  return gapsBefore
}

/**
 * The first non-zero byte from (files[index], pos) on, through the later files; null when only
 * zeros follow. A file that disappeared counts as zeros. `firstBytes` / `laterBytes` bound how
 * much of the first file (from pos) and of each later file (from its start) is looked at.
 */
function firstNonZero(
  files: readonly Segment[],
  index: number,
  pos: number,
  scratch: Buffer,
  firstBytes = Infinity,
  laterBytes = Infinity,
): { index: number; pos: number } | null {
  for (let i = index; i < files.length; i++) {
    const f = files[i]
    const from = i === index ? pos : 0
    const to = Math.min(f.size, from + (i === index ? firstBytes : laterBytes))
    let fd: number
    try {
      fd = fs.openSync(f.path, 'r')
    } catch (error) {
      if (errorCode(error) === 'ENOENT') continue
      throw error
    }
    try {
      for (let at = from; at < to; ) {
        const n = readFully(fd, scratch, 0, Math.min(scratch.length, to - at), at)
        if (n <= 0) break
        if (scratch.compare(ZEROS, 0, n, 0, n) !== 0) {
          for (let k = 0; k < n; k++) if (scratch[k] !== 0) return { index: i, pos: at + k }
        }
        at += n
      }
    } finally {
      fs.closeSync(fd)
    }
  }
  return null
}

/** A window of one file, read in chunks, for sequential or nearby reads. */
class FileWindow {
  buf: Buffer
  private fd = -1
  private path = ''
  private size = 0
  private start = 0
  private len = 0

  constructor(private readonly chunk: number) {
    this.buf = Buffer.allocUnsafe(chunk)
  }

  /** Switches to a file (keeps it open until the next switch or close). */
  use(path: string, size: number): void {
    if (path === this.path && this.fd >= 0) {
      this.size = size
      return
    }
    this.close()
    this.fd = fs.openSync(path, 'r')
    this.path = path
    this.size = size
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd)
    this.fd = -1
    this.path = ''
    this.start = 0
    this.len = 0
  }

  invalidate(): void {
    this.len = 0
  }

  /**
   * Makes [pos, pos + need) readable, clipped to the file end, and returns the index of `pos` in
   * `buf`; `available(pos)` tells how many bytes from there are loaded.
   */
  load(pos: number, need: number): number {
    const want = Math.max(0, Math.min(need, this.size - pos))
    if (pos >= this.start && pos + want <= this.start + this.len) return pos - this.start
    const length = Math.max(0, Math.min(Math.max(want, this.chunk), this.size - pos))
    if (length > this.buf.length) this.buf = Buffer.allocUnsafe(length)
    this.start = pos
    this.len = length === 0 ? 0 : readFully(this.fd, this.buf, 0, length, pos)
    return 0
  }

  available(pos: number): number {
    return Math.max(0, this.start + this.len - pos)
  }
}

/** Reads single records anywhere in the commit log (for pointers that arrive out of order). */
class CommitLogReader {
  private readonly window = new FileWindow(RANDOM_CHUNK)
  private relisted = false

  constructor(
    private files: Segment[],
    private readonly relist: () => Segment[],
  ) {}

  private fileOf(phy: number): Segment | null {
    let lo = 0
    let hi = this.files.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const f = this.files[mid]
      if (phy < f.start) hi = mid - 1
      else if (phy >= f.start + f.size) lo = mid + 1
      else return f
    }
    return null
  }

  /** The valid record (CRC checked) that starts exactly at `phy`, or why there is none. */
  recordAt(phy: number): DispatchRequest | string {
    let f = this.fileOf(phy)
    const last = this.files[this.files.length - 1]
    if (f === null && !this.relisted && (last === undefined || phy >= last.start + last.size)) {
      // The log may have grown a file since it was listed.
      this.relisted = true
      this.files = this.relist()
      f = this.fileOf(phy)
    }
    if (f === null) return 'no commit-log file holds this offset'
    try {
      this.window.use(f.path, f.size)
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return 'its commit-log file was deleted during the check'
      throw error
    }
    const pos = phy - f.start
    let p = this.window.load(pos, 8)
    if (this.window.available(pos) < 8) return 'no record header fits there'
    const total = this.window.buf.readInt32BE(p)
    if (total > MAX_RECORD_LENGTH) return `TOTALSIZE ${total} is larger than any record this check reads`
    if (total >= MIN_RECORD_LENGTH && total <= f.size - pos) p = this.window.load(pos, total)
    const req = checkRecord(this.window.buf, p, p + this.window.available(pos), true)
    if (req.status === 'BLANK') return 'a blank (end-of-file) record starts there'
    if (req.status !== 'OK') return req.reason ?? req.status
    if (req.commitLogOffset !== phy) return `the record there says it is at offset ${req.commitLogOffset} (not a record start)`
    return req
  }

  close(): void {
    this.window.close()
  }
}

// ---------------------------------------------------------------------------------------------
// Pointer streams: consume-queue units and index entries, each stream in commit-log order

interface PointerStream {
  /** Commit-log offset the current pointer points at. */
  phy: number
  /** Moves to the next pointer; false when the stream is exhausted. */
  advance(): boolean
  /** The pointer's target is below the commit log's first file. */
  expired(): void
  /** The pointer's target is this valid record. */
  match(req: DispatchRequest): void
  /** There is no valid record at the pointer's target; `reason` completes "points at offset N, ...". */
  miss(reason: string): void
}

class MinHeap {
  private readonly items: PointerStream[] = []

  get size(): number {
    return this.items.length
  }

  peek(): PointerStream | undefined {
    return this.items[0]
  }

  push(s: PointerStream): void {
    const a = this.items
    a.push(s)
    let i = a.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (a[parent].phy <= s.phy) break
      a[i] = a[parent]
      i = parent
    }
    a[i] = s
  }

  pop(): PointerStream | undefined {
    const a = this.items
    const top = a[0]
    const last = a.pop()
    if (top === undefined || last === undefined || a.length === 0) return top
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      if (l >= a.length) break
      const r = l + 1
      const c = r < a.length && a[r].phy < a[l].phy ? r : l
      if (a[c].phy >= last.phy) break
      a[i] = a[c]
      i = c
    }
    a[i] = last
    return top
  }
}

interface CqContext {
  problems: Problems
  notes: string[]
  scratch: Buffer
  chunk: number
  counts: { units: number; expired: number; blanks: number; extTags: number; appended: number }
}

/** How far past the end of a queue's data the stream looks for stray units (cheap: many queues). */
const CQ_TAIL_PROBE = 64 * 1024

/** The units of one consume queue, read in chunks (no file stays open between reads). */
class QueueStream implements PointerStream {
  phy = 0
  private size = 0
  private tagsCode = 0
  private queueOffset = 0
  private rel = ''
  private pos = 0

  private fileIndex = 0
  private filePos = 0
  private buf: Buffer | null = null
  private bufFile = -1
  private bufStart = 0
  private bufLen = 0
  private seenUnit = false
  /** The queue offset after the last valid unit (0 when there is none). */
  nextQueueOffset = 0
  /** Where the queue's data ends: file and position (for problems about the end). */
  endRel = ''
  endPos = 0

  constructor(
    private readonly ctx: CqContext,
    private readonly topic: string,
    private readonly queueId: number,
    private readonly files: Segment[],
    /** Lists the queue's files again (a live queue may add one while it is read). */
    private readonly relist: () => Segment[],
  ) {}

  private relisted = false

  /** Index in `buf` of the unit at (fileIndex, filePos); -1 when the file cannot be read there. */
  private load(f: Segment, pos: number): number {
    if (this.bufFile === this.fileIndex && pos >= this.bufStart && pos + CQ_STORE_UNIT_SIZE <= this.bufStart + this.bufLen) {
      return pos - this.bufStart
    }
    this.buf ??= Buffer.allocUnsafe(this.ctx.chunk)
    let fd: number
    try {
      fd = fs.openSync(f.path, 'r')
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') throw error
      this.ctx.notes.push(`${f.rel}: deleted during the check; its units were not checked`)
      return -1
    }
    try {
      this.bufLen = readFully(fd, this.buf, 0, Math.min(this.buf.length, f.size - pos), pos)
    } finally {
      fs.closeSync(fd)
    }
    this.bufFile = this.fileIndex
    this.bufStart = pos
    return this.bufLen >= CQ_STORE_UNIT_SIZE ? 0 : -1
  }

  advance(): boolean {
    const { problems, counts } = this.ctx
    for (;;) {
      const f = this.files[this.fileIndex]
      if (f === undefined) {
        // Every listed file was full: a live store may have started the next one since.
        const last = this.files[this.files.length - 1]
        if (this.relisted || last === undefined) return this.finish()
        this.relisted = true
        this.files.push(...this.relist().filter((x) => x.start > last.start))
        continue
      }
      const usable = f.size - (f.size % CQ_STORE_UNIT_SIZE)
      if (this.filePos + CQ_STORE_UNIT_SIZE > usable) {
        this.fileIndex++
        this.filePos = 0
        continue
      }
      const at = this.filePos
      const p = this.load(f, at)
      if (p < 0) {
        this.fileIndex++
        this.filePos = 0
        continue
      }
      const buf = this.buf!
      const offset = readLong(buf, p)
      const size = buf.readInt32BE(p + 8)
      const tagsCode = readLong(buf, p + 12)
      this.filePos += CQ_STORE_UNIT_SIZE
      const queueOffset = (f.start + at) / CQ_STORE_UNIT_SIZE
      if (offset === 0 && size === 0 && tagsCode === 0) {
        this.endOfData(this.fileIndex, at)
        return this.finish()
      }
      if (offset === 0 && size === CQ_BLANK_UNIT_SIZE) {
        counts.blanks++
        if (this.seenUnit) {
          problems.add({ file: f.rel, offset: at, queueOffset, reason: 'a pre-fill blank unit after real units' })
        }
        continue
      }
      if (!(offset >= 0 && size > 0)) {
        this.endRel = f.rel
        this.endPos = at
        problems.add({
          file: f.rel,
          offset: at,
          queueOffset,
          reason: `invalid unit (commitLogOffset ${offset}, size ${size}): the queue's data ends here for the store, later units are unreachable`,
        })
        return this.finish()
      }
      counts.units++
      this.seenUnit = true
      this.nextQueueOffset = queueOffset + 1
      this.endRel = f.rel
      this.endPos = at + CQ_STORE_UNIT_SIZE
      this.phy = offset
      this.size = size
      this.tagsCode = tagsCode
      this.queueOffset = queueOffset
      this.rel = f.rel
      this.pos = at
      return true
    }
  }

  private finish(): false {
    this.buf = null
    return false
  }

  /** All-zero unit: the normal end, unless data follows it. */
  private endOfData(index: number, at: number): void {
    this.endRel = this.files[index].rel
    this.endPos = at
    // A zeroed stretch inside the data would hide the units after it. Look a little way past the
    // end and at the start of each later file (the queue count makes a full scan too costly; the
    // commit-log side of the check finds what a queue misses anyway).
    const found = firstNonZero(this.files, index, at, this.ctx.scratch, CQ_TAIL_PROBE, CQ_STORE_UNIT_SIZE)
    if (found === null) return
    const f = this.files[found.index]
    if (found.index === index && found.pos < at + CQ_STORE_UNIT_SIZE) {
      // The end unit itself is no longer zero: a unit appended while we read (a live store).
      this.ctx.counts.appended++
      return
    }
    const unitAt = found.pos - (found.pos % CQ_STORE_UNIT_SIZE)
    this.ctx.problems.add({
      file: f.rel,
      offset: unitAt,
      queueOffset: (f.start + unitAt) / CQ_STORE_UNIT_SIZE,
      reason: `non-zero bytes after the end of the queue's data (an all-zero unit at ${this.files[index].rel} position ${at}): units there are unreachable`,
    })
  }

  expired(): void {
    this.ctx.counts.expired++
  }

  private problem(reason: string): void {
    this.ctx.problems.add({ file: this.rel, offset: this.pos, phyOffset: this.phy, queueOffset: this.queueOffset, reason })
  }

  miss(reason: string): void {
    this.problem(`points at commit-log offset ${this.phy}, ${reason}`)
  }

  match(req: DispatchRequest): void {
    const why: string[] = []
    if (req.size !== this.size) why.push(`the unit says ${this.size} bytes, the record at ${this.phy} is ${req.size}`)
    if (req.topic !== this.topic || req.queueId !== this.queueId) {
      why.push(`the record at ${this.phy} belongs to ${req.topic}/${req.queueId}, not ${this.topic}/${this.queueId}`)
    } else if (req.queueOffset !== this.queueOffset) {
      why.push(`the record at ${this.phy} has queue offset ${req.queueOffset}, the unit is at queue offset ${this.queueOffset}`)
    }
    const tran = req.sysFlag & SysFlag.TRANSACTION_MASK
    if (tran === SysFlag.TRANSACTION_PREPARED || tran === SysFlag.TRANSACTION_ROLLBACK) {
      why.push(`the record at ${this.phy} is a prepared or rolled-back transaction message, which is never dispatched`)
    }
    if (this.tagsCode <= CQ_EXT_MAX_ADDRESS) this.ctx.counts.extTags++
    else if (this.tagsCode !== req.tagsCode) why.push(`tags code ${this.tagsCode}, the record's tags give ${req.tagsCode}`)
    if (why.length > 0) this.problem(why.join('; '))
  }
}

interface IndexContext {
  problems: Problems
  counts: { expired: number }
  /** Index hashes of the keys of the record at `phy` (computed once per record). */
  keyHashes(phy: number, req: DispatchRequest): number[]
}

/** The entries of one index file, in entry order. */
class IndexStream implements PointerStream {
  phy = 0
  private keyHash = 0
  private entry = 0
  private buf: Buffer | null = null
  private bufFirst = 0
  private bufCount = 0

  constructor(
    private readonly ctx: IndexContext,
    private readonly rel: string,
    private readonly path: string,
    private readonly entriesStart: number,
    private readonly count: number,
  ) {}

  advance(): boolean {
    const next = this.entry + 1
    if (next >= this.count) {
      this.buf = null
      return false
    }
    if (this.buf === null || next >= this.bufFirst + this.bufCount) {
      this.buf ??= Buffer.allocUnsafe(INDEX_ENTRY_SIZE * 2048)
      const n = Math.min(this.buf.length / INDEX_ENTRY_SIZE, this.count - next)
      let fd: number
      try {
        fd = fs.openSync(this.path, 'r')
      } catch (error) {
        if (errorCode(error) === 'ENOENT') return false
        throw error
      }
      try {
        const got = readFully(fd, this.buf, 0, n * INDEX_ENTRY_SIZE, this.entriesStart + next * INDEX_ENTRY_SIZE)
        this.bufFirst = next
        this.bufCount = Math.floor(got / INDEX_ENTRY_SIZE)
      } finally {
        fs.closeSync(fd)
      }
      if (this.bufCount === 0) return false
    }
    const buf = this.buf
    const p = (next - this.bufFirst) * INDEX_ENTRY_SIZE
    this.entry = next
    this.keyHash = buf.readInt32BE(p)
    this.phy = readLong(buf, p + 4)
    return true
  }

  expired(): void {
    this.ctx.counts.expired++
  }

  private problem(reason: string): void {
    this.ctx.problems.add({
      file: this.rel,
      offset: this.entriesStart + this.entry * INDEX_ENTRY_SIZE,
      entry: this.entry,
      phyOffset: this.phy,
      reason,
    })
  }

  miss(reason: string): void {
    this.problem(`entry ${this.entry} points at commit-log offset ${this.phy}, ${reason}`)
  }

  match(req: DispatchRequest): void {
    const hashes = this.ctx.keyHashes(this.phy, req)
    if (!hashes.includes(this.keyHash)) {
      const keys = [req.uniqKey, ...(req.keys ?? '').split(' ')].filter((k) => k !== undefined && k !== '')
      this.problem(
        `entry ${this.entry}: key hash ${this.keyHash} is not the hash of any key of the record at ${this.phy} ` +
          `(${req.topic}, keys ${keys.length === 0 ? 'none' : keys.map((k) => JSON.stringify(k)).join(' ')})`,
      )
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Index files: dimensions and hash chains

interface IndexDims {
  hashSlotNum: number
  indexNum: number
}

function indexDimensions(size: number, options: VerifyOptions): IndexDims | string {
  const given = options.maxHashSlotNum !== undefined && options.maxIndexNum !== undefined
  if (given) {
    const expected = indexFileSize(options.maxHashSlotNum!, options.maxIndexNum!)
    if (size === expected) return { hashSlotNum: options.maxHashSlotNum!, indexNum: options.maxIndexNum! }
    return `wrong size: ${size} bytes; ${options.maxHashSlotNum} slots and ${options.maxIndexNum} entries need ${expected}`
  }
  const candidates: IndexDims[] = [
    { hashSlotNum: EMBEDDED_DEFAULTS.maxHashSlotNum, indexNum: EMBEDDED_DEFAULTS.maxIndexNum },
    { hashSlotNum: ROCKETMQ_SIZES.maxHashSlotNum!, indexNum: ROCKETMQ_SIZES.maxIndexNum! },
  ]
  for (const c of candidates) if (indexFileSize(c.hashSlotNum, c.indexNum) === size) return c
  return (
    `unknown dimensions: ${size} bytes fits neither ${candidates.map((c) => `${c.hashSlotNum} slots / ${c.indexNum} entries`).join(' nor ')}; ` +
    'pass the store\'s --max-hash-slot-num and --max-index-num'
  )
}

/**
 * Checks one index file's hash chains: each entry must link to the previous entry of its slot
 * (always an earlier one), and each slot must hold the newest entry of its chain. Returns the
 * number of entries (indexCount - 1).
 */
function checkIndexChains(path: string, rel: string, dims: IndexDims, problems: Problems): number {
  const { hashSlotNum, indexNum } = dims
  const entriesStart = INDEX_HEADER_SIZE + hashSlotNum * HASH_SLOT_SIZE
  const fd = fs.openSync(path, 'r')
  try {
    const header = Buffer.alloc(INDEX_HEADER_SIZE)
    readFully(fd, header, 0, INDEX_HEADER_SIZE, 0)
    let count = header.readInt32BE(INDEX_COUNT_OFFSET)
    if (count <= 0) count = 1
    if (count > indexNum) {
      problems.add({ file: rel, offset: INDEX_COUNT_OFFSET, reason: `indexCount ${count} exceeds the file's ${indexNum} entries` })
      count = indexNum
    }
    const slots = Buffer.alloc(hashSlotNum * HASH_SLOT_SIZE)
    readFully(fd, slots, 0, slots.length, INDEX_HEADER_SIZE)
    const newest = new Int32Array(hashSlotNum)
    const chunk = Buffer.allocUnsafe(INDEX_ENTRY_SIZE * 16384)
    for (let first = 1; first < count; ) {
      const n = Math.min(chunk.length / INDEX_ENTRY_SIZE, count - first)
      const got = Math.floor(readFully(fd, chunk, 0, n * INDEX_ENTRY_SIZE, entriesStart + first * INDEX_ENTRY_SIZE) / INDEX_ENTRY_SIZE)
      if (got === 0) break
      for (let i = 0; i < got; i++) {
        const k = first + i
        const p = i * INDEX_ENTRY_SIZE
        const keyHash = chunk.readInt32BE(p)
        const timeDiff = chunk.readInt32BE(p + 12)
        const prev = chunk.readInt32BE(p + 16)
        const at = entriesStart + k * INDEX_ENTRY_SIZE
        const why: string[] = []
        if (keyHash < 0) why.push(`negative key hash ${keyHash}`)
        if (timeDiff < 0) why.push(`negative time difference ${timeDiff}`)
        const slot = keyHash < 0 ? -1 : keyHash % hashSlotNum
        if (prev < 0 || prev >= k) {
          why.push(`links to entry ${prev}; a chain may only link to an earlier entry`)
        } else if (slot >= 0 && prev !== newest[slot]) {
          why.push(`links to entry ${prev}, but the previous entry of its slot ${slot} is ${newest[slot]}`)
        }
        if (why.length > 0) problems.add({ file: rel, offset: at, entry: k, reason: `entry ${k}: ${why.join('; ')}` })
        if (slot >= 0) newest[slot] = k
      }
      first += got
    }
    // A live store may have added entries since the header was read: slots may point at them.
    readFully(fd, header, 0, INDEX_HEADER_SIZE, 0)
    const liveCount = Math.max(count, Math.min(indexNum, header.readInt32BE(INDEX_COUNT_OFFSET)))
    for (let s = 0; s < hashSlotNum; s++) {
      const head = slots.readInt32BE(s * HASH_SLOT_SIZE)
      if (head === newest[s]) continue
      if (head >= count && head < liveCount) continue
      const at = INDEX_HEADER_SIZE + s * HASH_SLOT_SIZE
      const reason =
        head < 0 || head >= count
          ? `slot ${s} points at entry ${head}, past the last entry ${count - 1}`
          : newest[s] === 0
            ? `slot ${s} points at entry ${head}, but no entry hashes to this slot`
            : `slot ${s} points at entry ${head}, but its newest entry is ${newest[s]}`
      problems.add({ file: rel, offset: at, reason })
    }
    return count - 1
  } finally {
    fs.closeSync(fd)
  }
}

// ---------------------------------------------------------------------------------------------
// verifyStore

const STORE_ENTRIES = ['commitlog', 'consumequeue', 'index', 'checkpoint']

/** Checks the store in `dir` without changing anything; see the file comment for what is checked. */
export async function verifyStore(dir: string, options: VerifyOptions = {}): Promise<VerifyReport> {
  const began = Date.now()
  if (!isDirectory(dir)) throw new NotAStoreError(`${dir} is not a directory`)
  if (!STORE_ENTRIES.some((name) => fs.existsSync(join(dir, name)))) {
    throw new NotAStoreError(`${dir} is not a store (it has none of ${STORE_ENTRIES.join(', ')})`)
  }
  const maxProblems = options.maxProblems ?? 100
  const notes: string[] = []
  const scratch = Buffer.allocUnsafe(SCAN_CHUNK)

  // ---- commit-log files
  const clProblems = new Problems(maxProblems)
  const clDir = join(dir, 'commitlog')
  const clFiles = listSegments(clDir, 'commitlog', clProblems, notes)
  const clFileSize = inferFileSize(clFiles)
  const clGaps = checkSegmentLayout(clFiles, clFileSize, clProblems, 'commit-log')
  const minOffset = clFiles.length > 0 ? clFiles[0].start : 0

  // ---- consume-queue files
  const cqProblems = new Problems(maxProblems)
  const cqCounts = { units: 0, expired: 0, blanks: 0, extTags: 0, appended: 0 }
  const queues: { topic: string; queueId: number; dir: string; rel: string; files: Segment[] }[] = []
  const cqRoot = join(dir, 'consumequeue')
  for (const topic of (listDir(cqRoot) ?? []).sort()) {
    if (!isDirectory(join(cqRoot, topic))) {
      notes.push(`consumequeue/${topic}: not a directory, ignored`)
      continue
    }
    for (const name of (listDir(join(cqRoot, topic)) ?? []).sort()) {
      if (!/^\d{1,10}$/.test(name) || Number(name) > 0x7fffffff) {
        notes.push(`consumequeue/${topic}/${name}: not a queue id, ignored (as the store does)`)
        continue
      }
      const queueDir = join(cqRoot, topic, name)
      if (!isDirectory(queueDir)) continue
      const rel = `consumequeue/${topic}/${name}`
      queues.push({ topic, queueId: Number(name), dir: queueDir, rel, files: listSegments(queueDir, rel, cqProblems, notes) })
    }
  }
  const allCqFiles = queues.flatMap((q) => [...q.files])
  const cqFileSize = mostCommon(allCqFiles.map((f) => f.size))
  if (cqFileSize % CQ_STORE_UNIT_SIZE !== 0) {
    cqProblems.add({
      file: allCqFiles[0].rel,
      offset: 0,
      reason: `the consume-queue files are ${cqFileSize} bytes, not a multiple of the ${CQ_STORE_UNIT_SIZE}-byte unit`,
    })
  }
  for (const q of queues) checkSegmentLayout(q.files, cqFileSize, cqProblems, 'consume-queue')
  // Bounded memory however many queues there are: at most 32 MiB of unit buffers in all.
  const unitsPerChunk = Math.max(16, Math.min(4096, Math.floor((32 * 1024 * 1024) / Math.max(1, queues.length) / CQ_STORE_UNIT_SIZE)))
  const cqContext: CqContext = { problems: cqProblems, notes, scratch, chunk: unitsPerChunk * CQ_STORE_UNIT_SIZE, counts: cqCounts }

  // ---- index files (hash chains are checked here, entries against records during the walk)
  const ixProblems = new Problems(maxProblems)
  const ixCounts = { expired: 0 }
  const ixDetails: IndexFileReport[] = []
  const ixStreams: IndexStream[] = []
  let ixEntries = 0
  let hashCacheFor = -1
  let hashCache: number[] = []
  const ixContext: IndexContext = {
    problems: ixProblems,
    counts: ixCounts,
    keyHashes(phy, req) {
      if (phy !== hashCacheFor) {
        hashCacheFor = phy
        const prefix = `${req.topic}#`
        hashCache = []
        if (req.uniqKey !== undefined) hashCache.push(indexKeyHash(prefix + req.uniqKey))
        for (const key of (req.keys ?? '').split(' ')) if (key !== '') hashCache.push(indexKeyHash(prefix + key))
      }
      return hashCache
    },
  }
  const ixDir = join(dir, 'index')
  let ixFileCount = 0
  for (const name of (listDir(ixDir) ?? []).sort()) {
    const rel = `index/${name}`
    if (name.endsWith('.tmp')) {
      notes.push(`${rel}: a temporary file (a file being created, or left by an interrupted creation), ignored`)
      continue
    }
    const path = join(ixDir, name)
    let size: number
    try {
      const stat = fs.statSync(path)
      if (!stat.isFile() || parseIndexFileName(name) === null) {
        ixProblems.add({ file: rel, offset: 0, reason: 'not an index file name (yyyyMMddHHmmssSSS): the store would refuse to load' })
        continue
      }
      size = stat.size
    } catch (error) {
      if (errorCode(error) === 'ENOENT') continue
      throw error
    }
    ixFileCount++
    const dims = indexDimensions(size, options)
    if (typeof dims === 'string') {
      ixProblems.add({ file: rel, offset: 0, reason: dims })
      ixDetails.push({ file: rel, hashSlotNum: 0, indexNum: 0, entries: 0 })
      continue
    }
    const entries = checkIndexChains(path, rel, dims, ixProblems)
    ixEntries += entries
    ixDetails.push({ file: rel, ...dims, entries })
    const stream = new IndexStream(ixContext, rel, path, INDEX_HEADER_SIZE + dims.hashSlotNum * HASH_SLOT_SIZE, entries + 1)
    ixStreams.push(stream)
  }

  // ---- the walk, with every pointer stream merged in
  const heap = new MinHeap()
  const addStream = (s: PointerStream): void => {
    if (s.advance()) heap.push(s)
  }
  const queueStreams = new Map<string, QueueStream>()
  for (const q of queues) {
    const stream = new QueueStream(cqContext, q.topic, q.queueId, [...q.files], () => listSegments(q.dir, q.rel, new Problems(0), []))
    queueStreams.set(`${q.topic}\u0000${q.queueId}`, stream)
    addStream(stream)
  }
  /** Per (topic, queueId): the queue offset after the last record of the queue seen in the walk. */
  const recordQueues = new Map<string, { topic: string; queueId: number; next: number }>()
  for (const s of ixStreams) addStream(s)

  const reader = new CommitLogReader(clFiles, () => listSegments(clDir, 'commitlog', new Problems(0), []))
  let lastStart = -1
  let lastSize = 0
  let walkDone = false
  let validEnd = minOffset
  let endReason: CommitLogReport['endReason'] = clFiles.length === 0 ? 'empty' : 'end-of-files'
  let grewDuringCheck = false
  /** The walk ended at the end of the data with nothing after it: the log may only have grown since. */
  let endIsClean = clFiles.length === 0

  /** A pointer whose target the walk has already passed (or that lies beyond the walk's end). */
  const settlePassed = (s: PointerStream): void => {
    const u = s.phy
    if (u < minOffset) {
      s.expired()
      return
    }
    if (walkDone && u >= validEnd) {
      if (!endIsClean) {
        s.miss(`beyond the end of valid commit-log data (${validEnd})`)
        return
      }
      // Written after the walk passed that point (a live store): check it as it is now.
      const req = reader.recordAt(u)
      if (typeof req === 'string') {
        s.miss(`beyond the end of valid commit-log data (${validEnd})`)
      } else {
        grewDuringCheck = true
        s.match(req)
      }
      return
    }
    if (lastStart >= 0 && u > lastStart) {
      s.miss(u < lastStart + lastSize ? `inside the record at ${lastStart}` : 'in the unused end of a file')
      return
    }
    if (lastStart < 0) {
      s.miss('where no record starts')
      return
    }
    const req = reader.recordAt(u)
    if (typeof req === 'string') s.miss(`where no valid record starts (${req})`)
    else s.match(req)
  }

  const onRecord = (at: number, req: DispatchRequest): void => {
    for (let top = heap.peek(); top !== undefined && top.phy <= at; top = heap.peek()) {
      heap.pop()
      if (top.phy === at) top.match(req)
      else settlePassed(top)
      if (top.advance()) heap.push(top)
    }
    lastStart = at
    lastSize = req.size
    const tran = req.sysFlag & SysFlag.TRANSACTION_MASK
    if (tran === SysFlag.TRANSACTION_NOT_TYPE || tran === SysFlag.TRANSACTION_COMMIT) {
      const key = `${req.topic}\u0000${req.queueId}`
      const seen = recordQueues.get(key)
      if (seen === undefined) recordQueues.set(key, { topic: req.topic, queueId: req.queueId, next: req.queueOffset + 1 })
      else if (req.queueOffset >= seen.next) seen.next = req.queueOffset + 1
    }
  }

  const clTotal = clFiles.reduce((sum, f) => sum + f.size, 0)
  let clDoneBefore = 0
  let lastProgress = -PROGRESS_STEP
  const progress = (done: number): void => {
    if (options.onProgress !== undefined && done - lastProgress >= PROGRESS_STEP) {
      lastProgress = done
      options.onProgress(done, clTotal)
    }
  }
  options.onProgress?.(0, clTotal)
  lastProgress = 0

  let records = 0
  let bytes = 0
  let lastStoreTimestamp = 0
  const window = new FileWindow(WALK_CHUNK)
  let retriedAt = -1
  let sinceYield = 0
  try {
    walk: for (let i = 0; i < clFiles.length; i++) {
      const f = clFiles[i]
      if (clGaps.has(i)) {
        // Reported with the layout: the store cannot reach past a gap.
        endReason = 'gap'
        validEnd = clFiles[i - 1].start + clFileSize
        break
      }
      try {
        window.use(f.path, f.size)
      } catch (error) {
        if (errorCode(error) !== 'ENOENT') throw error
        clProblems.add({ file: f.rel, offset: 0, phyOffset: f.start, reason: 'deleted during the check' })
        endReason = 'damage'
        validEnd = f.start
        break
      }
      const stop = (pos: number, reason: string): void => {
        clProblems.add({ file: f.rel, offset: pos, phyOffset: f.start + pos, reason })
        endReason = 'damage'
        validEnd = f.start + pos
      }
      let pos = 0
      for (;;) {
        progress(clDoneBefore + pos)
        if (pos + 8 > f.size) {
          stop(
            pos,
            f.size !== clFileSize
              ? `the file ends after ${f.size} bytes (truncated?) before a blank record closes it`
              : `no room left for the 8-byte blank record that must close the file (${f.size - pos} bytes left)`,
          )
          break walk
        }
        let p = window.load(pos, 8)
        if (window.available(pos) < 8) {
          stop(pos, 'the file became shorter during the check')
          break walk
        }
        const total = window.buf.readInt32BE(p)
        const magic = window.buf.readInt32BE(p + 4)
        if (total === 0 && magic === 0) {
          endReason = 'end-of-data'
          validEnd = f.start + pos
          const found = firstNonZero(clFiles, i, pos, scratch)
          endIsClean = found === null
          if (found !== null) {
            const g = clFiles[found.index]
            // A header that is no longer zero and now holds a valid record: appended since we looked.
            if (found.index === i && found.pos < pos + 8 && typeof reader.recordAt(validEnd) !== 'string') {
              grewDuringCheck = true
              endIsClean = true
            } else {
              clProblems.add({
                file: g.rel,
                offset: found.pos,
                phyOffset: g.start + found.pos,
                reason: `non-zero bytes after the end of the data at ${validEnd} (a zeroed record header?): a recovery would discard them`,
              })
            }
          }
          break walk
        }
        if (magic === BLANK_MAGIC_CODE) {
          const expected = clFileSize - pos
          if (total !== expected) {
            clProblems.add({
              file: f.rel,
              offset: pos,
              phyOffset: f.start + pos,
              reason: `the blank record that closes the file says ${total} bytes, ${expected} remain`,
            })
          }
          validEnd = f.start + clFileSize
          endIsClean = i === clFiles.length - 1
          clDoneBefore += f.size
          continue walk
        }
        if (total > MAX_RECORD_LENGTH && magic === MESSAGE_MAGIC_CODE && total <= f.size - pos) {
          stop(pos, `TOTALSIZE ${total} is larger than any record this check reads (${MAX_RECORD_LENGTH} bytes)`)
          break walk
        }
        if (total >= MIN_RECORD_LENGTH && total <= f.size - pos) p = window.load(pos, total)
        const req = checkRecord(window.buf, p, p + Math.min(window.available(pos), f.size - pos), true)
        if (req.status === 'OK') {
          const at = f.start + pos
          if (req.commitLogOffset !== at) {
            clProblems.add({ file: f.rel, offset: pos, phyOffset: at, reason: `the record's PHYSICALOFFSET field says ${req.commitLogOffset}` })
          }
          records++
          bytes += req.size
          lastStoreTimestamp = req.storeTimestamp
          onRecord(at, req)
          pos += req.size
          if (++sinceYield >= 4096) {
            sinceYield = 0
            await yieldToEventLoop()
          }
          continue
        }
        // A store being written may show a record half-appended at its tail: look again once.
        if (i === clFiles.length - 1 && retriedAt !== f.start + pos) {
          retriedAt = f.start + pos
          await sleep(100)
          window.invalidate()
          continue
        }
        const claimedEnd = total >= 8 && total <= f.size - pos ? pos + total : pos + 8
        const after = firstNonZero(clFiles, i, claimedEnd, scratch)
        const tail =
          after === null
            ? 'only zeros follow (a torn append; a recovery truncates here)'
            : `data follows at ${clFiles[after.index].start + after.pos}`
        stop(pos, `${req.reason ?? req.status}; ${tail}`)
        break walk
      }
    }
    walkDone = true
    for (let top = heap.pop(); top !== undefined; top = heap.pop()) {
      settlePassed(top)
      if (top.advance()) heap.push(top)
    }
  } finally {
    window.close()
    reader.close()
  }
  options.onProgress?.(clTotal, clTotal)
  const cleanShutdown = !fs.existsSync(join(dir, 'abort'))

  // ---- every dispatched record must have its unit: a queue may not end before its records do
  let missing = 0
  for (const [key, seen] of recordQueues) {
    const stream = queueStreams.get(key)
    const have = stream?.nextQueueOffset ?? 0
    if (seen.next <= have) continue
    missing += seen.next - have
    const name = `${seen.topic}/${seen.queueId}`
    const what = `the commit log has records of ${name} up to queue offset ${seen.next - 1}, but its consume queue ${
      have === 0 ? 'has no units' : `ends at queue offset ${have}`
    }: ${seen.next - have} messages cannot be consumed`
    if (cleanShutdown) {
      const file = stream !== undefined && stream.endRel !== '' ? stream.endRel : `consumequeue/${name}`
      cqProblems.add({ file, offset: stream?.endPos ?? 0, queueOffset: have, reason: what })
    } else {
      notes.push(`${what} (the store is open or was not shut down cleanly; its next open dispatches them)`)
    }
  }
  if (cqCounts.appended > 0) notes.push(`${cqCounts.appended} consume queues had units appended during the check; those were not checked`)
  if (grewDuringCheck) notes.push('the store was written during the check: records appended after the walk reached the end were checked only through the units and entries pointing at them')
  if (cqCounts.extTags > 0) notes.push(`${cqCounts.extTags} units hold consume-queue extension addresses; their tags codes were not checked`)

  // ---- checkpoint and abort
  const cpProblems = new Problems(maxProblems)
  const checkpoint: CheckpointReport = {
    present: false,
    size: 0,
    physicMsgTimestamp: 0,
    logicsMsgTimestamp: 0,
    indexMsgTimestamp: 0,
    problems: [],
    moreProblems: 0,
  }
  const cpPath = join(dir, 'checkpoint')
  try {
    const fd = fs.openSync(cpPath, 'r')
    try {
      const size = fs.fstatSync(fd).size
      const head = Buffer.alloc(24)
      readFully(fd, head, 0, 24, 0)
      checkpoint.present = true
      checkpoint.size = size
      checkpoint.physicMsgTimestamp = Number(head.readBigInt64BE(0))
      checkpoint.logicsMsgTimestamp = Number(head.readBigInt64BE(8))
      checkpoint.indexMsgTimestamp = Number(head.readBigInt64BE(16))
      if (size !== CHECKPOINT_FILE_SIZE) {
        cpProblems.add({ file: 'checkpoint', offset: 0, reason: `wrong size: ${size} bytes, a checkpoint is ${CHECKPOINT_FILE_SIZE}` })
      }
    } finally {
      fs.closeSync(fd)
    }
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error
  }
  checkpoint.problems = cpProblems.problems
  checkpoint.moreProblems = cpProblems.moreProblems
  const problemCount = clProblems.count + cqProblems.count + ixProblems.count + cpProblems.count
  return {
    ok: problemCount === 0,
    problemCount,
    dir,
    commitLog: {
      files: clFiles.length,
      fileSize: clFileSize,
      records,
      bytes,
      minOffset,
      validEnd,
      endReason,
      lastStoreTimestamp,
      problems: clProblems.problems,
      moreProblems: clProblems.moreProblems,
    },
    consumeQueues: {
      queues: queues.length,
      files: allCqFiles.length,
      fileSize: cqFileSize,
      units: cqCounts.units,
      expired: cqCounts.expired,
      blanks: cqCounts.blanks,
      missing,
      problems: cqProblems.problems,
      moreProblems: cqProblems.moreProblems,
    },
    index: {
      files: ixFileCount,
      entries: ixEntries,
      expired: ixCounts.expired,
      details: ixDetails,
      problems: ixProblems.problems,
      moreProblems: ixProblems.moreProblems,
    },
    checkpoint,
    cleanShutdown,
    notes,
    elapsedMs: Date.now() - began,
  }
}

// ---------------------------------------------------------------------------------------------
// Output and the command

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`
}

function time(ms: number): string {
  return ms > 0 ? new Date(ms).toISOString() : 'none'
}

function problemLine(p: VerifyProblem): string {
  const where = [`${p.file} @${p.offset}`]
  if (p.queueOffset !== undefined) where.push(`queue offset ${p.queueOffset}`)
  if (p.phyOffset !== undefined && p.entry === undefined && p.queueOffset === undefined) where.push(`commit-log offset ${p.phyOffset}`)
  return `  ${where.join(', ')}: ${p.reason}`
}

/** A few readable lines, then every problem kept in the report. */
export function formatVerifyReport(r: VerifyReport): string {
  const cl = r.commitLog
  const cq = r.consumeQueues
  const ix = r.index
  const cp = r.checkpoint
  const end: Record<CommitLogReport['endReason'], string> = {
    empty: 'no files',
    'end-of-data': 'end of data',
    'end-of-files': 'the last file is full',
    damage: 'DAMAGE',
    gap: 'a GAP between files',
  }
  const lines = [
    `store ${r.dir}: ${r.ok ? 'OK' : `${plural(r.problemCount, 'problem')} found`} (${r.elapsedMs} ms)`,
    `commit log: ${plural(cl.files, 'file')} of ${cl.fileSize} bytes, ${plural(cl.records, 'record')} (${cl.bytes} bytes), ` +
      `offsets ${cl.minOffset}..${cl.validEnd}, walk stopped at ${end[cl.endReason]}`,
    `consume queues: ${plural(cq.queues, 'queue')}, ${plural(cq.files, 'file')}, ${plural(cq.units, 'unit')} (${cq.expired} expired)` +
      (cq.missing > 0 ? `, ${plural(cq.missing, 'record')} without a unit` : ''),
    `index: ${plural(ix.files, 'file')}, ${plural(ix.entries, 'entry', 'entries')} (${ix.expired} expired)`,
    cp.present
      ? `checkpoint: physic ${time(cp.physicMsgTimestamp)}, logics ${time(cp.logicsMsgTimestamp)}, index ${time(cp.indexMsgTimestamp)}`
      : 'checkpoint: absent',
    r.cleanShutdown ? 'shutdown: clean' : 'shutdown: NOT clean (abort file present: the store is open, or crashed; its next open recovers)',
  ]
  for (const note of r.notes) lines.push(`note: ${note}`)
  const sections: [string, ProblemList][] = [
    ['commit log', cl],
    ['consume queues', cq],
    ['index', ix],
    ['checkpoint', cp],
  ]
  for (const [name, list] of sections) {
    if (list.problems.length === 0) continue
    lines.push(`${name} problems:`)
    for (const p of list.problems) lines.push(problemLine(p))
    if (list.moreProblems > 0) lines.push(`  ... and ${list.moreProblems} more`)
  }
  return `${lines.join('\n')}\n`
}

export const VERIFY_USAGE = `usage: mqstore verify <dir> [--json] [--max-hash-slot-num N --max-index-num N]

Checks a store directory without changing it (safe while another process has it open).
  --json                 print the report as JSON
  --max-hash-slot-num N  the store's index dimensions (both or neither); without them the
  --max-index-num N      embedded (1000000/4000000) and RocketMQ (5000000/20000000) sizes are tried
Exit code: 0 clean, 1 problems found, 2 usage error or not a store.
`

interface Output {
  write(text: string): unknown
  isTTY?: boolean
}

class UsageError extends Error {}

function parseArgs(args: readonly string[]): { dir: string; json: boolean; options: VerifyOptions } | 'help' {
  let dir: string | undefined
  let json = false
  const options: VerifyOptions = {}
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === '-h' || arg === '--help') return 'help'
    if (arg === '--json') {
      json = true
      continue
    }
    const m = /^--(max-hash-slot-num|max-index-num)(?:=(.*))?$/.exec(arg)
    if (m !== null) {
      const text = m[2] ?? args[++i]
      const value = Number(text)
      if (text === undefined || text === '' || !Number.isSafeInteger(value) || value < (m[1] === 'max-index-num' ? 2 : 1)) {
        throw new UsageError(`--${m[1]} needs a positive integer`)
      }
      if (m[1] === 'max-hash-slot-num') options.maxHashSlotNum = value
      else options.maxIndexNum = value
      continue
    }
    if (arg.startsWith('-') && arg !== '-') throw new UsageError(`unknown option ${arg}`)
    if (dir !== undefined) throw new UsageError('only one store directory may be given')
    dir = arg
  }
  if (dir === undefined) throw new UsageError('the store directory is missing')
  if ((options.maxHashSlotNum === undefined) !== (options.maxIndexNum === undefined)) {
    throw new UsageError('give both --max-hash-slot-num and --max-index-num, or neither')
  }
  if (options.maxHashSlotNum !== undefined) {
    try {
      indexFileSize(options.maxHashSlotNum, options.maxIndexNum!)
    } catch (error) {
      throw new UsageError((error as Error).message)
    }
  }
  return { dir, json, options }
}

/** `mqstore verify ...`: returns the exit code. */
export async function runVerify(args: readonly string[], out: Output = process.stdout, err: Output = process.stderr): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs(args)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    err.write(`mqstore verify: ${error.message}\n${VERIFY_USAGE}`)
    return 2
  }
  if (parsed === 'help') {
    out.write(VERIFY_USAGE)
    return 0
  }
  const { dir, json, options } = parsed
  if (!json && err.isTTY === true) {
    options.onProgress = (done, total) => {
      if (total > 0) err.write(`\rverifying: ${Math.floor((done / total) * 100)}%`)
    }
  }
  let report: VerifyReport
  try {
    report = await verifyStore(dir, options)
  } catch (error) {
    if (!(error instanceof NotAStoreError)) throw error
    err.write(`mqstore verify: ${error.message}\n`)
    return 2
  } finally {
    if (options.onProgress !== undefined) err.write('\r\x1b[K')
  }
  out.write(json ? `${JSON.stringify(report, null, 2)}\n` : formatVerifyReport(report))
  return report.ok ? 0 : 1
}
