// Which entries of the index file being written are known to be on disk, so that the open after a
// power cut keeps them instead of rebuilding the whole file from the commit log.
//
// RocketMQ's rule (and the store's, before this) deletes every index file that ends after the
// checkpoint's indexMsgTimestamp, which only moves when a file fills up: after a power cut the file
// being written, millions of keys, was rebuilt from scratch. The store already syncs that file's
// entry table behind the writer during bursts (IndexService.kickWriteback). Each such sync covers
// the table from its first page (so it also waits for an earlier one still running; clean pages
// cost it nothing) and, once the msync has succeeded, the same piece of work on the libuv pool
// writes a mark naming how many entries it made durable (MapHandle.syncAsync's write after). The
// mark is written only after its entries are on disk, so whatever version of it a power cut leaves
// names entries that are on disk. It is not synced itself: an older version only means more keys
// to index again. A failed sync erases it and stops the marks (Linux reports a write-back error to
// one sync only: another one running may have written its mark).
//
// At open after a power cut, the file the mark names keeps entries 1 .. n: they are checked (the
// header's begin fields and the last entry as the mark recorded them, commit-log offsets in order,
// every chain link as a rebuild would write it) while the slot table, which is never synced in a
// burst, is rebuilt from them. Anything that does not check out, or no mark, and the file is
// deleted and rebuilt as before. Recovery then indexes the records after entry n's record.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import * as zlib from 'node:zlib'

import { getInt64 } from '../bytes.js'
import {
  BEGIN_PHY_OFFSET_OFFSET,
  BEGIN_TIMESTAMP_OFFSET,
  ENTRY_KEY_HASH_OFFSET,
  ENTRY_PHY_OFFSET_OFFSET,
  ENTRY_PREV_INDEX_OFFSET,
  ENTRY_TIME_DIFF_OFFSET,
  entryTime,
  HASH_SLOT_SIZE,
  INDEX_ENTRY_SIZE,
  INDEX_FILE_NAME_LENGTH,
  INDEX_HEADER_SIZE,
  indexEntriesStart,
  isIndexFileName,
} from './index-layout.js'

// The mark file, `<root>/indexmark` (mqstore's own; RocketMQ ignores files it does not know in the
// store root). 56 bytes, big-endian:
//   0   4  magic 'MQIX'
//   4   4  entries: entries 1 .. entries of the file are on disk (whole records)
//   8   8  phyOffset of entry `entries`
//  16   8  the file's beginPhyOffset
//  24   8  the file's beginTimestamp
//  32  20  the file's name (17 ASCII digits, then zeros)
//  52   4  CRC-32 of bytes 0 .. 51
export const MARK_SIZE = 56
const MARK_MAGIC = 0x4d514958
const OFFSET_ENTRIES = 4
const OFFSET_LAST_PHY = 8
const OFFSET_BEGIN_PHY = 16
const OFFSET_BEGIN_TIME = 24
const OFFSET_NAME = 32
const OFFSET_CRC = 52

export interface IndexDurableMark {
  /** The index file's name (its base name). */
  fileName: string
  /** Entries 1 .. entries are on disk. */
  entries: number
  /** The commit-log offset entry `entries` indexes. */
  lastPhyOffset: number
  beginPhyOffset: number
  beginTimestamp: number
}

export function encodeMark(mark: IndexDurableMark): Buffer {
  const b = Buffer.alloc(MARK_SIZE)
  b.writeUInt32BE(MARK_MAGIC, 0)
  b.writeInt32BE(mark.entries, OFFSET_ENTRIES)
  b.writeBigInt64BE(BigInt(mark.lastPhyOffset), OFFSET_LAST_PHY)
  b.writeBigInt64BE(BigInt(mark.beginPhyOffset), OFFSET_BEGIN_PHY)
  b.writeBigInt64BE(BigInt(mark.beginTimestamp), OFFSET_BEGIN_TIME)
  b.write(mark.fileName, OFFSET_NAME, INDEX_FILE_NAME_LENGTH, 'latin1')
  b.writeUInt32BE(zlib.crc32(b.subarray(0, OFFSET_CRC)), OFFSET_CRC)
  return b
}

/** The mark in `b`, or null when it is not one (wrong size, magic or CRC, or values out of range). */
export function decodeMark(b: Buffer): IndexDurableMark | null {
  if (b.length !== MARK_SIZE || b.readUInt32BE(0) !== MARK_MAGIC) return null
  if (zlib.crc32(b.subarray(0, OFFSET_CRC)) !== b.readUInt32BE(OFFSET_CRC)) return null
  const fileName = b.toString('latin1', OFFSET_NAME, OFFSET_NAME + INDEX_FILE_NAME_LENGTH)
  const mark: IndexDurableMark = {
    fileName,
    entries: b.readInt32BE(OFFSET_ENTRIES),
    lastPhyOffset: Number(b.readBigInt64BE(OFFSET_LAST_PHY)),
    beginPhyOffset: Number(b.readBigInt64BE(OFFSET_BEGIN_PHY)),
    beginTimestamp: Number(b.readBigInt64BE(OFFSET_BEGIN_TIME)),
  }
  const safe = [mark.lastPhyOffset, mark.beginPhyOffset, mark.beginTimestamp].every((n) => Number.isSafeInteger(n) && n >= 0)
  return isIndexFileName(fileName) && mark.entries >= 1 && safe ? mark : null
}

/** The mark file's mark, or null (no file, unreadable, or not a valid mark). */
export function readMark(path: string): IndexDurableMark | null {
  try {
    return decodeMark(fs.readFileSync(path))
  } catch {
    return null
  }
}

/**
 * The writer's side of the mark file: a descriptor opened at first use, for the syncs' writes
 * after. Best effort throughout: without it, the next power cut rebuilds the file as before.
 */
export class IndexMarkFile {
  private fd: number | null = null
  private failed = false

  constructor(readonly path: string) {}

  /** The descriptor, or null when the file cannot be opened (or a sync of the index failed). */
  descriptor(): number | null {
    if (this.fd === null && !this.failed) {
      try {
        this.fd = fs.openSync(this.path, fs.constants.O_WRONLY | fs.constants.O_CREAT, 0o644)
      } catch {
        this.failed = true
      }
    }
    return this.fd
  }

  /**
   * A sync of the index failed: the mark may no longer be trusted (Linux reports a write-back
   * error to one sync only, and another one in flight may have written its mark), so it is erased
   * and no more are written.
   */
  invalidate(): void {
    this.failed = true
    try {
      if (this.fd !== null) fs.ftruncateSync(this.fd, 0)
      else fs.rmSync(this.path, { force: true })
    } catch {
      // The open checks a mark against the entries anyway.
    }
    this.close()
  }

  close(): void {
    if (this.fd !== null) fs.closeSync(this.fd)
    this.fd = null
  }
}

/**
 * Entries of a file that a sync of its entry table up to byte `syncedTo` makes durable, cut back to
 * a record boundary (all of a record's keys, or none): the entries wholly below `syncedTo`, less
 * those of the last record there when that record has keys above it. 0 when none.
 */
export function markableEntries(v: DataView, hashSlotNum: number, indexCount: number, syncedTo: number): number {
  const start = indexEntriesStart(hashSlotNum)
  let n = Math.min(indexCount - 1, Math.floor((syncedTo - start) / INDEX_ENTRY_SIZE) - 1)
  const phyOf = (entry: number): number => getInt64(v, start + entry * INDEX_ENTRY_SIZE + ENTRY_PHY_OFFSET_OFFSET)
  if (n >= 1 && n + 1 < indexCount) {
    const next = phyOf(n + 1)
    while (n >= 1 && phyOf(n) === next) n--
  }
  return Math.max(0, n)
}

/** What a file keeps of its entries after a power cut (rebuildFromMark). */
export interface KeptEntries {
  entries: number
  /** Slots in use. */
  slots: number
  endPhyOffset: number
  /** The latest store time the last entry may have (its time is kept in whole seconds). */
  endTimestamp: number
}

/**
 * Keeps entries 1 .. mark.entries of the file mapped by `v` and rebuilds its slot table from them,
 * or returns null when they do not check out (the caller then deletes the file; the slot table may
 * be changed by then). `reserveSlot(pos)` reserves the page of the slot table holding `pos` before
 * it is written (the table may have holes); null when the whole table is reserved already.
 */
export function rebuildFromMark(
  v: DataView,
  hashSlotNum: number,
  indexNum: number,
  mark: IndexDurableMark,
  reserveSlot: ((pos: number) => void) | null,
): KeptEntries | null {
  const n = mark.entries
  const start = indexEntriesStart(hashSlotNum)
  if (n < 1 || n >= indexNum) return null
  if (getInt64(v, BEGIN_TIMESTAMP_OFFSET) !== mark.beginTimestamp || getInt64(v, BEGIN_PHY_OFFSET_OFFSET) !== mark.beginPhyOffset)
    return null
  if (getInt64(v, start + n * INDEX_ENTRY_SIZE + ENTRY_PHY_OFFSET_OFFSET) !== mark.lastPhyOffset) return null
  if (reserveSlot === null) {
    // The whole table is reserved: cleared in one native fill.
    new Uint8Array(v.buffer, v.byteOffset + INDEX_HEADER_SIZE, start - INDEX_HEADER_SIZE).fill(0)
  } else {
    // Slots that point anywhere are cleared (pages holding none are left alone: they may be holes).
    for (let pos = INDEX_HEADER_SIZE; pos < start; pos += HASH_SLOT_SIZE) if (v.getInt32(pos) !== 0) v.setInt32(pos, 0)
  }
  let slots = 0
  let lastPhy = mark.beginPhyOffset
  let timeDiff = 0
  for (let entry = 1, at = start + INDEX_ENTRY_SIZE; entry <= n; entry++, at += INDEX_ENTRY_SIZE) {
    const keyHash = v.getInt32(at + ENTRY_KEY_HASH_OFFSET)
    const phyOffset = getInt64(v, at + ENTRY_PHY_OFFSET_OFFSET)
    timeDiff = v.getInt32(at + ENTRY_TIME_DIFF_OFFSET)
    const prev = v.getInt32(at + ENTRY_PREV_INDEX_OFFSET)
    // In commit-log order, and never all zeros (a page the power cut lost).
    if (keyHash < 0 || timeDiff < 0 || phyOffset < lastPhy || (keyHash === 0 && phyOffset === 0 && timeDiff === 0)) return null
    const slotPos = INDEX_HEADER_SIZE + (keyHash % hashSlotNum) * HASH_SLOT_SIZE
    const newest = v.getInt32(slotPos)
    // The put linked the entry to the newest one of its slot: the rebuild must find that same one.
    if (prev !== newest) return null
    if (newest === 0) slots++
    if (reserveSlot !== null) reserveSlot(slotPos)
    v.setInt32(slotPos, entry)
    lastPhy = phyOffset
  }
  return { entries: n, slots, endPhyOffset: lastPhy, endTimestamp: entryTime(mark.beginTimestamp, n, timeDiff) + 999 }
}
