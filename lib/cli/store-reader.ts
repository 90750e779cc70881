// A read-only view of a store directory for the CLI's inspect, tail, get and stats.
//
// Like verify, it takes no lock and opens every file read-only with plain positioned reads (no
// mapping, nothing created or written), so it works on a store another process has open. What it
// reads of a live store's tail is a snapshot: the writer may have appended since.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'

import { decodeMessage, BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MIN_RECORD_LENGTH, type DecodedMessage } from '../store/commitlog/record.js'
import { EMBEDDED_DEFAULTS, ROCKETMQ_SIZES } from '../store/config.js'
import { parseLenientJson } from '../store/consumer-offsets.js'
import {
  effectiveIndexCount,
  HASH_SLOT_SIZE,
  hashSlotPosition,
  INDEX_ENTRY_SIZE,
  INDEX_HEADER_SIZE,
  indexEntryPosition,
  indexKeyHash,
  isIndexFileName,
  readIndexEntry,
  readIndexHeader,
} from '../store/index/index-layout.js'
import { parseOffsetName } from '../store/mapped/segment-name.js'
import {
  CQ_BLANK_UNIT_SIZE,
  CQ_STORE_UNIT_SIZE,
  isEndUnit,
  isValidUnit,
  queueOffsetAt,
  readUnitOffset,
  readUnitSize,
  readUnitTagsCode,
} from '../store/queue/cq-unit.js'
import { CHECKPOINT_TIMESTAMPS_SIZE, decodeCheckpointTimestamps } from '../store/store-checkpoint.js'
import { StorePaths } from '../store/store-paths.js'
import { CliError, EXIT } from './frame.js'

const WALK_CHUNK = 4 * 1024 * 1024
/** A record longer than this is damage (maxMessageSize is at most a few MiB plus headroom). */
const MAX_RECORD_LENGTH = 64 * 1024 * 1024

export interface Segment {
  name: string
  path: string
  /** Start offset (the file's name). */
  offset: number
  size: number
  /** Bytes the file occupies on disk (sparse or preallocated files differ from `size`). */
  allocated: number
}

export interface Unit {
  /** Queue offset of the unit. */
  queueOffset: number
  commitLogOffset: number
  size: number
  tagsCode: number
}

export interface QueueRef {
  topic: string
  queueId: number
  segments: Segment[]
}

function listNames(path: string): string[] {
  try {
    return fs.readdirSync(path).sort()
  } catch {
    return []
  }
}

function listSegments(dir: string): Segment[] {
  const segments: Segment[] = []
  for (const name of listNames(dir)) {
    const offset = parseOffsetName(name)
    if (offset === null) continue
    const path = join(dir, name)
    const st = fs.statSync(path)
    if (!st.isFile()) continue
    segments.push({ name, path, offset, size: st.size, allocated: st.blocks * 512 })
  }
  return segments.sort((a, b) => a.offset - b.offset)
}

export class StoreReader implements Disposable {
  readonly paths: StorePaths
  commitLog: Segment[]
  private readonly fds = new Map<string, number>()
  private commitLogEnd: number | null = null

  private constructor(readonly dir: string) {
    this.paths = new StorePaths(dir)
    this.commitLog = listSegments(this.paths.commitLog)
  }

  /** Opens `dir` read-only; a missing directory or one without a commitlog/ folder is a usage error. */
  static open(dir: string): StoreReader {
    let st: fs.Stats
    try {
      st = fs.statSync(dir)
    } catch {
      throw new CliError(`${dir}: no such directory`, EXIT.USAGE)
    }
    if (!st.isDirectory()) throw new CliError(`${dir}: not a directory`, EXIT.USAGE)
    const paths = new StorePaths(dir)
    if (!fs.existsSync(paths.commitLog)) throw new CliError(`${dir}: not a store directory (no commitlog/ folder)`, EXIT.USAGE)
    return new StoreReader(dir)
  }

  private fd(path: string): number {
    let fd = this.fds.get(path)
    if (fd === undefined) {
      fd = fs.openSync(path, 'r')
      this.fds.set(path, fd)
    }
    return fd
  }

  private read(path: string, position: number, length: number): Buffer {
    const buf = Buffer.alloc(length)
    let done = 0
    while (done < length) {
      const n = fs.readSync(this.fd(path), buf, done, length - done, position + done)
      if (n <= 0) break
      done += n
    }
    return done === length ? buf : buf.subarray(0, done)
  }

  close(): void {
    for (const fd of this.fds.values()) fs.closeSync(fd)
    this.fds.clear()
  }

  [Symbol.dispose](): void {
    this.close()
  }

  // ---- commit log ----------------------------------------------------------------------------

  /** Offset of the first byte still in the commit log (0 for an empty log). */
  get minPhyOffset(): number {
    return this.commitLog[0]?.offset ?? 0
  }

  /**
   * Where the commit log's data ends: the last file is walked record by record (headers only)
   * up to the first bytes that are not a record. A full last file ends at its end.
   */
  get maxPhyOffset(): number {
    if (this.commitLogEnd === null) this.commitLogEnd = this.walkLastFile()
    return this.commitLogEnd
  }

  private walkLastFile(): number {
    // The writer may have created the next file before writing to it: an empty last file sends
    // the walk back to the one before, whose blank tail (if it is full) ends where this one starts.
    for (let i = this.commitLog.length - 1; i >= 0; i--) {
      const file = this.commitLog[i]
      const end = this.walkFile(file)
      if (end > 0 || i === 0) return file.offset + end
    }
    return 0
  }

  /** Bytes of data at the start of `file`: the whole file when a blank record closes it. */
  private walkFile(file: Segment): number {
    let pos = 0
    let chunk: Buffer = Buffer.alloc(0)
    let chunkAt = 0
    while (pos + 8 <= file.size) {
      if (pos < chunkAt || pos + 8 > chunkAt + chunk.length) {
        chunkAt = pos
        chunk = this.read(file.path, pos, Math.min(WALK_CHUNK, file.size - pos))
        if (chunk.length < 8) break
      }
      const size = chunk.readInt32BE(pos - chunkAt)
      const magic = chunk.readInt32BE(pos - chunkAt + 4)
      if (magic === BLANK_MAGIC_CODE) return file.size
      if (magic !== MESSAGE_MAGIC_CODE || size < MIN_RECORD_LENGTH || pos + size > file.size) break
      pos += size
    }
    return pos
  }

  private maxListedOffset(): number {
    const last = this.commitLog[this.commitLog.length - 1]
    return last === undefined ? 0 : last.offset + last.size
  }

  private segmentOf(segments: Segment[], offset: number): Segment | null {
    let lo = 0
    let hi = segments.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const s = segments[mid]
      if (offset < s.offset) hi = mid - 1
      else if (offset >= s.offset + s.size) lo = mid + 1
      else return s
    }
    return null
  }

  /** The message whose record starts at commit-log `offset`, or null when there is none there. */
  readMessage(offset: number): DecodedMessage | null {
    let segment = this.segmentOf(this.commitLog, offset)
    if (segment === null && offset >= this.maxListedOffset()) {
      // A live store may have started a new file since the listing: list again.
      this.commitLog = listSegments(this.paths.commitLog)
      this.commitLogEnd = null
      segment = this.segmentOf(this.commitLog, offset)
    }
    if (segment === null) return null
    const at = offset - segment.offset
    const head = this.read(segment.path, at, 8)
    if (head.length < 8 || head.readInt32BE(4) !== MESSAGE_MAGIC_CODE) return null
    const size = head.readInt32BE(0)
    if (size < MIN_RECORD_LENGTH || size > MAX_RECORD_LENGTH || at + size > segment.size) return null
    return decodeMessage(this.read(segment.path, at, size), 0, false)
  }

  /** Store time of the record at `offset`, -1 when unreadable. */
  storeTimestamp(offset: number): number {
    return this.readMessage(offset)?.storeTimestamp ?? -1
  }

  // ---- consume queues ------------------------------------------------------------------------

  /** Every consume queue, by topic then queue id. */
  queues(): QueueRef[] {
    const refs: QueueRef[] = []
    for (const topic of listNames(this.paths.consumeQueues)) {
      const ids = listNames(this.paths.consumeQueueTopic(topic))
        .filter((name) => /^\d+$/.test(name))
        .map(Number)
        .sort((a, b) => a - b)
      for (const queueId of ids) refs.push(this.queue(topic, queueId))
    }
    return refs
  }

  queue(topic: string, queueId: number): QueueRef {
    return { topic, queueId, segments: listSegments(this.paths.consumeQueue(topic, queueId)) }
  }

  topics(): string[] {
    return listNames(this.paths.consumeQueues).filter((name) => fs.statSync(join(this.paths.consumeQueues, name)).isDirectory())
  }

  /** Units written in one file: the units before its first all-zero unit (found by bisection). */
  private unitsIn(segment: Segment): number {
    let lo = 0
    let hi = Math.floor(segment.size / CQ_STORE_UNIT_SIZE)
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      const unit = this.read(segment.path, mid * CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
      if (unit.length === CQ_STORE_UNIT_SIZE && !isEndUnit(readUnitOffset(unit, 0), readUnitSize(unit, 0), readUnitTagsCode(unit, 0)))
        lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** The queue offset after the last unit (0 for an empty queue). */
  maxOffset(queue: QueueRef): number {
    for (let i = queue.segments.length - 1; i >= 0; i--) {
      const s = queue.segments[i]
      const units = this.unitsIn(s)
      if (units > 0 || i === 0) return queueOffsetAt(s.offset) + units
    }
    return 0
  }

  /**
   * The first queue offset still readable: the first unit of the first file that is neither a
   * pre-fill blank nor pointing below the commit log's first file.
   */
  minOffset(queue: QueueRef): number {
    const max = this.maxOffset(queue)
    const first = queue.segments[0]
    if (first === undefined) return 0
    let offset = queueOffsetAt(first.offset)
    const minPhy = this.minPhyOffset
    while (offset < max) {
      const batch = this.readUnits(queue, offset, Math.min(1024, max - offset))
      if (batch.length === 0) break
      for (const unit of batch) {
        if (unit.size !== CQ_BLANK_UNIT_SIZE && unit.commitLogOffset >= minPhy) return unit.queueOffset
      }
      offset += batch.length
    }
    return max
  }

  /** Up to `count` units from `queueOffset` on (fewer at a file's end or the data's end). */
  readUnits(queue: QueueRef, queueOffset: number, count: number): Unit[] {
    const at = queueOffset * CQ_STORE_UNIT_SIZE
    const segment = this.segmentOf(queue.segments, at)
    if (segment === null || count <= 0) return []
    const within = at - segment.offset
    const length = Math.min(count * CQ_STORE_UNIT_SIZE, segment.size - within)
    const buf = this.read(segment.path, within, length)
    const units: Unit[] = []
    for (let pos = 0; pos + CQ_STORE_UNIT_SIZE <= buf.length; pos += CQ_STORE_UNIT_SIZE) {
      const commitLogOffset = readUnitOffset(buf, pos)
      const size = readUnitSize(buf, pos)
      if (!isValidUnit(commitLogOffset, size)) break
      units.push({ queueOffset: queueOffset + units.length, commitLogOffset, size, tagsCode: readUnitTagsCode(buf, pos) })
    }
    return units
  }

  /**
   * The first queue offset in [min, max) whose message was stored at or after `timestamp` (by
   * bisection over store times, which grow along a queue); `max` when every message is older.
   */
  offsetByTime(queue: QueueRef, timestamp: number, min: number, max: number): number {
    let lo = min
    let hi = max
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2)
      const [unit] = this.readUnits(queue, mid, 1)
      const time = unit === undefined ? -1 : this.storeTimestamp(unit.commitLogOffset)
      if (time >= 0 && time < timestamp) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  // ---- index ---------------------------------------------------------------------------------

  indexFiles(): Segment[] {
    return listNames(this.paths.index)
      .filter(isIndexFileName)
      .map((name) => {
        const path = join(this.paths.index, name)
        const st = fs.statSync(path)
        return { name, path, offset: 0, size: st.size, allocated: st.blocks * 512 }
      })
  }

  /** Entries written in an index file (its header's indexCount - 1), 0 when unreadable. */
  indexEntries(file: Segment): number {
    const header = this.read(file.path, 0, INDEX_HEADER_SIZE)
    if (header.length < INDEX_HEADER_SIZE) return 0
    return effectiveIndexCount(readIndexHeader(new DataView(header.buffer, header.byteOffset, header.byteLength)).indexCount) - 1
  }

  /**
   * Commit-log offsets of the messages of `topic` carrying `key` (in KEYS or as UNIQ_KEY), found
   * through the index files, oldest first. Null when no index file's dimensions can be told from
   * its size (the caller then scans the topic's queues).
   */
  lookupKey(topic: string, key: string, dims: { maxHashSlotNum: number; maxIndexNum: number }[] = []): number[] | null {
    const hash = indexKeyHash(`${topic}#${key}`)
    const found = new Set<number>()
    for (const file of this.indexFiles()) {
      const slots = slotCount(file.size, dims)
      if (slots === null) return null
      const entries = this.indexEntries(file)
      let entry = this.read(file.path, hashSlotPosition(hash, slots), HASH_SLOT_SIZE).readInt32BE(0)
      // A chain never has more links than entries; the bound keeps a damaged chain from looping.
      for (let steps = 0; entry > 0 && entry <= entries && steps <= entries; steps++) {
        const buf = this.read(file.path, indexEntryPosition(entry, slots), INDEX_ENTRY_SIZE)
        if (buf.length < INDEX_ENTRY_SIZE) break
        const decoded = readIndexEntry(new DataView(buf.buffer, buf.byteOffset, buf.byteLength), 0)
        if (decoded.keyHash === hash) found.add(decoded.phyOffset)
        entry = decoded.prevIndex
      }
    }
    return [...found].sort((a, b) => a - b)
  }

  // ---- config, checkpoint, shutdown state ----------------------------------------------------

  /** config/consumerOffset.json (or its .bak): committed offset per group, topic and queue. */
  consumerOffsets(): { group: string; topic: string; queueId: number; offset: number }[] {
    for (const path of [this.paths.consumerOffsets, `${this.paths.consumerOffsets}.bak`]) {
      let parsed: unknown
      try {
        parsed = parseLenientJson(fs.readFileSync(path, 'utf8'))
      } catch {
        continue
      }
      const table = (parsed as { offsetTable?: Record<string, Record<string, unknown>> })?.offsetTable ?? {}
      const rows = []
      for (const [name, queues] of Object.entries(table)) {
        const at = name.lastIndexOf('@')
        if (at <= 0) continue
        for (const [queueId, offset] of Object.entries(queues ?? {})) {
          rows.push({ topic: name.slice(0, at), group: name.slice(at + 1), queueId: Number(queueId), offset: Number(offset) })
        }
      }
      return rows.sort((a, b) => a.group.localeCompare(b.group) || a.topic.localeCompare(b.topic) || a.queueId - b.queueId)
    }
    return []
  }

  /** The checkpoint's three timestamps, or null when the file is missing or short. */
  checkpoint(): { physicMsgTimestamp: number; logicsMsgTimestamp: number; indexMsgTimestamp: number } | null {
    if (!fs.existsSync(this.paths.checkpoint)) return null
    const buf = this.read(this.paths.checkpoint, 0, CHECKPOINT_TIMESTAMPS_SIZE)
    if (buf.length < CHECKPOINT_TIMESTAMPS_SIZE) return null
    return decodeCheckpointTimestamps(buf)
  }

  /** True when the abort file is absent: the last process closed the store cleanly. */
  lastShutdownClean(): boolean {
    return !fs.existsSync(this.paths.abort)
  }

  /**
   * Whether a process holds the store's lock now, read from /proc/locks (Linux) without touching
   * the lock; null where that cannot be told.
   */
  lockedByAnotherProcess(): boolean | null {
    let locks: string
    let inode: number
    try {
      inode = fs.statSync(this.paths.lock).ino
    } catch {
      return false
    }
    try {
      locks = fs.readFileSync('/proc/locks', 'utf8')
    } catch {
      return null
    }
    // Lines look like "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; the inode is the last
    // colon-separated part of the sixth field.
    for (const line of locks.split('\n')) {
      const fields = line.trim().split(/\s+/)
      const device = fields[fields[1] === '->' ? 6 : 5]
      if (fields.includes('FLOCK') && device !== undefined && Number(device.split(':')[2]) === inode) return true
    }
    return false
  }
}

/**
 * The file sizes a store was created with, told from its files (a store directory does not record
 * its configuration): what `MessageStore.open` needs to open it again.
 */
export function sizesOf(reader: StoreReader): {
  mappedFileSizeCommitLog?: number
  mappedFileSizeConsumeQueue?: number
  maxHashSlotNum?: number
  maxIndexNum?: number
} {
  const sizes: ReturnType<typeof sizesOf> = {}
  const log = reader.commitLog[0]
  if (log !== undefined) sizes.mappedFileSizeCommitLog = log.size
  const queue = reader.queues().find((q) => q.segments.length > 0)
  if (queue !== undefined) sizes.mappedFileSizeConsumeQueue = queue.segments[0].size
  const index = reader.indexFiles()[0]
  const slots = index === undefined ? null : slotCount(index.size, [])
  if (index !== undefined && slots !== null) {
    sizes.maxHashSlotNum = slots
    sizes.maxIndexNum = (index.size - INDEX_HEADER_SIZE - slots * HASH_SLOT_SIZE) / INDEX_ENTRY_SIZE
  }
  return sizes
}

/** Hash slots of an index file of `size` bytes: the given dimensions, the presets, or N = 4 S. */
function slotCount(size: number, dims: { maxHashSlotNum: number; maxIndexNum: number }[]): number | null {
  const candidates = [...dims, EMBEDDED_DEFAULTS, ROCKETMQ_SIZES as { maxHashSlotNum: number; maxIndexNum: number }]
  for (const d of candidates) {
    if (INDEX_HEADER_SIZE + d.maxHashSlotNum * HASH_SLOT_SIZE + d.maxIndexNum * INDEX_ENTRY_SIZE === size) return d.maxHashSlotNum
  }
  // Every preset keeps four entries per slot; a store sized by hand usually does too.
  const perSlot = HASH_SLOT_SIZE + 4 * INDEX_ENTRY_SIZE
  return (size - INDEX_HEADER_SIZE) % perSlot === 0 && size > INDEX_HEADER_SIZE ? (size - INDEX_HEADER_SIZE) / perSlot : null
}
