// One getMessage of a compacted queue: which of the copies a compaction log visits in queue-offset
// order it takes into its read batch, and where the next read starts. The writer (mapped files) and
// a read-only opener (pread) visit their copies differently and share this.
import type { Buffer } from 'node:buffer'

import { getInt64 } from '../bytes.js'
import { MIN_RECORD_LENGTH, OFFSET_PHYSICALOFFSET, OFFSET_TOTALSIZE, tagsMatch } from '../commitlog/record.js'
import type { BatchOutcome, ReadBatch } from '../read/read-batch.js'
import { hasTagIn } from '../read/record-bytes.js'
import { isRecordOf, type QueuePlace } from '../read/record-identity.js'

/** Copies a read steps over for its tag filter before it answers (RocketMQ's 16,000 bytes of units). */
export const MAX_SKIPPED_PER_READ = 800

export interface CompactedReadLimits {
  maxMsgNums: number
  /** No more than this many bytes once one copy is taken. */
  maxBytes: number
  tags: string[] | undefined
}

export class CompactedRead {
  /** The offset after the last copy visited: where the next read starts. */
  next = 0
  private skipped = 0
  private count = 0
  private bytes = 0
  private limits: CompactedReadLimits = { maxMsgNums: 0, maxBytes: 0, tags: undefined }

  /**
   * `place` names the queue read (its queue offset is set per copy); `holds(phy, queueOffset)`, when
   * given, says whether a copy naming commit-log position `phy` may be served (the writer checks
   * the consume queue's unit), and `damaged` hears of a copy whose header names another record.
   */
  constructor(
    private readonly batch: ReadBatch,
    private readonly place: QueuePlace,
    private readonly holds: ((phy: number, queueOffset: number) => boolean) | null = null,
    private readonly damaged: ((queueOffset: number) => void) | null = null,
  ) {}

  /** Starts a read from `fromOffset` (the batch is begun too). */
  begin(fromOffset: number, limits: CompactedReadLimits): void {
    this.next = fromOffset
    this.skipped = 0
    this.count = 0
    this.bytes = 0
    this.limits = limits
    this.batch.begin()
  }

  /** Whether the read goes on to a copy of `size` bytes. */
  wants(size: number): boolean {
    return this.count < this.limits.maxMsgNums && (this.count === 0 || this.bytes + size <= this.limits.maxBytes)
  }

  /**
   * Visits the copy of `queueOffset` at `position` of `data` (`dv` a view of it): taken when it is
   * whole, the copy of that queue offset (and may be served), with one of the read's tags. False
   * when the read ends (it is full, or its filter stepped over enough copies).
   */
  visit(data: Buffer, dv: DataView, position: number, size: number, queueOffset: number, tagsCode: number): boolean {
    if (!this.wants(size)) return false
    this.next = queueOffset + 1
    const tags = this.limits.tags
    if (!tagsMatch(tags, tagsCode)) return ++this.skipped < MAX_SKIPPED_PER_READ
    if (position < 0 || position + MIN_RECORD_LENGTH > data.length) return true
    const batch = this.batch
    const phy = getInt64(dv, position + OFFSET_PHYSICALOFFSET)
    if (!batch.locateIn(data, dv, position, phy, null) || dv.getInt32(position + OFFSET_TOTALSIZE) !== size) return true
    this.place.queueOffset = queueOffset
    if (!isRecordOf(data, dv, position, this.place, batch.fields) || (this.holds !== null && !this.holds(phy, queueOffset))) {
      this.damaged?.(queueOffset)
      return true
    }
    const fields = batch.fields
    if (tags !== undefined && !hasTagIn(data, fields.propertiesAt, fields.propertiesAt + fields.propertiesLength, tags)) {
      return ++this.skipped < MAX_SKIPPED_PER_READ
    }
    batch.take(null)
    this.count++
    this.bytes += size
    return true
  }

  /** Copies and checks what was taken (ReadBatch.finish). */
  finish(): BatchOutcome {
    return this.batch.finish()
  }
}
