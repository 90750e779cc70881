// Key lookups in the index files of a store another process writes, by positioned reads. The
// writer updates a slot and its entries in place, so a chain read while it indexes may end early
// or hold an entry not yet whole: every candidate is checked on the record it names (topic and
// key) before it is served, and a chain is followed only backwards and within the file.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'
import { join } from 'node:path'

import {
  HASH_SLOT_SIZE,
  hashSlotPosition,
  INDEX_ENTRY_SIZE,
  INDEX_HEADER_SIZE,
  indexEntryPosition,
  isIndexFileName,
  readIndexEntry,
  topicKeyHash,
} from '../index/index-layout.js'
import { listNames } from './read-only-segments.js'

export interface IndexDimensions {
  maxHashSlotNum: number
  maxIndexNum: number
}

export class ReadOnlyIndex {
  private readonly entry = Buffer.alloc(INDEX_ENTRY_SIZE)
  private readonly entryView = new DataView(this.entry.buffer, this.entry.byteOffset, INDEX_ENTRY_SIZE)

  constructor(
    private readonly dir: string,
    private readonly dimensions: IndexDimensions,
  ) {}

  /**
   * Calls `visit` with the commit-log offsets the index holds for `topic`#`key`, newest file
   * first and newest entry first in each, until `visit` returns true or `limit` offsets were seen.
   */
  forEachOffset(topic: string, key: string, limit: number, visit: (offset: number) => boolean): void {
    const hash = topicKeyHash(topic, key)
    const names = listNames(this.dir).filter(isIndexFileName).reverse()
    let seen = 0
    for (const name of names) {
      let fd = -1
      try {
        fd = fs.openSync(join(this.dir, name), 'r')
        const size = fs.fstatSync(fd).size
        const slots = this.slotsOf(size)
        if (slots === null) continue
        const entries = (size - INDEX_HEADER_SIZE - slots * HASH_SLOT_SIZE) / INDEX_ENTRY_SIZE
        const slot = Buffer.alloc(HASH_SLOT_SIZE)
        if (fs.readSync(fd, slot, 0, HASH_SLOT_SIZE, hashSlotPosition(hash, slots)) < HASH_SLOT_SIZE) continue
        let at = slot.readInt32BE(0)
        for (let steps = 0; at > 0 && at < entries && steps < entries; steps++) {
          if (fs.readSync(fd, this.entry, 0, INDEX_ENTRY_SIZE, indexEntryPosition(at, slots)) < INDEX_ENTRY_SIZE) break
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
      } finally {
        if (fd >= 0) fs.closeSync(fd)
      }
    }
  }

  /** Hash slots of an index file of `size` bytes: the configured dimensions, or four entries a slot. */
  private slotsOf(size: number): number | null {
    const { maxHashSlotNum, maxIndexNum } = this.dimensions
    if (INDEX_HEADER_SIZE + maxHashSlotNum * HASH_SLOT_SIZE + maxIndexNum * INDEX_ENTRY_SIZE === size) return maxHashSlotNum
    const perSlot = HASH_SLOT_SIZE + 4 * INDEX_ENTRY_SIZE
    return size > INDEX_HEADER_SIZE && (size - INDEX_HEADER_SIZE) % perSlot === 0 ? (size - INDEX_HEADER_SIZE) / perSlot : null
  }
}
