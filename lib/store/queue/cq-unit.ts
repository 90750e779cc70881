// The 20-byte consume-queue unit, one per message of a (topic, queueId), in queue-offset order:
//
//   offset  width  field
//   0       8      commitLogOffset  physical offset of the record in the commit log (long)
//   8       4      size             record length, TOTALSIZE (int)
//   12      8      tagsCode         tag hash, delivery time for the schedule topic (long)
//
// A unit is valid while commitLogOffset >= 0 && size > 0; all-zero bytes end the data. A pre-fill
// blank (offset 0, size 0x7FFFFFFF, tagsCode 0) pads the first file of a queue whose first message
// does not have queue offset 0; it counts as valid. The queue offset of a unit is its logic byte
// offset (file start + position) divided by 20. The consume queue, the store's checks and
// `mqstore verify` all decode units through these functions.
import { Buffer } from 'node:buffer'
import { readThroughDescriptor } from '../mapped/segment-io.js'
import { getInt64, readInt64BE, setInt64 } from '../bytes.js'

export const CQ_STORE_UNIT_SIZE = 20
const UNIT_OFFSET_COMMIT_LOG_OFFSET = 0
const UNIT_OFFSET_SIZE = 8
const UNIT_OFFSET_TAGS_CODE = 12

/** The size field of a pre-fill blank unit (Integer.MAX_VALUE). */
export const CQ_BLANK_UNIT_SIZE = 0x7fffffff

/**
 * Tags codes at or below this are consume-queue extension addresses (Integer.MIN_VALUE - 1 and
 * down, RocketMQ's ConsumeQueueExt), not tag hashes.
 */
export const CQ_EXT_MAX_ADDRESS = -2147483649

/** commitLogOffset of the unit at byte `pos` of `buf`. */
/** A consume queue's identity and file size, checked before it names any folder. */
export function checkQueueArgs(topic: string, queueId: number, mappedFileSize: number): void {
  if (typeof topic !== 'string' || topic === '' || topic === '.' || topic === '..' || /[/\\\0]/.test(topic)) {
    throw new TypeError(`topic ${JSON.stringify(topic)} cannot name a directory`)
  }
  if (!Number.isInteger(queueId) || queueId < 0 || queueId > 0x7fffffff) {
    throw new RangeError(`queueId must be a non-negative int, got ${queueId}`)
  }
  if (!Number.isSafeInteger(mappedFileSize) || mappedFileSize <= 0 || mappedFileSize % CQ_STORE_UNIT_SIZE !== 0) {
    throw new RangeError(`consume queue file size must be a positive multiple of 20, got ${mappedFileSize}`)
  }
}

export function readUnitOffset(buf: Buffer, pos: number): number {
  return readInt64BE(buf, pos + UNIT_OFFSET_COMMIT_LOG_OFFSET)
}

/** readUnitOffset through a DataView (a walk over many units). */
export function unitOffsetIn(view: DataView, pos: number): number {
  return getInt64(view, pos + UNIT_OFFSET_COMMIT_LOG_OFFSET)
}

/** readUnitSize through a DataView. */
export function unitSizeIn(view: DataView, pos: number): number {
  return view.getInt32(pos + UNIT_OFFSET_SIZE)
}

/** size of the unit at byte `pos` of `buf`. */
export function readUnitSize(buf: Buffer, pos: number): number {
  return buf.readInt32BE(pos + UNIT_OFFSET_SIZE)
}

/** tagsCode of the unit at byte `pos` of `buf`. */
export function readUnitTagsCode(buf: Buffer, pos: number): number {
  return readInt64BE(buf, pos + UNIT_OFFSET_TAGS_CODE)
}

/** Writes a unit at byte `pos` of `view`. */
export function writeUnit(view: DataView, pos: number, offset: number, size: number, tagsCode: number): void {
  setInt64(view, pos + UNIT_OFFSET_COMMIT_LOG_OFFSET, offset)
  view.setInt32(pos + UNIT_OFFSET_SIZE, size)
  setInt64(view, pos + UNIT_OFFSET_TAGS_CODE, tagsCode)
}

/** The validity rule: a unit the store reads as data (blanks included). */
export function isValidUnit(offset: number, size: number): boolean {
  return offset >= 0 && size > 0
}

/**
 * A pre-fill blank: valid, but says nothing about the commit log, so it never sets a queue's max
 * physical offset (RocketMQ lets it, which makes 0x7FFFFFFF the max when a queue holds blanks only,
 * and skips every later put below 2 GiB as a replay).
 */
export function isBlankUnit(offset: number, size: number): boolean {
  return offset === 0 && size === CQ_BLANK_UNIT_SIZE
}

/** An all-zero unit: the end of a queue's data. */
export function isEndUnit(offset: number, size: number, tagsCode: number): boolean {
  return offset === 0 && size === 0 && tagsCode === 0
}

/**
 * Why units [from, to) of `buffer` are not a run of valid units whose records follow each other
 * without overlapping (blanks aside), or null.
 */
export function unitRunDamage(buffer: Buffer, from: number, to: number): string | null {
  let lastEnd = -1
  for (let at = from; at < to; at += CQ_STORE_UNIT_SIZE) {
    const offset = readUnitOffset(buffer, at)
    const size = readUnitSize(buffer, at)
    if (!isValidUnit(offset, size)) return `a bad unit at byte ${at}`
    if (isBlankUnit(offset, size)) continue
    if (offset < lastEnd) return `the unit at byte ${at} points into the record before it`
    lastEnd = offset + size
  }
  return null
}

/** Whether `unit` is a unit boundary of a file of `units` units (0 through `units`). */
export function isUnitIndex(unit: number, units: number): boolean {
  return Number.isInteger(unit) && unit >= 0 && unit <= units
}

function isValidAt(buffer: Buffer, unit: number, units: number): boolean {
  const at = unit * CQ_STORE_UNIT_SIZE
  return unit < units && at + CQ_STORE_UNIT_SIZE <= buffer.length && isValidUnit(readUnitOffset(buffer, at), readUnitSize(buffer, at))
}

/**
 * Whether the valid units at the start of a file of `units` units end at unit `end`: the unit
 * before it is valid, the one at it is not. `buffer` needs to cover the file up to unit `end + 1`.
 */
export function isUnitsEnd(buffer: Buffer, units: number, end: number): boolean {
  return isUnitIndex(end, units) && (end === 0 || isValidAt(buffer, end - 1, units)) && !isValidAt(buffer, end, units)
}

/** Where the valid units at the start of `buffer` (the whole file, `units` units) end: by bisection, for a run of units and then zeros. */
export function unitsEnd(buffer: Buffer, units: number): number {
  let low = 0
  let high = units
  while (low < high) {
    const mid = (low + high) >>> 1
    if (isValidAt(buffer, mid, units)) low = mid + 1
    else high = mid
  }
  return low
}

/** Zero bytes after a queue's end that show no stale units follow (one OS page). */
export const STALE_UNITS_QUIET_BYTES = 4096
/** The bytes past a recorded end that show it is one: its unit, then a quiet page. */
export const NEAR_END_BYTES = CQ_STORE_UNIT_SIZE + STALE_UNITS_QUIET_BYTES
const ZERO_PAGE = Buffer.alloc(STALE_UNITS_QUIET_BYTES)

/** True when bytes [from, from + STALE_UNITS_QUIET_BYTES) of `buf` (or to `end`) are zeros. */
export function isQuiet(buf: Buffer, from: number, end: number): boolean {
  const to = Math.min(end, from + STALE_UNITS_QUIET_BYTES)
  return to <= from || buf.subarray(from, to).equals(ZERO_PAGE.subarray(0, to - from))
}

/** Byte position of the first valid unit in [from, to) of `buf`, -1 when there is none. */
export function firstValidUnit(buf: Buffer, from: number, to: number): number {
  for (let at = from; at + CQ_STORE_UNIT_SIZE <= to; at += CQ_STORE_UNIT_SIZE) {
    if (isValidUnit(readUnitOffset(buf, at), readUnitSize(buf, at))) return at
  }
  return -1
}

/** Bytes of whole units read at a time by firstValidUnitInFile. */
const UNIT_READ_CHUNK_BYTES = CQ_STORE_UNIT_SIZE * 3276
const ZERO_CHUNK = Buffer.alloc(UNIT_READ_CHUNK_BYTES)

/**
 * firstValidUnit over bytes [from, to) of the file `fileName`, read a chunk at a time through a
 * descriptor, not a mapping (see readThroughDescriptor: holes on a tmpfs). A chunk of zeros holds
 * no valid unit (its size would be 0): compared whole (a memcmp) instead of unit by unit, since
 * what follows a queue's end is mostly zeros, megabytes of them in a large queue's last file.
 */
export function firstValidUnitInFile(fileName: string, from: number, to: number): number {
  const chunk = Buffer.allocUnsafe(UNIT_READ_CHUNK_BYTES)
  for (let at = from; at < to; at += chunk.length) {
    const length = Math.min(chunk.length, to - at)
    readThroughDescriptor(fileName, at, chunk.subarray(0, length))
    if (chunk.compare(ZERO_CHUNK, 0, length, 0, length) === 0) continue
    const found = firstValidUnit(chunk, 0, length)
    if (found >= 0) return at + found
  }
  return -1
}

/** A unit walk's first read, about a page; each later one doubles, up to about 1 MiB. */
const UNIT_WINDOW_FIRST_BYTES = CQ_STORE_UNIT_SIZE * 205
const UNIT_WINDOW_MAX_BYTES = CQ_STORE_UNIT_SIZE * 52_428
const NO_BYTES = Buffer.alloc(0)
/**
 * The memory every window reads into, and the window whose bytes it holds: made once, because
 * fresh memory costs a page fault per page written, which is what the window is there to avoid.
 */
let windowMemory: Buffer = NO_BYTES
let windowView: DataView = new DataView(new ArrayBuffer(0))
let windowOwner: UnitWindow | null = null

/**
 * The units of one file as a recovery walk reads them: copied through a descriptor into a window
 * that moves along the file, not read through the queue's mapping. The walk reads each unit once;
 * through a mapping, the first touch of every page cost the JS thread a fault (and, in a virtual
 * machine, an exit), many times the copy. Reads start small and double, so a queue of a few units
 * reads a page of its file, not a window of holes. Windows share one buffer: a window another one
 * used since reads its bytes again.
 */
export class UnitWindow {
  /** File bytes [start, start + bytes.length), and a view of them (read units with unitOffsetIn, unitSizeIn). */
  bytes: Buffer = NO_BYTES
  view = windowView
  start = 0
  private readBytes = UNIT_WINDOW_FIRST_BYTES

  constructor(
    private readonly fileName: string,
    private readonly fileSize: number,
  ) {}

  /** Makes `bytes` hold the unit at `pos` (a unit boundary of the file) and returns its position in `bytes`. */
  hold(pos: number): number {
    const rel = pos - this.start
    if (rel >= 0 && rel + CQ_STORE_UNIT_SIZE <= this.bytes.length && windowOwner === this) return rel
    const length = Math.min(this.readBytes, this.fileSize - pos)
    if (this.readBytes < UNIT_WINDOW_MAX_BYTES) this.readBytes = Math.min(2 * this.readBytes, UNIT_WINDOW_MAX_BYTES)
    if (windowMemory.length < length) {
      windowMemory = Buffer.allocUnsafeSlow(UNIT_WINDOW_MAX_BYTES)
      windowView = new DataView(windowMemory.buffer, windowMemory.byteOffset, windowMemory.byteLength)
    }
    windowOwner = this
    this.view = windowView
    this.bytes = windowMemory.subarray(0, length)
    readThroughDescriptor(this.fileName, pos, this.bytes)
    this.start = pos
    return 0
  }
}

/** What a recovery walk carries from window to window (see walkUnits). */
export interface UnitWalk {
  /** End (offset + size) of the last non-blank unit walked, -1 before the first. */
  lastEnd: number
  /** Byte position (in the window's coordinates, when found) of the first unit that starts inside the record before it, or -1. */
  overlapAt: number
}

/**
 * Walks the units of `view` from byte `from` to `to` (whole units) while they are valid and
 * their records end by `logEnd`, noting in `walk` where the records stop following each other
 * (a unit that starts inside the record before it). Returns the position of the first unit that
 * stops the walk, or `to`. One loop over a window: the recovery of a large queue reads millions.
 */
export function walkUnits(view: DataView, from: number, to: number, logEnd: number, walk: UnitWalk): number {
  let lastEnd = walk.lastEnd
  let at = from
  for (; at + CQ_STORE_UNIT_SIZE <= to; at += CQ_STORE_UNIT_SIZE) {
    const offset = getInt64(view, at + UNIT_OFFSET_COMMIT_LOG_OFFSET)
    const size = view.getInt32(at + UNIT_OFFSET_SIZE)
    if (!isValidUnit(offset, size)) break
    if (isBlankUnit(offset, size)) continue
    if (offset + size > logEnd) break
    if (offset < lastEnd && walk.overlapAt < 0) walk.overlapAt = at
    lastEnd = offset + size
  }
  walk.lastEnd = lastEnd
  return at
}

/** True when a tags code holds an extension address rather than a tag hash. */
export function isExtAddress(tagsCode: number): boolean {
  return tagsCode <= CQ_EXT_MAX_ADDRESS
}

/** The queue offset of the unit at logic byte offset `logicOffset` (file start + position). */
export function queueOffsetAt(logicOffset: number): number {
  return logicOffset / CQ_STORE_UNIT_SIZE
}
