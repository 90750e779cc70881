// The byte layout of an index file (RocketMQ's), its name, and pure decoders of its header and
// entries: what the index file writes, the store's checks and `mqstore verify` all read through these.
//
// Layout (every integer big-endian; S = hashSlotNum, N = indexNum):
//
//   0                40               40 + S*4                               40 + S*4 + N*20
//   +----------------+----------------+------------------------------------------------+
//   | header (40 B)  | S slots (4 B)  | N entries (20 B); entry 0 is never used         |
//   +----------------+----------------+------------------------------------------------+
//
//   header:  beginTimestamp long @0 | endTimestamp long @8 | beginPhyOffset long @16 |
//            endPhyOffset long @24  | hashSlotCount int @32 | indexCount int @36
//   slot:    int, number of the newest entry of the slot's chain (0 = empty)
//   entry:   keyHash int @0 | phyOffset long @4 | timeDiff int @12 (seconds after the header's
//            beginTimestamp) | prevIndex int @16 (older entry of the same slot, 0 = end of chain)
//
// The file is named by its creation time in local time, `yyyyMMddHHmmssSSS`. An indexCount of 0 or
// less reads as 1 (a fresh file); entry numbers in use run from 1 to indexCount - 1.
import { continueJavaStringHash, getInt64, javaStringHashCode } from '../bytes.js'

export const INDEX_HEADER_SIZE = 40
export const HASH_SLOT_SIZE = 4
export const INDEX_ENTRY_SIZE = 20
/** The "no entry" value of a slot or a prevIndex. */
export const INVALID_INDEX = 0

// Header field offsets.
export const BEGIN_TIMESTAMP_OFFSET = 0
export const END_TIMESTAMP_OFFSET = 8
export const BEGIN_PHY_OFFSET_OFFSET = 16
export const END_PHY_OFFSET_OFFSET = 24
export const HASH_SLOT_COUNT_OFFSET = 32
export const INDEX_COUNT_OFFSET = 36

/** The header's longs by the name an IndexFile keeps each under. */
export type HeaderLong = 'beginTimestamp' | 'endTimestamp' | 'beginPhyOffset' | 'endPhyOffset'
export const HEADER_LONGS: readonly HeaderLong[] = ['beginTimestamp', 'endTimestamp', 'beginPhyOffset', 'endPhyOffset']
export const HEADER_LONG_OFFSETS: Record<HeaderLong, number> = {
  beginTimestamp: BEGIN_TIMESTAMP_OFFSET,
  endTimestamp: END_TIMESTAMP_OFFSET,
  beginPhyOffset: BEGIN_PHY_OFFSET_OFFSET,
  endPhyOffset: END_PHY_OFFSET_OFFSET,
}

/** The record a key is put for: its commit-log offset and store time. */
export interface KeyPlace {
  commitLogOffset: number
  storeTimestamp: number
}

// Entry field offsets, relative to the entry.
export const ENTRY_KEY_HASH_OFFSET = 0
export const ENTRY_PHY_OFFSET_OFFSET = 4
export const ENTRY_TIME_DIFF_OFFSET = 12
export const ENTRY_PREV_INDEX_OFFSET = 16

/** Java maps buffers of at most Integer.MAX_VALUE bytes; a larger index file would not be portable. */
const MAX_INDEX_FILE_SIZE = 0x7fffffff

/** Length of an index file name (`yyyyMMddHHmmssSSS`). */
export const INDEX_FILE_NAME_LENGTH = 17
const INDEX_FILE_NAME = /^\d{17}$/

/** The exact size of an index file with these dimensions. */
export function indexFileSize(hashSlotNum: number, indexNum: number): number {
  if (!Number.isSafeInteger(hashSlotNum) || hashSlotNum < 1) {
    throw new RangeError(`hashSlotNum must be a positive integer, got ${hashSlotNum}`)
  }
  if (!Number.isSafeInteger(indexNum) || indexNum < 2) {
    throw new RangeError(`indexNum must be an integer >= 2, got ${indexNum}`)
  }
  const size = INDEX_HEADER_SIZE + hashSlotNum * HASH_SLOT_SIZE + indexNum * INDEX_ENTRY_SIZE
  if (size > MAX_INDEX_FILE_SIZE) {
    throw new RangeError(`an index file of ${hashSlotNum} slots and ${indexNum} entries exceeds 2 GiB - 1`)
  }
  return size
}

export { continueJavaStringHash, javaStringHashCode } from '../bytes.js'

/** Index key hash from a Java string hash: its absolute value, with abs(MIN_VALUE) (negative) as 0. */
export function toIndexKeyHash(javaHash: number): number {
  return javaHash === -2147483648 ? 0 : Math.abs(javaHash)
}

export function indexKeyHash(key: string): number {
  return toIndexKeyHash(javaStringHashCode(key))
}

/** indexKeyHash(`${topic}#${key}`), the hash a key is indexed under, without building the string. */
export function topicKeyHash(topic: string, key: string): number {
  const prefix = continueJavaStringHash(javaStringHashCode(topic), '#', 0, 1)
  return toIndexKeyHash(continueJavaStringHash(prefix, key, 0, key.length))
}

/** `yyyyMMddHHmmssSSS` in local time. */
export function formatIndexFileName(millis: number): string {
  const d = new Date(millis)
  return (
    String(d.getFullYear()).padStart(4, '0') +
    String(d.getMonth() + 1).padStart(2, '0') +
    String(d.getDate()).padStart(2, '0') +
    String(d.getHours()).padStart(2, '0') +
    String(d.getMinutes()).padStart(2, '0') +
    String(d.getSeconds()).padStart(2, '0') +
    String(d.getMilliseconds()).padStart(3, '0')
  )
}

/** The local time an index file name stands for, or null when the name is not one. */
export function parseIndexFileName(name: string): number | null {
  if (!INDEX_FILE_NAME.test(name)) return null
  const n = (from: number, to: number): number => Number(name.slice(from, to))
  const millis = new Date(n(0, 4), n(4, 6) - 1, n(6, 8), n(8, 10), n(10, 12), n(12, 14), n(14, 17)).getTime()
  return Number.isFinite(millis) ? millis : null
}

export function isIndexFileName(name: string): boolean {
  return INDEX_FILE_NAME.test(name)
}

/** Where an index file's entries start: after the header and the slots. */
export function indexEntriesStart(hashSlotNum: number): number {
  return INDEX_HEADER_SIZE + hashSlotNum * HASH_SLOT_SIZE
}

/** The slot of a key hash (key hashes are never negative: see toIndexKeyHash). */
export function hashSlotOf(keyHash: number, hashSlotNum: number): number {
  return keyHash % hashSlotNum
}

/** Byte position of the slot a key hash belongs to. */
export function hashSlotPosition(keyHash: number, hashSlotNum: number): number {
  return INDEX_HEADER_SIZE + hashSlotOf(keyHash, hashSlotNum) * HASH_SLOT_SIZE
}

/** Byte position of entry number `entry`. */
export function indexEntryPosition(entry: number, hashSlotNum: number): number {
  return indexEntriesStart(hashSlotNum) + entry * INDEX_ENTRY_SIZE
}

export interface IndexHeader {
  beginTimestamp: number
  endTimestamp: number
  beginPhyOffset: number
  endPhyOffset: number
  hashSlotCount: number
  /** As stored; see effectiveIndexCount. */
  indexCount: number
}

/** The 40-byte header at the start of `view`. */
export function readIndexHeader(view: DataView): IndexHeader {
  return {
    beginTimestamp: getInt64(view, BEGIN_TIMESTAMP_OFFSET),
    endTimestamp: getInt64(view, END_TIMESTAMP_OFFSET),
    beginPhyOffset: getInt64(view, BEGIN_PHY_OFFSET_OFFSET),
    endPhyOffset: getInt64(view, END_PHY_OFFSET_OFFSET),
    hashSlotCount: view.getInt32(HASH_SLOT_COUNT_OFFSET),
    indexCount: view.getInt32(INDEX_COUNT_OFFSET),
  }
}

/** The indexCount a reader uses: a stored count of 0 or less is a fresh file, count 1. */
export function effectiveIndexCount(storedCount: number): number {
  return storedCount <= 0 ? 1 : storedCount
}

export interface IndexEntry {
  keyHash: number
  phyOffset: number
  /** Seconds after the header's beginTimestamp. */
  timeDiff: number
  /** The older entry of the same slot, INVALID_INDEX at the end of the chain. */
  prevIndex: number
}

/** The 20-byte entry at byte `pos` of `view`. */
export function readIndexEntry(view: DataView, pos: number): IndexEntry {
  return {
    keyHash: view.getInt32(pos + ENTRY_KEY_HASH_OFFSET),
    phyOffset: getInt64(view, pos + ENTRY_PHY_OFFSET_OFFSET),
    timeDiff: view.getInt32(pos + ENTRY_TIME_DIFF_OFFSET),
    prevIndex: view.getInt32(pos + ENTRY_PREV_INDEX_OFFSET),
  }
}

/** What the coverage rule reads of each index file. */
export interface IndexCoverage {
  beginPhyOffset: number
  endPhyOffset: number
  /** The effective count (see effectiveIndexCount). */
  indexCount: number
}

/**
 * The coverage rule of an index: its files that hold entries, in name order, cover the commit log
 * in order without overlapping (each begins at or after the end of the one before, and does not
 * end before it begins). Files a rebuild cut short break it; they cannot be searched or extended
 * correctly. Returns the first file that breaks the rule and the end of the file before it, or null.
 */
export function indexCoverageBreak(files: readonly IndexCoverage[]): { index: number; previousEnd: number } | null {
  let previousEnd = -1
  for (let index = 0; index < files.length; index++) {
    const file = files[index]
    if (file.indexCount <= 1) continue
    if (file.beginPhyOffset < previousEnd || file.endPhyOffset < file.beginPhyOffset) return { index, previousEnd }
    previousEnd = file.endPhyOffset
  }
  return null
}

/**
 * The store time an entry stands for: the header's begin time plus its difference in seconds,
 * except for the file's first entry, whose time is the begin time itself. Its difference was taken
 * before the begin time became its own (RocketMQ's putKey, kept for the bytes), against the begin
 * a rolled file inherits from the previous file's end, so after a quiet spell it would read as
 * that long after the message was stored, past a query's end.
 */
export function entryTime(beginTimestamp: number, entry: number, timeDiff: number): number {
  return entry === 1 ? beginTimestamp : beginTimestamp + timeDiff * 1000
}
