// One consume queue as a read-only opener sees it. Its end moves as the writer dispatches: a
// refresh reads the units after the known end and takes those that are whole (the writer stores a
// unit's fields one after another, so the newest unit may be half written when read; it counts
// once the record it points at checks out). Its start moves as retention deletes files.
import { Buffer } from 'node:buffer'
import { join } from 'node:path'

import { CQ_STORE_UNIT_SIZE, isBlankUnit, isValidUnit, queueOffsetAt, readUnitOffset, readUnitSize } from '../queue/cq-unit.js'
import type { ReadOnlyCommitLog } from './read-only-log.js'
import { LISTING_MAX_AGE_MS, ReadOnlySegments } from './read-only-segments.js'

/** Units read per step when looking for the queue's end or start. */
const SCAN_UNITS = 4096

export class ReadOnlyQueue {
  readonly files: ReadOnlySegments
  /** The queue offset after the last whole unit known. */
  private end = 0
  /** The first readable queue offset, and the first file and commit-log start it was found for. */
  private start = 0
  private startFor = ''
  /** When the folder was last listed, and the end last read (Date.now()). */
  private listedAt = 0
  private refreshedAt = 0
  private readonly scan = Buffer.alloc(SCAN_UNITS * CQ_STORE_UNIT_SIZE)

  constructor(
    readonly topic: string,
    readonly queueId: number,
    consumeQueueRoot: string,
    private readonly log: ReadOnlyCommitLog,
  ) {
    this.files = new ReadOnlySegments(join(consumeQueueRoot, topic, String(queueId)))
  }

  /** The queue offset after the last unit, read again now. */
  getMaxOffsetInQueue(): number {
    this.refresh()
    return this.end
  }

  /** The first queue offset whose message is still in the commit log (RocketMQ's minLogicOffset). */
  getMinOffsetInQueue(): number {
    this.refresh()
    return this.minOffset(this.log.minOffset())
  }

  /** The queue offset after the last whole unit, as the last refresh found it. */
  get knownEnd(): number {
    return this.end
  }

  /**
   * The first readable queue offset for the listing the last refresh saw and a commit log that
   * starts at `logMin` (found once per change of either: a walk over the units of the first file).
   */
  minOffset(logMin: number): number {
    const first = this.files.segments[0]
    if (first === undefined) return 0
    const key = `${first.id}:${logMin}:${this.end}`
    if (key === this.startFor) return this.start
    let offset = queueOffsetAt(first.offset)
    while (offset < this.end) {
      const units = this.readUnits(offset, Math.min(SCAN_UNITS, this.end - offset))
      if (units.length === 0) break
      let found = -1
      for (let at = 0; at < units.length; at += CQ_STORE_UNIT_SIZE) {
        const phy = readUnitOffset(units, at)
        if (!isBlankUnit(phy, readUnitSize(units, at)) && phy >= logMin) {
          found = offset + at / CQ_STORE_UNIT_SIZE
          break
        }
      }
      if (found >= 0) {
        offset = found
        break
      }
      offset += units.length / CQ_STORE_UNIT_SIZE
    }
    this.start = Math.min(offset, this.end)
    this.startFor = key
    return this.start
  }

  /**
   * Brings the queue up to date for a read of the units before `upTo`, for reads in a row: nothing
   * when those units are known and the end was read within the last LISTING_MAX_AGE_MS, else the
   * end is read again, with the folder listed only when its listing is that old (or the units run
   * past the files listed). A read's answer then counts new units as soon as it reaches them, and
   * files deleted or rebuilt within that time as it last saw them: the units of a deleted file are
   * still read from its open descriptor, as the writer serves a file it is deleting.
   */
  refreshFor(upTo: number, now: number): void {
    if (upTo <= this.end && now - this.refreshedAt < LISTING_MAX_AGE_MS) return
    this.refresh(now - this.listedAt < LISTING_MAX_AGE_MS, now)
  }

  /**
   * The queue's end for the follower's frequent looks: one read of the unit after the known end
   * when the listing is recent, a full refresh when that unit is there (or the listing is old:
   * files rolled, deleted or rebuilt are noticed within LISTING_MAX_AGE_MS).
   */
  peekEnd(now: number): number {
    const segment = this.files.segmentOf(this.end * CQ_STORE_UNIT_SIZE)
    if (segment === null || now - this.listedAt >= LISTING_MAX_AGE_MS) {
      this.refresh()
      return this.end
    }
    const unit = this.files.read(segment, this.end * CQ_STORE_UNIT_SIZE - segment.offset, CQ_STORE_UNIT_SIZE, this.scan)
    if (unit.length === CQ_STORE_UNIT_SIZE && isValidUnit(readUnitOffset(unit, 0), readUnitSize(unit, 0))) this.refresh()
    else if (unit.length < CQ_STORE_UNIT_SIZE) this.refresh()
    return this.end
  }

  /**
   * Reads the units after the known end, after listing the folder again (when it changed), or
   * with `keepListing` on the last listing unless the units run past the files it holds.
   */
  refresh(keepListing = false, now = Date.now()): void {
    this.refreshedAt = now
    let listed = !keepListing || this.files.segments.length === 0
    if (listed) this.list(now)
    const files = this.files
    if (files.segments.length === 0) {
      this.end = 0
      return
    }
    const firstOffset = queueOffsetAt(files.segments[0].offset)
    if (this.end < firstOffset) this.end = firstOffset
    for (let steps = 0; steps < 1 << 16; steps++) {
      const segment = this.files.segmentOf(this.end * CQ_STORE_UNIT_SIZE)
      if (segment === null) return
      const within = this.end * CQ_STORE_UNIT_SIZE - segment.offset
      // Usually nothing new: one unit read tells, before a step's worth is read.
      const first = this.files.read(segment, within, CQ_STORE_UNIT_SIZE, this.scan)
      const more = first.length === CQ_STORE_UNIT_SIZE && isValidUnit(readUnitOffset(first, 0), readUnitSize(first, 0))
      const bytes = more ? this.files.read(segment, within, this.scan.length, this.scan) : first
      let whole = 0
      while (whole + CQ_STORE_UNIT_SIZE <= bytes.length && isValidUnit(readUnitOffset(bytes, whole), readUnitSize(bytes, whole))) {
        whole += CQ_STORE_UNIT_SIZE
      }
      if (whole > 0 && !this.lastUnitWhole(bytes, whole - CQ_STORE_UNIT_SIZE, this.end + whole / CQ_STORE_UNIT_SIZE - 1)) {
        whole -= CQ_STORE_UNIT_SIZE
      }
      this.end += whole / CQ_STORE_UNIT_SIZE
      // A unit that is not (yet) whole ends the data; a full step of whole ones reads on.
      if (whole < bytes.length) return
      if (bytes.length === this.scan.length) continue
      // The file ended: the next one takes over if it starts right there (listed now if the
      // listing was kept and holds no next file: the writer may have rolled since).
      let next = files.segments.find((s) => s.offset > segment.offset)
      if (next === undefined && !listed) {
        listed = true
        if (this.list(now)) continue
        next = files.segments.find((s) => s.offset > segment.offset)
      }
      if (next === undefined || next.offset !== this.end * CQ_STORE_UNIT_SIZE) return
    }
  }

  /** Lists the folder again (when it changed); true when the queue was rebuilt and its end is found again. */
  private list(now: number): boolean {
    this.listedAt = now
    const change = this.files.refresh()
    // Rebuilt by the writer's recovery: find the end again from the first file.
    if (!change.replaced) return false
    this.end = 0
    const first = this.files.segments[0]
    if (first !== undefined) this.end = queueOffsetAt(first.offset)
    return true
  }

  /** The newest unit of a scan counts once its record is all in the commit log (blanks always). */
  private lastUnitWhole(units: Buffer, at: number, queueOffset: number): boolean {
    const phy = readUnitOffset(units, at)
    const size = readUnitSize(units, at)
    if (isBlankUnit(phy, size)) return true
    if (this.log.holdsRecord(phy, size, this.queueId, queueOffset)) return true
    // The log may have rolled to a file not listed yet.
    this.log.refresh()
    return this.log.holdsRecord(phy, size, this.queueId, queueOffset)
  }

  /**
   * The units from `queueOffset` on, up to `count` and no further than the end known at the last
   * refresh, within one file (a private copy); empty when none can be read there.
   */
  readUnits(queueOffset: number, count: number): Buffer {
    const n = Math.min(count, this.end - queueOffset)
    const at = queueOffset * CQ_STORE_UNIT_SIZE
    const segment = this.files.segmentOf(at)
    if (segment === null || n <= 0) return Buffer.alloc(0)
    const bytes = this.files.read(segment, at - segment.offset, n * CQ_STORE_UNIT_SIZE)
    return bytes.subarray(0, bytes.length - (bytes.length % CQ_STORE_UNIT_SIZE))
  }

  /** The start of the file after the one holding `queueOffset` (where a read past a hole resumes). */
  rollNextFile(queueOffset: number): number {
    const at = queueOffset * CQ_STORE_UNIT_SIZE
    const next = this.files.segments.find((s) => s.offset > at)
    return next === undefined ? this.end : queueOffsetAt(next.offset)
  }

  close(): void {
    this.files.close()
  }
}
