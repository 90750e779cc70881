// Key lookups in the index files of a store another process writes, by positioned reads. The
// writer updates a slot and its entries in place, so a chain read while it indexes may end early
// or hold an entry not yet whole: every candidate is checked on the record it names (topic and
// key) before it is served, and a chain is followed only backwards and within the file.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

import {
  HASH_SLOT_SIZE,
  hashSlotPosition,
  INDEX_COUNT_OFFSET,
  INDEX_ENTRY_SIZE,
  INDEX_HEADER_SIZE,
  indexEntryPosition,
  isIndexFileName,
  readIndexEntry,
  topicKeyHash,
} from '../index/index-layout.js'
import { LISTING_MAX_AGE_MS, type ReadOnlySegment, ReadOnlySegments } from './read-only-segments.js'

/**
 * Free entries the newest index file must have had at the last listing for a lookup to go on with
 * that listing (while it is younger than LISTING_MAX_AGE_MS) instead of looking at the folder: the
 * writer starts a new file only once the newest is full (or cannot take a record's keys), and 1 M
 * keys in 100 ms is over ten times what a writer indexes (0.7 M keys a second in the bench's put).
 */
export const ROLL_MARGIN_ENTRIES = 1024 * 1024

export interface IndexDimensions {
  maxHashSlotNum: number
  maxIndexNum: number
}

export class ReadOnlyIndex {
  /** The index files, listed again when the folder changed, their descriptors kept open. */
  private readonly files: ReadOnlySegments
  private readonly slot = Buffer.alloc(HASH_SLOT_SIZE)
  private readonly entry = Buffer.alloc(INDEX_ENTRY_SIZE)
  private readonly entryView = new DataView(this.entry.buffer, this.entry.byteOffset, INDEX_ENTRY_SIZE)
  /** When the folder was last looked at (the `now` of that lookup), and the newest file's free entries then (0: none or unknown). */
  private listedAt = Number.NEGATIVE_INFINITY
  private roomAtListing = 0

  constructor(
    dir: string,
    private readonly dimensions: IndexDimensions,
  ) {
    this.files = new ReadOnlySegments(dir, indexFileOrder)
  }

  /**
   * Calls `visit` with the commit-log offsets the index holds for `topic`#`key`, newest file
   * first and newest entry first in each, until `visit` returns true or `limit` offsets were seen.
   * `now` (ms) dates the look at the folder it may take.
   */
  forEachOffset(topic: string, key: string, limit: number, visit: (offset: number) => boolean, now = Date.now()): void {
    const hash = topicKeyHash(topic, key)
    this.refreshFor(now)
    const segments = this.files.segments
    let seen = 0
    for (let f = segments.length - 1; f >= 0; f--) {
      const segment = segments[f]
      try {
        const fd = this.files.descriptor(segment)
        if (fd < 0) continue
        // Listed while the writer created it: the file reaches its full size right after.
        if (this.slotsOf(segment.size) === null) segment.size = fs.fstatSync(fd).size
        const slots = this.slotsOf(segment.size)
        if (slots === null) continue
        const entries = (segment.size - INDEX_HEADER_SIZE - slots * HASH_SLOT_SIZE) / INDEX_ENTRY_SIZE
        if (fs.readSync(fd, this.slot, 0, HASH_SLOT_SIZE, hashSlotPosition(hash, slots)) < HASH_SLOT_SIZE) continue
        let at = this.slot.readInt32BE(0)
        for (let steps = 0; at > 0 && at < entries && steps < entries; steps++) {
          // Asked for again at each entry: a visit may open other files, and the process-wide cap
          // on open descriptors may have closed this one (its number then names another file).
          const entryFd = this.files.descriptor(segment)
          if (entryFd < 0) break
          if (fs.readSync(entryFd, this.entry, 0, INDEX_ENTRY_SIZE, indexEntryPosition(at, slots)) < INDEX_ENTRY_SIZE) break
          const { keyHash, phyOffset, prevIndex } = readIndexEntry(this.entryView, 0)
          if (keyHash === hash) {
            if (visit(phyOffset) || ++seen >= limit) return
          }
          // Chains run from newer entries to older ones; anything else is an entry being written.
          if (prevIndex >= at) break
          at = prevIndex
        }
      } catch {
        // A file deleted or replaced while read: the others still answer.
        this.invalidate()
      }
    }
  }

  /**
   * Looks at the folder (one stat; a listing when it changed) unless the last look is younger than
   * LISTING_MAX_AGE_MS and the newest file then had room for ROLL_MARGIN_ENTRIES more keys: a key
   * put just now may be in a file the writer has just started, which it starts only when the newest
   * is full. A stat is a few microseconds here, a fifth of a reader's lookup.
   */
  private refreshFor(now: number): void {
    if (now - this.listedAt < LISTING_MAX_AGE_MS && now >= this.listedAt && this.roomAtListing > ROLL_MARGIN_ENTRIES) return
    this.files.refresh()
    this.listedAt = now
    const newest = this.files.segments.at(-1)
    this.roomAtListing = newest === undefined ? 0 : this.freeEntries(newest)
  }

  /** Entries `segment` can still take, from its header's count (0 when that cannot be read). */
  private freeEntries(segment: ReadOnlySegment): number {
    try {
      const fd = this.files.descriptor(segment)
      if (fd < 0) return 0
      if (this.slotsOf(segment.size) === null) segment.size = fs.fstatSync(fd).size
      const slots = this.slotsOf(segment.size)
      if (slots === null) return 0
      const entries = (segment.size - INDEX_HEADER_SIZE - slots * HASH_SLOT_SIZE) / INDEX_ENTRY_SIZE
      if (fs.readSync(fd, this.slot, 0, HASH_SLOT_SIZE, INDEX_COUNT_OFFSET) < HASH_SLOT_SIZE) return 0
      const count = this.slot.readInt32BE(0)
      return count >= 0 && count <= entries ? entries - count : 0
    } catch {
      return 0
    }
  }

  /** Forgets the last look at the folder (a file vanished under a lookup). */
  private invalidate(): void {
    this.files.invalidate()
    this.listedAt = Number.NEGATIVE_INFINITY
  }

  /** Hash slots of an index file of `size` bytes: the configured dimensions, or four entries a slot. */
  private slotsOf(size: number): number | null {
    const { maxHashSlotNum, maxIndexNum } = this.dimensions
    if (INDEX_HEADER_SIZE + maxHashSlotNum * HASH_SLOT_SIZE + maxIndexNum * INDEX_ENTRY_SIZE === size) return maxHashSlotNum
    const perSlot = HASH_SLOT_SIZE + 4 * INDEX_ENTRY_SIZE
    return size > INDEX_HEADER_SIZE && (size - INDEX_HEADER_SIZE) % perSlot === 0 ? (size - INDEX_HEADER_SIZE) / perSlot : null
  }

  close(): void {
    this.files.close()
  }
}

/**
 * An index file's place among the others: the time its name spells (yyyyMMddHHmmssSSS), read as
 * UTC so that no two names share one (local time repeats an hour a year) and the order is the names'.
 */
function indexFileOrder(name: string): number | null {
  if (!isIndexFileName(name)) return null
  const n = (from: number, to: number): number => Number(name.slice(from, to))
  const millis = Date.UTC(n(0, 4), n(4, 6) - 1, n(6, 8), n(8, 10), n(10, 12), n(12, 14), n(14, 17))
  return Number.isFinite(millis) ? millis : null
}
