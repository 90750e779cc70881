// The cleaner's offset map: key digest → highest queue offset of that key in the range being
// mapped, in one fixed buffer (open addressing, linear probing), so a pass uses the memory it was
// given whatever the number of keys. Keys are not stored: two keys with the same 128-bit MD5 digest
// count as one key, which is accepted as negligible (as in Kafka's cleaner).
//
// Slot layout, 24 bytes: digest (16) ‖ queue offset + 1 as a float64 (8). The +1 makes an all-zero
// slot mean "empty" even for offset 0; float64 is exact for every safe-integer offset.
import { Buffer } from 'node:buffer'
import { createHash } from 'node:crypto'

export const DIGEST_BYTES = 16
export const SLOT_BYTES = DIGEST_BYTES + 8
export const DEFAULT_LOAD_FACTOR = 0.9
/** A map below this many slots is useless; it is also the least memory the cleaner accepts. */
export const MIN_SLOTS = 16

export function keyDigest(key: string): Buffer {
  return createHash('md5').update(key, 'utf8').digest()
}

export class OffsetMap {
  readonly slots: number
  /** Distinct keys the map takes before it counts as full: floor(slots × load factor). */
  readonly usableFill: number
  /** Allocated on first use: a store opens with the map unused (16 MiB zero-filled by default). */
  private tableBytes: Buffer | null = null
  private entries = 0
  /** The highest offset this map covers (set by the builder, -1 when nothing was mapped). */
  latestOffset = -1

  constructor(memoryBytes: number, loadFactor = DEFAULT_LOAD_FACTOR) {
    if (!Number.isSafeInteger(memoryBytes) || memoryBytes < MIN_SLOTS * SLOT_BYTES) {
      throw new RangeError(`an offset map needs at least ${MIN_SLOTS * SLOT_BYTES} bytes, got ${memoryBytes}`)
    }
    if (!(loadFactor > 0 && loadFactor <= 1)) throw new RangeError(`load factor must be in (0, 1], got ${loadFactor}`)
    this.slots = Math.floor(memoryBytes / SLOT_BYTES)
    this.usableFill = Math.max(1, Math.min(this.slots - 1, Math.floor(this.slots * loadFactor)))
  }

  private get table(): Buffer {
    this.tableBytes ??= Buffer.alloc(this.slots * SLOT_BYTES)
    return this.tableBytes
  }

  get size(): number {
    return this.entries
  }

  isFull(): boolean {
    return this.entries >= this.usableFill
  }

  /** size / slots, the "buffer utilisation" the cleaner reports. */
  utilization(): number {
    return this.entries / this.slots
  }

  clear(): void {
    this.tableBytes?.fill(0)
    this.entries = 0
    this.latestOffset = -1
  }

  /** Records `offset` for the key; a key already present takes the new offset. Throws when full. */
  put(digest: Buffer, offset: number): void {
    const slot = this.find(digest)
    const at = slot * SLOT_BYTES
    if (this.table.readDoubleLE(at + DIGEST_BYTES) === 0) {
      if (this.isFull()) throw new RangeError('offset map is full')
      digest.copy(this.table, at, 0, DIGEST_BYTES)
      this.entries++
    }
    this.table.writeDoubleLE(offset + 1, at + DIGEST_BYTES)
    if (offset > this.latestOffset) this.latestOffset = offset
  }

  /** The offset recorded for the key, or -1. */
  get(digest: Buffer): number {
    const at = this.find(digest) * SLOT_BYTES
    return this.table.readDoubleLE(at + DIGEST_BYTES) - 1
  }

  /** The slot holding the digest, or the empty slot where it would go. */
  private find(digest: Buffer): number {
    if (digest.length !== DIGEST_BYTES) throw new RangeError(`a key digest is ${DIGEST_BYTES} bytes`)
    const table = this.table
    let slot = digest.readUInt32LE(0) % this.slots
    // The fill limit keeps at least one slot empty, so the probe ends.
    for (;;) {
      const at = slot * SLOT_BYTES
      if (table.readDoubleLE(at + DIGEST_BYTES) === 0) return slot
      if (table.compare(digest, 0, DIGEST_BYTES, at, at + DIGEST_BYTES) === 0) return slot
      slot = slot + 1 === this.slots ? 0 : slot + 1
    }
  }
}
