// The compaction log of one queue of a compacted topic: an ordered run of CompactionSegments in
// compaction/<topic>/<queueId>/. Dispatch appends every keyed record of the queue to the last
// (active) file; the cleaner replaces older files by cleaned copies; retention (compact,delete)
// deletes the oldest. Queue offsets never change: a read of a removed offset gets the next survivor.
//
// Rewrites go through file names, so that a crash at any point leaves either the old files or the
// new ones visible, never both:
//   <base>.cleaned   a cleaned copy being written (deleted at open)
//   <base>.swap      a finished copy, renamed newest first (kept at open: the swap rolls forward)
//   <base>.deleted   an old file on its way out (deleted at open, or after fileDeleteDelayMs)
import * as fs from 'node:fs'
import { join } from 'node:path'

import { MQStoreError } from '../../errors.js'
import { ensureDirectory, syncDirectory, syncDirectoryAsync } from '../mapped/directory.js'
import { formatOffsetName, parseOffsetName } from '../mapped/segment-name.js'
import { CompactionSegment, MappingBudget, type SegmentLease } from './segment.js'

export const CLEANED_SUFFIX = '.cleaned'
export const SWAP_SUFFIX = '.swap'
export const DELETED_SUFFIX = '.deleted'
const TEMP_SUFFIX = '.tmp'

export interface LogOpenReport {
  /** Files removed by the recovery of an interrupted rewrite (.cleaned, .swap of an unfinished set, .deleted). */
  removed: string[]
  /** .swap files renamed to their final names (a rewrite completed at open). */
  rolledForward: string[]
  /** Files whose scan stopped at bytes that are not a record: what follows is dropped (zeroed in the active file). */
  cutShort: { file: string; position: number; sealed: boolean }[]
}

/**
 * After a crash, the active file's tail is zeroed up to this many zero bytes in a row (a record
 * of RocketMQ's default maxMessageSize fits in that run, so no record starts past it).
 */
const CRASH_TAIL_QUIET_BYTES = 4 * 1024 * 1024 + 64 * 1024

/** Called for each record in order while its file is held; return false to stop. */
export type ReadVisitor = (data: Buffer, position: number, size: number, queueOffset: number, tagsCode: number) => boolean

export class CompactionLog {
  readonly dir: string
  readonly topic: string
  readonly queueId: number
  /** Oldest first; the last one is the active file. */
  readonly segments: CompactionSegment[] = []
  /** Queue offset the next dispatched record must have at least (earlier ones are replays). */
  nextOffset = 0
  /** Files renamed .deleted, with the clock time after which they may be removed. */
  readonly pendingDeletes: { path: string; dueAt: number }[] = []

  /** Shared by the logs of a store: how many sealed files may be open at once, within which bytes budget. */
  readonly budget: MappingBudget

  private constructor(dir: string, topic: string, queueId: number, budget: MappingBudget) {
    this.dir = dir
    this.topic = topic
    this.queueId = queueId
    this.budget = budget
  }

  /** Opens (or creates) the log in `dir`, first finishing or undoing an interrupted rewrite. */
  static open(
    dir: string,
    topic: string,
    queueId: number,
    now: number,
    budget = new MappingBudget(1024),
    afterCrash = false,
  ): { log: CompactionLog; report: LogOpenReport } {
    // Durably: once commit-log retention deleted the records, this log may be their only copy.
    ensureDirectory(dir)
    const report = recoverInterruptedSwap(dir)
    const log = new CompactionLog(dir, topic, queueId, budget)
    const bases = fs
      .readdirSync(dir)
      .map((name) => ({ name, base: parseOffsetName(name) }))
      .filter((f): f is { name: string; base: number } => f.base !== null)
      .sort((a, b) => a.base - b.base)
    try {
      for (const { name, base } of bases) {
        const segment = CompactionSegment.open(join(dir, name), base, now)
        log.segments.at(-1)?.seal(budget)
        log.segments.push(segment)
        // An overlap means a rewrite left both generations behind, which the recovery above
        // excludes; refuse rather than serve a key twice.
        const prev = log.segments.at(-2)
        if (prev !== undefined && prev.count > 0 && segment.baseOffset <= prev.lastOffset()) {
          throw new MQStoreError('CORRUPTION', `${join(dir, name)} overlaps ${prev.path}`)
        }
      }
    } catch (error) {
      log.close()
      throw error
    }
    const last = log.segments.at(-1)
    for (const segment of log.segments) {
      if (segment.cutShortAt >= 0) report.cutShort.push({ file: segment.path, position: segment.cutShortAt, sealed: segment !== last })
    }
    // A crash can leave records past the scan's end that it could not reach (a torn one before
    // them); a record cut short leaves the rest of the file suspect.
    if (last !== undefined && (afterCrash || last.cutShortAt >= 0))
      last.eraseTail(last.cutShortAt >= 0 ? last.capacity : CRASH_TAIL_QUIET_BYTES)
    last?.activate(budget)
    log.nextOffset = log.endNamedByFiles()
    return { log, report }
  }

  /** The end an open derives from the files: past the last file's last record, at least its base. */
  private endNamedByFiles(): number {
    const last = this.segments.at(-1)
    if (last === undefined) return 0
    return Math.max(last.baseOffset, last.count > 0 ? last.lastOffset() + 1 : 0)
  }

  active(): CompactionSegment | null {
    return this.segments.at(-1) ?? null
  }

  /** Bytes of records in all files. */
  sizeBytes(): number {
    let n = 0
    for (const s of this.segments) n += s.bytes
    return n
  }

  recordCount(): number {
    let n = 0
    for (const s of this.segments) n += s.count
    return n
  }

  /**
   * Appends a dispatched record. Replays (offset below nextOffset) are ignored. A record that does
   * not fit in the active file rolls a new one named by its offset, sized for it if it is larger
   * than segmentBytes.
   */
  append(record: Uint8Array, queueOffset: number, storeTimestamp: number, tagsCode: number, segmentBytes: number, now: number): boolean {
    if (queueOffset < this.nextOffset) return false
    let active = this.active()
    if (active === null || !active.append(record, queueOffset, storeTimestamp, tagsCode)) {
      active = this.roll(queueOffset, Math.max(segmentBytes, record.length), now)
      if (!active.append(record, queueOffset, storeTimestamp, tagsCode)) {
        throw new MQStoreError('CORRUPTION', `${active.path}: a fresh file refused a record of ${record.length} bytes`)
      }
    }
    this.nextOffset = queueOffset + 1
    return true
  }

  /** Notes offsets that were dispatched but not kept here (keyless records of a switched topic). */
  skip(queueOffset: number): void {
    if (queueOffset >= this.nextOffset) this.nextOffset = queueOffset + 1
  }

  /**
   * Starts a new active file at `baseOffset` (at least nextOffset). An empty active file is
   * replaced rather than followed, so no two files share a base.
   */
  roll(baseOffset: number, capacity: number, now: number): CompactionSegment {
    const base = Math.max(baseOffset, this.nextOffset)
    const active = this.active()
    if (active !== null) {
      if (active.count === 0 && active.baseOffset <= base) {
        this.segments.pop()
        active.close()
        fs.rmSync(active.path, { force: true })
      } else {
        active.seal(this.budget)
      }
    }
    const segment = CompactionSegment.create(join(this.dir, formatOffsetName(base)), base, capacity, now)
    segment.activate(this.budget)
    this.segments.push(segment)
    return segment
  }

  /** Queue offset of the first record kept, or nextOffset when the log holds none. */
  minOffset(): number {
    for (const s of this.segments) if (s.count > 0) return s.firstOffset()
    return this.nextOffset
  }

  maxOffset(): number {
    return this.nextOffset
  }

  /**
   * Visits records from the first one at or after `fromOffset`, in order, holding each file while
   * its records are visited; with `held`, the files stay held (their leases pushed there) until the
   * caller releases them, for a caller that copies what it visited afterwards. Returns the number
   * visited.
   */
  read(fromOffset: number, visit: ReadVisitor, held?: SegmentLease[]): number {
    let visited = 0
    let i = this.findSegment(fromOffset)
    for (; i < this.segments.length; i++) {
      const segment = this.segments[i]
      if (segment.count === 0 || segment.lastOffset() < fromOffset) continue
      const lease = segment.acquire()
      if (lease === null) continue
      held?.push(lease)
      try {
        const data = lease.data
        for (let k = segment.lowerBound(fromOffset); k < segment.count; k++) {
          visited++
          if (!visit(data, segment.positionAt(k), segment.sizeAt(k), segment.offsetAt(k), segment.tagsCodeAt(k))) return visited
        }
      } finally {
        if (held === undefined) lease.release()
      }
    }
    return visited
  }

  /** Index of the last segment whose base is ≤ offset (0 when the offset is below all of them). */
  private findSegment(offset: number): number {
    let lo = 0
    let hi = this.segments.length - 1
    let found = 0
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      if (this.segments[mid].baseOffset <= offset) {
        found = mid
        lo = mid + 1
      } else {
        hi = mid - 1
      }
    }
    return found
  }

  /** Queue offset of the first record kept that was stored at or after `timestamp`; nextOffset if none. */
  offsetByTime(timestamp: number): number {
    for (const s of this.segments) {
      if (s.count === 0 || s.largestTimestamp < timestamp) continue
      const i = s.firstAtOrAfterTime(timestamp)
      if (i < s.count) return s.offsetAt(i)
    }
    return this.nextOffset
  }

  /** Store time of the record at `queueOffset`, or of the next survivor; -1 when there is none. */
  storeTimeAt(queueOffset: number): number {
    const s = this.segments[this.findSegment(queueOffset)]
    if (s === undefined) return -1
    const i = s.lowerBound(queueOffset)
    if (i < s.count) return s.timestampAt(i)
    const next = this.segments[this.segments.indexOf(s) + 1]
    return next !== undefined && next.count > 0 ? next.timestampAt(0) : -1
  }

  /**
   * Puts `cleaned` (files named `<base>.cleaned`, written and flushed) in place of `old`:
   * 1. rename each cleaned file .cleaned → .swap, newest first, and fsync the directory;
   * 2. rename each old file → .deleted (removed after `deleteDelayMs`);
   * 3. rename each .swap → its final name; fsync the directory.
   * A crash before step 1 completed leaves the old files (the open deletes every .cleaned and the
   * unfinished .swap set); after it, the open finishes steps 2 and 3. The caller holds the queue
   * InProgress throughout, so nothing else renames or deletes these files meanwhile.
   */
  async replaceSegments(cleaned: CompactionSegment[], old: CompactionSegment[], now: number, deleteDelayMs: number): Promise<void> {
    // Renames and directory fsyncs go through the libuv pool so that puts keep running; readers
    // keep using the old files (their mappings outlive the renames) until the list is switched.
    const byNewest = [...cleaned].sort((a, b) => b.baseOffset - a.baseOffset)
    for (const s of byNewest) await s.renameAsync(s.path.slice(0, -CLEANED_SUFFIX.length) + SWAP_SUFFIX)
    await syncDirectoryAsync(join(this.dir, 'x'))
    for (const s of old) await s.renameAsync(join(this.dir, formatOffsetName(s.baseOffset) + DELETED_SUFFIX))
    for (const s of byNewest) await s.renameAsync(join(this.dir, formatOffsetName(s.baseOffset)))
    await syncDirectoryAsync(join(this.dir, 'x'))
    const gone = new Set(old)
    const kept = this.segments.filter((s) => !gone.has(s))
    for (const s of cleaned) s.seal(this.budget)
    kept.push(...cleaned)
    kept.sort((a, b) => a.baseOffset - b.baseOffset)
    this.segments.length = 0
    this.segments.push(...kept)
    for (const s of old) {
      this.pendingDeletes.push({ path: s.path, dueAt: now + deleteDelayMs })
      s.close()
    }
    await this.removeDueFilesAsync(now)
  }

  private async removeDueFilesAsync(now: number): Promise<void> {
    for (let i = this.pendingDeletes.length - 1; i >= 0; i--) {
      const p = this.pendingDeletes[i]
      if (p.dueAt > now) continue
      this.pendingDeletes.splice(i, 1)
      await fs.promises.rm(p.path, { force: true })
    }
  }

  /**
   * Deletes the `n` oldest files (retention of compact,delete; never the active one): renamed
   * .deleted first, removed after `deleteDelayMs`. The log's minimum offset moves past them.
   */
  deleteOldest(n: number, now: number, deleteDelayMs: number): CompactionSegment[] {
    const doomed = this.segments.slice(0, Math.min(n, this.segments.length - 1))
    for (const s of doomed) {
      s.rename(join(this.dir, formatOffsetName(s.baseOffset) + DELETED_SUFFIX))
      this.pendingDeletes.push({ path: s.path, dueAt: now + deleteDelayMs })
      s.close()
    }
    this.segments.splice(0, doomed.length)
    if (doomed.length > 0) syncDirectory(join(this.dir, 'x'))
    this.removeDueFiles(now)
    return doomed
  }

  /** Removes .deleted files whose delay has passed (all of them with `all`). */
  removeDueFiles(now: number, all = false): void {
    for (let i = this.pendingDeletes.length - 1; i >= 0; i--) {
      const p = this.pendingDeletes[i]
      if (!all && p.dueAt > now) continue
      fs.rmSync(p.path, { force: true })
      this.pendingDeletes.splice(i, 1)
    }
  }

  /**
   * Drops every record at or after `queueOffset` (the commit log lost them in a crash and will give
   * those offsets to new messages). The caller holds the queue paused.
   */
  truncateFrom(queueOffset: number, now: number): void {
    while (this.segments.length > 1 && this.segments.at(-1)!.baseOffset >= queueOffset) {
      const s = this.segments.pop()!
      s.close()
      fs.rmSync(s.path, { force: true })
    }
    for (const s of this.segments) s.truncateTo(s.lowerBound(queueOffset))
    this.nextOffset = Math.min(this.nextOffset, queueOffset)
    const active = this.active()
    // The active file must start at or below nextOffset, or the next record would not fit its name.
    if (active !== null && active.baseOffset > this.nextOffset) {
      this.segments.pop()
      active.close()
      fs.rmSync(active.path, { force: true })
    }
    // When the records just below the cut were compacted away, the files kept name a lower end
    // (their last record, or the base of a file the cut emptied), and the next open would take
    // it: a lower max offset than the queue handed out, which nothing restores once retention has
    // deleted the commit-log records in between. An empty file named by the end keeps it (the
    // next record rolls a real file in its place).
    if (this.endNamedByFiles() < this.nextOffset) this.roll(this.nextOffset, 0, now)
    syncDirectory(join(this.dir, 'x'))
  }

  flush(): void {
    this.active()?.flush()
  }

  close(): void {
    for (const s of this.segments) s.close()
    this.removeDueFiles(0, true)
  }

  /** Deletes the log and its directory (the topic left compaction or was deleted). */
  destroy(): void {
    this.close()
    this.segments.length = 0
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/**
 * Startup recovery of an interrupted rewrite (§8.2 of the compaction spec):
 * delete .deleted and .tmp files; delete .swap files at or above the lowest .cleaned base (an
 * unfinished set: swaps are made newest first); delete every .cleaned; delete the old files that
 * the remaining .swap files cover; rename the .swap files to their final names.
 */
export function recoverInterruptedSwap(dir: string): LogOpenReport {
  const report: LogOpenReport = { removed: [], rolledForward: [], cutShort: [] }
  const names = fs.readdirSync(dir)
  const remove = (name: string): void => {
    fs.rmSync(join(dir, name), { force: true })
    report.removed.push(name)
  }
  let minCleaned = Infinity
  const swaps: { name: string; base: number }[] = []
  for (const name of names) {
    if (name.endsWith(DELETED_SUFFIX) || name.endsWith(TEMP_SUFFIX)) {
      remove(name)
      continue
    }
    const cleaned = suffixBase(name, CLEANED_SUFFIX)
    if (cleaned !== null) minCleaned = Math.min(minCleaned, cleaned)
    const swap = suffixBase(name, SWAP_SUFFIX)
    if (swap !== null) swaps.push({ name, base: swap })
  }
  for (const name of names) if (suffixBase(name, CLEANED_SUFFIX) !== null) remove(name)
  const kept = swaps.filter((s) => {
    if (s.base < minCleaned) return true
    remove(s.name)
    return false
  })
  if (kept.length > 0) {
    // The range the swapped-in files cover: from their lowest base to past their last record.
    let from = Infinity
    let to = -Infinity
    for (const s of kept) {
      from = Math.min(from, s.base)
      const seg = CompactionSegment.open(join(dir, s.name), s.base, 0)
      to = Math.max(to, s.base + 1, seg.count > 0 ? seg.lastOffset() + 1 : 0)
      seg.close()
    }
    const swapNames = new Set(kept.map((s) => formatOffsetName(s.base)))
    for (const name of names) {
      const base = parseOffsetName(name)
      if (base !== null && base >= from && base < to && !swapNames.has(name)) remove(name)
    }
    for (const s of kept.sort((a, b) => a.base - b.base)) {
      fs.renameSync(join(dir, s.name), join(dir, formatOffsetName(s.base)))
      report.rolledForward.push(s.name)
    }
  }
  if (report.removed.length > 0 || report.rolledForward.length > 0) syncDirectory(join(dir, 'x'))
  return report
}

function suffixBase(name: string, suffix: string): number | null {
  return name.endsWith(suffix) ? parseOffsetName(name.slice(0, -suffix.length)) : null
}
