// Index files for verify: their dimensions, their hash chains (checked file by file), and their
// entries as a pointer stream matched against the records they point at. Every offset, slot and
// field comes from the index's own layout module, and the keys a record must be indexed under from
// the index's own key rule.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

import { EMBEDDED_DEFAULTS, ROCKETMQ_SIZES } from '../../store/config.js'
import type { DispatchRequest } from '../../store/commitlog/record.js'
import {
  effectiveIndexCount,
  HASH_SLOT_SIZE,
  hashSlotOf,
  INDEX_COUNT_OFFSET,
  INDEX_ENTRY_SIZE,
  INDEX_HEADER_SIZE,
  indexEntriesStart,
  indexFileSize,
  readIndexEntry,
  readIndexHeader,
  type IndexCoverage,
} from '../../store/index/index-layout.js'
import { indexKeyHashesOf, indexKeysOf } from '../../store/index/index-keys.js'
import { errorCode, readFully } from './files.js'
import type { PointerStream } from './pointer-streams.js'
import type { Problems, VerifyOptions } from './report.js'

export interface IndexDims {
  hashSlotNum: number
  indexNum: number
}

/** The dimensions an index file of `size` bytes has, or why they cannot be told. */
export function indexDimensions(size: number, options: VerifyOptions): IndexDims | string {
  if (options.maxHashSlotNum !== undefined && options.maxIndexNum !== undefined) {
    const expected = indexFileSize(options.maxHashSlotNum, options.maxIndexNum)
    if (size === expected) return { hashSlotNum: options.maxHashSlotNum, indexNum: options.maxIndexNum }
    return `wrong size: ${size} bytes; ${options.maxHashSlotNum} slots and ${options.maxIndexNum} entries need ${expected}`
  }
  const candidates: IndexDims[] = [
    { hashSlotNum: EMBEDDED_DEFAULTS.maxHashSlotNum, indexNum: EMBEDDED_DEFAULTS.maxIndexNum },
    { hashSlotNum: ROCKETMQ_SIZES.maxHashSlotNum!, indexNum: ROCKETMQ_SIZES.maxIndexNum! },
  ]
  for (const c of candidates) if (indexFileSize(c.hashSlotNum, c.indexNum) === size) return c
  return (
    `unknown dimensions: ${size} bytes fits neither ${candidates.map((c) => `${c.hashSlotNum} slots / ${c.indexNum} entries`).join(' nor ')}; ` +
    "pass the store's --max-hash-slot-num and --max-index-num"
  )
}

function dataView(buf: Buffer): DataView {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
}

/** Reads the header as the store reads it (the count made effective). */
function readHeader(fd: number, header: Buffer): IndexCoverage {
  readFully(fd, header, 0, INDEX_HEADER_SIZE, 0)
  const decoded = readIndexHeader(dataView(header))
  return { beginPhyOffset: decoded.beginPhyOffset, endPhyOffset: decoded.endPhyOffset, indexCount: effectiveIndexCount(decoded.indexCount) }
}

/**
 * Checks one index file's hash chains: each entry must link to the previous entry of its slot
 * (always an earlier one), and each slot must hold the newest entry of its chain. Returns the
 * number of entries (indexCount - 1) and what the header says the file covers.
 */
export function checkIndexChains(
  path: string,
  rel: string,
  dims: IndexDims,
  problems: Problems,
): { entries: number; coverage: IndexCoverage } {
  const { hashSlotNum, indexNum } = dims
  const entriesStart = indexEntriesStart(hashSlotNum)
  const fd = fs.openSync(path, 'r')
  try {
    const header = Buffer.alloc(INDEX_HEADER_SIZE)
    const coverage = readHeader(fd, header)
    let count = coverage.indexCount
    if (count > indexNum) {
      problems.add({ file: rel, offset: INDEX_COUNT_OFFSET, reason: `indexCount ${count} exceeds the file's ${indexNum} entries` })
      count = indexNum
    }
    const slots = Buffer.alloc(hashSlotNum * HASH_SLOT_SIZE)
    readFully(fd, slots, 0, slots.length, INDEX_HEADER_SIZE)
    const newest = new Int32Array(hashSlotNum)
    const chunk = Buffer.allocUnsafe(INDEX_ENTRY_SIZE * 16384)
    const view = dataView(chunk)
    for (let first = 1; first < count; ) {
      const n = Math.min(chunk.length / INDEX_ENTRY_SIZE, count - first)
      const got = Math.floor(readFully(fd, chunk, 0, n * INDEX_ENTRY_SIZE, entriesStart + first * INDEX_ENTRY_SIZE) / INDEX_ENTRY_SIZE)
      if (got === 0) break
      for (let i = 0; i < got; i++) {
        const k = first + i
        const { keyHash, timeDiff, prevIndex: prev } = readIndexEntry(view, i * INDEX_ENTRY_SIZE)
        const why: string[] = []
        if (keyHash < 0) why.push(`negative key hash ${keyHash}`)
        if (timeDiff < 0) why.push(`negative time difference ${timeDiff}`)
        const slot = keyHash < 0 ? -1 : hashSlotOf(keyHash, hashSlotNum)
        if (prev < 0 || prev >= k) {
          why.push(`links to entry ${prev}; a chain may only link to an earlier entry`)
        } else if (slot >= 0 && prev !== newest[slot]) {
          why.push(`links to entry ${prev}, but the previous entry of its slot ${slot} is ${newest[slot]}`)
        }
        if (why.length > 0) {
          problems.add({ file: rel, offset: entriesStart + k * INDEX_ENTRY_SIZE, entry: k, reason: `entry ${k}: ${why.join('; ')}` })
        }
        if (slot >= 0) newest[slot] = k
      }
      first += got
    }
    // A live store may have added entries since the header was read: slots may point at them.
    const liveCount = Math.max(count, Math.min(indexNum, readHeader(fd, header).indexCount))
    for (let s = 0; s < hashSlotNum; s++) {
      const head = slots.readInt32BE(s * HASH_SLOT_SIZE)
      if (head === newest[s]) continue
      if (head >= count && head < liveCount) continue
      const reason =
        head < 0 || head >= count
          ? `slot ${s} points at entry ${head}, past the last entry ${count - 1}`
          : newest[s] === 0
            ? `slot ${s} points at entry ${head}, but no entry hashes to this slot`
            : `slot ${s} points at entry ${head}, but its newest entry is ${newest[s]}`
      problems.add({ file: rel, offset: INDEX_HEADER_SIZE + s * HASH_SLOT_SIZE, reason })
    }
    return { entries: count - 1, coverage }
  } finally {
    fs.closeSync(fd)
  }
}

/** The index hashes of the record at `phy`, computed once however many entries point at it. */
export class KeyHashCache {
  private phy = -1
  private hashes: number[] = []

  of(phy: number, req: DispatchRequest): number[] {
    if (phy !== this.phy) {
      this.phy = phy
      this.hashes = indexKeyHashesOf(req)
    }
    return this.hashes
  }
}

export interface IndexContext {
  problems: Problems
  counts: { expired: number }
  keyHashes: KeyHashCache
}

/** The entries of one index file, in entry order. */
export class IndexStream implements PointerStream {
  phy = 0
  private keyHash = 0
  private entry = 0
  private buf: Buffer | null = null
  private view: DataView | null = null
  private bufFirst = 0
  private bufCount = 0
  private readonly entriesStart: number

  constructor(
    private readonly ctx: IndexContext,
    private readonly rel: string,
    private readonly path: string,
    hashSlotNum: number,
    /** indexCount: entries 1 .. count - 1 are read. */
    private readonly count: number,
  ) {
    this.entriesStart = indexEntriesStart(hashSlotNum)
  }

  advance(): boolean {
    const next = this.entry + 1
    if (next >= this.count) {
      this.buf = null
      this.view = null
      return false
    }
    if (this.buf === null || next >= this.bufFirst + this.bufCount) {
      this.buf ??= Buffer.allocUnsafe(INDEX_ENTRY_SIZE * 2048)
      this.view ??= dataView(this.buf)
      const n = Math.min(this.buf.length / INDEX_ENTRY_SIZE, this.count - next)
      let fd: number
      try {
        fd = fs.openSync(this.path, 'r')
      } catch (error) {
        if (errorCode(error) === 'ENOENT') return false
        throw error
      }
      try {
        const got = readFully(fd, this.buf, 0, n * INDEX_ENTRY_SIZE, this.entriesStart + next * INDEX_ENTRY_SIZE)
        this.bufFirst = next
        this.bufCount = Math.floor(got / INDEX_ENTRY_SIZE)
      } finally {
        fs.closeSync(fd)
      }
      if (this.bufCount === 0) return false
    }
    const entry = readIndexEntry(this.view!, (next - this.bufFirst) * INDEX_ENTRY_SIZE)
    this.entry = next
    this.keyHash = entry.keyHash
    this.phy = entry.phyOffset
    return true
  }

  expired(): void {
    this.ctx.counts.expired++
  }

  private problem(reason: string): void {
    this.ctx.problems.add({
      file: this.rel,
      offset: this.entriesStart + this.entry * INDEX_ENTRY_SIZE,
      entry: this.entry,
      phyOffset: this.phy,
      reason,
    })
  }

  miss(reason: string): void {
    this.problem(`entry ${this.entry} points at commit-log offset ${this.phy}, ${reason}`)
  }

  match(req: DispatchRequest): void {
    if (this.ctx.keyHashes.of(this.phy, req).includes(this.keyHash)) return
    const keys = indexKeysOf(req)
    this.problem(
      `entry ${this.entry}: key hash ${this.keyHash} is not the hash of any key of the record at ${this.phy} ` +
        `(${req.topic}, keys ${keys.length === 0 ? 'none' : keys.map((k) => JSON.stringify(k)).join(' ')})`,
    )
  }
}
