// The shapes around a MappedFile: its options, the append callback it runs, the held view it
// hands out, and the reservation step its options imply.
import { type MapHandle, native } from '../../native.js'
import type { MappingBudget } from './mapping-budget.js'
import type { TransientStorePool } from './transient-store-pool.js'

/** What a commit-log append callback reports back. */
export interface AppendOutcome {
  /** Bytes written at the position, or the blank length for an end-of-file blank. */
  wroteBytes: number
}

/**
 * Writes one or more records at `pos` of `target` (the write buffer or the mapping) with at most
 * `maxBlank` bytes of room left in the file, and says how many bytes it wrote.
 */
export type AppendCallback<R extends AppendOutcome> = (target: Buffer, pos: number, maxBlank: number, fileFromOffset: number) => R

/** Faults [from, to) of `file` (a MappedFile) in through `handle`, on the libuv pool; the file is held until it settles. */
export type WarmChunk = (file: object, handle: MapHandle, from: number, to: number) => Promise<void>

/** What a held view holds: its file, released once the view is. */
export interface HeldFile {
  release(): void
  getRefCount(): number
}

/** A held view of part of a mapped file. Release it exactly once. */
export class SelectMappedBufferResult {
  readonly startOffset: number
  readonly buffer: Buffer
  readonly size: number
  private mappedFile: HeldFile | null

  constructor(startOffset: number, buffer: Buffer, size: number, mappedFile: HeldFile) {
    this.startOffset = startOffset
    this.buffer = buffer
    this.size = size
    this.mappedFile = mappedFile
  }

  get file(): HeldFile | null {
    return this.mappedFile
  }

  /** Drops the hold on the file. Idempotent: a second call does nothing. */
  release(): void {
    const file = this.mappedFile
    if (file === null) return
    this.mappedFile = null
    file.release()
  }
}

/** Reservation steps widen to RESERVE_WIDE_CHUNKS chunks once RESERVE_WIDEN_AFTER are reserved (reserveChunkBytes). */
export const RESERVE_WIDEN_AFTER = 8
export const RESERVE_WIDE_CHUNKS = 4

/**
 * Where a file reserved up to `reserved` should be reserved to before a write ending at `end`:
 * `reserved` itself while `end` stays half a step below it, else through the step after `end`'s.
 * The step grows from `first` (doubling what is reserved) to `chunk`, then to wide chunks.
 */
export function reservationTarget(reserved: number, end: number, fileSize: number, chunk: number, first: number): number {
  if (reserved >= fileSize) return reserved
  const wide = reserved >= RESERVE_WIDEN_AFTER * chunk ? RESERVE_WIDE_CHUNKS * chunk : chunk
  const step = reserved >= chunk ? wide : Math.max(first, reserved)
  if (end + (step >>> 1) <= reserved) return reserved
  return Math.min(fileSize, Math.ceil(end / step) * step + step)
}

export interface MappedFileOptions {
  /** Borrow a write buffer from this pool (commit log with transientStorePoolEnable). */
  transientStorePool?: TransientStorePool | null
  /** Map read-only: a private copy-on-write map that never writes to the file. */
  readOnly?: boolean
  /**
   * The file's start offset, for files not named by it (index files are named by creation time).
   * Without it the name must be a 20-digit start offset.
   */
  fileFromOffset?: number
  /**
   * Reserve disk blocks in chunks of this many bytes ahead of the writer (see `reserve`) instead
   * of the whole file at creation. Writers of such a file must call `reserve` (or
   * `reserveRange`) before they write a page. Once RESERVE_WIDEN_AFTER chunks are reserved, each
   * step is RESERVE_WIDE_CHUNKS chunks: every step also faults its pages in on the libuv pool, and
   * a file written that far is written in bursts, whose JS thread pays for each pool wake-up.
   */
  reserveChunkBytes?: number
  /** Faults a warmed file's newly reserved chunks in, instead of MapHandle.warmAsync (the commit log's huge pages). */
  warmChunk?: WarmChunk
  /**
   * With reserveChunkBytes: the first reservation (at creation, or the first write of a reopened
   * file) is this small, and each later step is as large as what is reserved already (doubling)
   * up to reserveChunkBytes, so a file holding little takes little disk (a consume queue of a few
   * messages, one page). Without it every step is a whole chunk.
   */
  reserveFirstBytes?: number
  /**
   * Map on first use, not at open, and let this budget unmap the file while it is idle. Without
   * it the file is mapped from open to shutdown.
   */
  budget?: MappingBudget | null
  /**
   * Without a budget: map an opened file on its first use instead of at open, and keep it mapped
   * from then on (old commit-log files: a reopen maps what it reads, a view handed out stays valid).
   */
  mapOnFirstUse?: boolean
  /**
   * With a budget: the file counts as idle only once everything readers may see is flushed, so
   * the flusher and the transient store pool never meet an unmapped file with unflushed bytes
   * (commit-log and compaction-log files; consume-queue files may be unmapped dirty, their flush
   * then forces them with fdatasync).
   */
  unmapOnlyFlushed?: boolean
  /**
   * Create new files without the fsync chain (temp file, fsync, rename, directory fsync): the file
   * and its directory entry are forced by its first flush instead, so its durability follows the
   * flush schedule like its data (RocketMQ's consume queues). A crash before that flush may leave
   * the file short or absent; only derived files, which recovery rebuilds, may use this.
   */
  syncOnFirstFlush?: boolean
  /**
   * Give JavaScript a buffer over what is reserved (or read) so far, widened as that grows, not
   * over the whole file (MapHandle.expose): V8 counts every buffer's length as memory to collect
   * for. For big files that hold little (a consume queue's); writers must reserve before writing.
   */
  exposeReserved?: boolean
  /**
   * False: a page fault reads only the page it touches (random-access advice). Otherwise a fault
   * reads around it, up to the device's read-ahead (8 MiB on some disks): for a small, sparse file
   * (a consume queue's), the whole file, its holes as pages of zeros, for each queue read or
   * checked past its end.
   */
  readAround?: boolean
}

/** The reservation step of a file: a page multiple, at most the file size. */
export function reserveChunk(options: MappedFileOptions, fileSize: number): number {
  const chunk = options.reserveChunkBytes
  if (chunk === undefined || options.readOnly === true) return fileSize
  if (!Number.isSafeInteger(chunk) || chunk <= 0) {
    throw new RangeError(`reserveChunkBytes must be a positive integer, got ${chunk}`)
  }
  const page = native.pageSize
  return Math.min(fileSize, Math.ceil(chunk / page) * page)
}

/** The first reservation step of a file: a page multiple, at most its chunk (see reserveFirstBytes). */
export function reserveFirst(options: MappedFileOptions, chunk: number): number {
  const first = options.reserveFirstBytes
  if (first === undefined || options.readOnly === true) return chunk
  if (!Number.isSafeInteger(first) || first <= 0) {
    throw new RangeError(`reserveFirstBytes must be a positive integer, got ${first}`)
  }
  const page = native.pageSize
  return Math.min(chunk, Math.ceil(first / page) * page)
}
