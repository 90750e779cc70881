// Compacted topics as a read-only opener sees them: which topics are compacted (the writer's
// config/topics.json), and each compacted queue's compaction log (compaction/<topic>/<queueId>/),
// read as the writer reads it: records in queue-offset order, a removed offset reading as the next
// survivor. The writer swaps cleaned copies in under the same names (a new inode): a file is
// indexed once per inode, the active one as far as it is written, and a swap is seen at the next
// listing. A record is indexed only once whole, its body CRC checked (the writer copies records
// into the active file while this process may read it).
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'

import { checkRecord } from '../commitlog/record.js'
import type { CompactedRead, CompactedReadLimits } from '../compaction/compacted-read.js'
import type { BatchOutcome } from '../read/read-batch.js'
import { parseLenientJson } from '../consumer-offsets.js'
import { LISTING_MAX_AGE_MS, ReadOnlySegments, type ReadOnlySegment } from './read-only-segments.js'

/** How long a reading of config/topics.json stands before the file is looked at again. */
const TOPICS_MAX_AGE_MS = 50
/** Bytes read per step when indexing a compaction-log file. */
const SCAN_BYTES = 256 * 1024
/** A read takes the records that follow one another in a file with one pread of up to this much. */
const READ_RUN_BYTES = 128 * 1024

/** What is known of one file (one inode, by ReadOnlySegment.id): its records, as far as they were indexed. */
interface FileRecords {
  offsets: number[]
  positions: number[]
  sizes: number[]
  times: number[]
  tagsCodes: number[]
  /** Bytes indexed: the next record is read from here. */
  scannedTo: number
  /** Indexed to its end after a later file appeared: it gains no more records. */
  sealed: boolean
}

export class ReadOnlyCompactionLog {
  readonly files: ReadOnlySegments
  private readonly records = new Map<string, FileRecords>()
  private readonly probe = Buffer.alloc(4)
  /** When refresh() last ran (Date.now()). */
  private refreshedAt = 0
  /** The queue's consume-queue end (see reportedEnd), read at its first use after a refresh. */
  private queueEnd = 0
  private queueEndStale = true

  /**
   * `readQueueEnd`: the queue's consume-queue end. The log keeps no record for some offsets its
   * queue handed out (keyless records), and its files name only what they hold: the queue's end is
   * the end this log reports (reportedEnd), as the writer's is.
   */
  constructor(
    dir: string,
    private readonly readQueueEnd: () => number = () => 0,
  ) {
    this.files = new ReadOnlySegments(dir)
  }

  /** Lists the folder again if it changed, and indexes what the active file gained. */
  refresh(now = Date.now()): void {
    this.refreshedAt = now
    // Read when a caller asks for the reported end, not here: the follower's polls refresh the log
    // and read maxOffset() alone.
    this.queueEndStale = true
    if (this.files.refresh().changed) {
      const live = new Set(this.files.segments.map((s) => s.id))
      for (const id of this.records.keys()) if (!live.has(id)) this.records.delete(id)
    }
    const segments = this.files.segments
    // Only the last file grows; an older one is indexed to its end once, after the next appeared.
    for (let i = 0; i < segments.length; i++) {
      const known = this.index(segments[i])
      if (i < segments.length - 1) known.sealed = true
    }
  }

  /**
   * refresh() for a read of the records before `upTo`, in a row of reads: skipped when those are
   * known and the last refresh was less than LISTING_MAX_AGE_MS ago (a swap by the cleaner is then
   * seen that much later; the replaced files still read from the descriptors held).
   */
  refreshFor(upTo: number, now: number): void {
    if (upTo <= this.maxOffset() && now - this.refreshedAt < LISTING_MAX_AGE_MS) return
    this.refresh(now)
  }

  /** What is known of a file's records, as the last refresh indexed them. */
  private known(segment: ReadOnlySegment): FileRecords {
    let known = this.records.get(segment.id)
    if (known === undefined) {
      known = { offsets: [], positions: [], sizes: [], times: [], tagsCodes: [], scannedTo: 0, sealed: false }
      this.records.set(segment.id, known)
    }
    return known
  }

  /** Indexes what the file gained since it was last looked at (nothing once it is sealed). */
  private index(segment: ReadOnlySegment): FileRecords {
    const known = this.known(segment)
    if (known.sealed) return known
    // The active file is preallocated: a zero length where the next record would start (or the
    // file's end) means nothing new, told by one small read instead of a step's worth of zeros.
    const probe = this.files.read(segment, known.scannedTo, 4, this.probe)
    if (probe.length < 4 || probe.readInt32BE(0) <= 0) return known
    for (let steps = 0; steps < 1 << 16; steps++) {
      const chunk = this.files.read(segment, known.scannedTo, SCAN_BYTES)
      let pos = 0
      let last = known.offsets.length === 0 ? segment.offset - 1 : known.offsets[known.offsets.length - 1]
      while (pos < chunk.length) {
        const r = checkRecord(chunk, pos, chunk.length, true)
        if (r.status !== 'OK' || r.queueOffset <= last) break
        known.offsets.push(r.queueOffset)
        known.positions.push(known.scannedTo + pos)
        known.sizes.push(r.size)
        known.times.push(r.storeTimestamp)
        known.tagsCodes.push(r.tagsCode)
        last = r.queueOffset
        pos += r.size
      }
      known.scannedTo += pos
      // A record cut by the step's end is read again from its start; anything else ends the data.
      if (pos === 0 || chunk.length < SCAN_BYTES) break
    }
    return known
  }

  /** The first surviving offset (the end when none survives), as of the last refresh. */
  minOffset(): number {
    for (const segment of this.files.segments) {
      const known = this.known(segment)
      if (known.offsets.length > 0) return known.offsets[0]
    }
    return this.maxOffset()
  }

  /** The offset after the last record (the last file's base when it is still empty), as of the last refresh. */
  maxOffset(): number {
    const segments = this.files.segments
    const last = segments[segments.length - 1]
    if (last === undefined) return 0
    const known = this.known(last)
    const lastOffset = known.offsets.length === 0 ? -1 : known.offsets[known.offsets.length - 1]
    return Math.max(last.offset, lastOffset + 1)
  }

  /**
   * The queue's end as it is reported (max offset, a read's status): maxOffset(), or the consume
   * queue's end when that is higher. Reads and the follower's wake-ups keep to maxOffset(): from
   * here the units past it may be records the writer is still copying into the log (it writes the
   * unit first), which a read must wait for rather than step over.
   */
  reportedEnd(): number {
    if (this.queueEndStale) {
      this.queueEnd = this.readQueueEnd()
      this.queueEndStale = false
    }
    return Math.max(this.maxOffset(), this.queueEnd)
  }

  /**
   * Visits the records from the first at or after `fromOffset`, in order, until `visit` returns
   * false: each at `position` of `data` (`dv` a view of it), a private copy made by one pread for
   * each run of records that follow one another in a file (up to READ_RUN_BYTES, and `runRecords`
   * records: what the caller expects to take). Before a run is read, `wants` is asked whether the
   * read goes on to a record of its first record's size. The copies stay as they are after the
   * visit, so a caller may keep them until the read ends.
   */
  read(
    fromOffset: number,
    visit: (data: Buffer, dv: DataView, position: number, size: number, queueOffset: number, tagsCode: number) => boolean,
    runRecords = Number.POSITIVE_INFINITY,
    wants: (size: number) => boolean = () => true,
  ): void {
    const segments = this.files.segments
    let start = 0
    for (let i = 0; i < segments.length; i++) if (segments[i].offset <= fromOffset) start = i
    for (let i = start; i < segments.length; i++) {
      const known = this.known(segments[i])
      const { positions, sizes } = known
      for (let k = lowerBound(known.offsets, fromOffset); k < known.offsets.length; ) {
        if (!wants(sizes[k])) return
        // The run: the records from k on that follow one another, within READ_RUN_BYTES.
        const runAt = positions[k]
        let end = k + 1
        while (end < positions.length && end - k < runRecords && positions[end] === positions[end - 1] + sizes[end - 1]) {
          if (positions[end] + sizes[end] - runAt > READ_RUN_BYTES) break
          end++
        }
        const want = positions[end - 1] + sizes[end - 1] - runAt
        const data = this.files.read(segments[i], runAt, want, Buffer.allocUnsafeSlow(want))
        const dv = new DataView(data.buffer, data.byteOffset, data.length)
        for (; k < end; k++) {
          const position = positions[k] - runAt
          // Fewer bytes than indexed: the file was swapped or cut under the read.
          if (position + sizes[k] > data.length) return
          if (!visit(data, dv, position, sizes[k], known.offsets[k], known.tagsCodes[k])) return
        }
      }
    }
  }

  /**
   * A getMessage of this queue from `fromOffset`, as the writer reads a compacted queue (`read`
   * takes the copies: see compaction/compacted-read.ts). `next` is the offset after the last copy
   * visited, the end when nothing at or after `fromOffset` survives.
   */
  readMessages(read: CompactedRead, fromOffset: number, limits: CompactedReadLimits): { outcome: BatchOutcome; next: number } {
    read.begin(fromOffset, limits)
    this.read(
      fromOffset,
      (data, dv, position, size, queueOffset, tagsCode) => read.visit(data, dv, position, size, queueOffset, tagsCode),
      limits.maxMsgNums,
      (size) => read.wants(size),
    )
    const outcome = read.finish()
    // Nothing at or past fromOffset: the next read starts at the end, or where this one did when
    // it asked past the end (a keyless tail the consume queue reports, see reportedEnd).
    const next = read.next === fromOffset && outcome.messages.length === 0 ? Math.max(fromOffset, this.maxOffset()) : read.next
    return { outcome, next }
  }

  /** Store time of the record at `queueOffset` (exactly), -1 when it is not kept. */
  storeTimeAt(queueOffset: number): number {
    for (const segment of this.files.segments) {
      const known = this.known(segment)
      const k = lowerBound(known.offsets, queueOffset)
      if (k < known.offsets.length && known.offsets[k] === queueOffset) return known.times[k]
    }
    return -1
  }

  /** The first kept offset stored at or after `timestamp`; the end when every record is older. */
  offsetByTime(timestamp: number): number {
    for (const segment of this.files.segments) {
      const known = this.known(segment)
      for (let k = 0; k < known.times.length; k++) if (known.times[k] >= timestamp) return known.offsets[k]
    }
    return this.maxOffset()
  }

  close(): void {
    this.files.close()
    this.records.clear()
  }
}

function lowerBound(values: readonly number[], target: number): number {
  let lo = 0
  let hi = values.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (values[mid] < target) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** A topic as config/topics.json records it. */
export interface TopicEntry {
  readQueueNums: number
  writeQueueNums: number
  compacted: boolean
}

/**
 * The writer's config/topics.json (topics created or configured, and which are compacted), read
 * again when the file changes.
 */
export class TopicsFile {
  private stamp = ''
  private entries = new Map<string, TopicEntry>()
  private lookedAt = Number.NEGATIVE_INFINITY

  constructor(private readonly topicsFile: string) {}

  entry(topic: string): TopicEntry | undefined {
    this.refresh()
    return this.entries.get(topic)
  }

  isCompacted(topic: string): boolean {
    return this.entry(topic)?.compacted === true
  }

  topics(): string[] {
    this.refresh()
    return [...this.entries.keys()]
  }

  private refresh(): void {
    // At most one look a few milliseconds: the follower asks at every tick, and topic settings
    // change rarely.
    const now = Date.now()
    if (now - this.lookedAt < TOPICS_MAX_AGE_MS) return
    this.lookedAt = now
    const st = fs.statSync(this.topicsFile, { bigint: true, throwIfNoEntry: false })
    const stamp = st === undefined ? 'missing' : `${st.ino}:${st.mtimeNs}:${st.size}`
    if (stamp === this.stamp) return
    this.stamp = stamp
    const entries = new Map<string, TopicEntry>()
    try {
      const parsed = parseLenientJson(fs.readFileSync(this.topicsFile, 'utf8')) as {
        topicConfigTable?: Record<string, { cleanupPolicy?: unknown; readQueueNums?: unknown; writeQueueNums?: unknown }>
      }
      for (const [name, entry] of Object.entries(parsed?.topicConfigTable ?? {})) {
        const policy = entry?.cleanupPolicy
        entries.set(name, {
          readQueueNums: queueCount(entry?.readQueueNums),
          writeQueueNums: queueCount(entry?.writeQueueNums),
          compacted: typeof policy === 'string' && policy.split(',').includes('compact'),
        })
      }
    } catch {
      // Missing, or caught between the writer's write and rename: the last reading stands.
      if (stamp !== 'missing') {
        this.stamp = ''
        return
      }
    }
    this.entries = entries
  }
}

function queueCount(value: unknown): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0
}

/** The compaction log folder of one queue. */
export function compactionLogDir(compactionRoot: string, topic: string, queueId: number): string {
  return join(compactionRoot, topic, String(queueId))
}
