// A budget of mapped bytes for files that are mapped on first use (consume-queue files, and
// whatever else is opened lazily). A store with tens of thousands of queues cannot keep every file
// mapped: address space is cheap, but page tables, the kernel's map count (vm.max_map_count,
// 65,530 by default) and the resident pages of files nobody reads are not. So each lazily mapped
// file reports here when it maps and on every use; when the mapped total passes `maxBytes` (or
// more than `maxFiles` files are mapped), the least recently used idle files are unmapped at once,
// and `sweep` unmaps files unused for `idleMs` (Kafka closes idle index files the same way).
// A file counts for the bytes it can have touched (written or reserved: a new consume-queue
// file's first pages, not the 6 MB it may grow to), so thousands of small queues stay mapped and
// their puts do not map and unmap a file each. A file is idle when no reader holds it
// and everything written to it is flushed, so unmapping loses nothing and needs no sync; the next
// use maps it again.

/** What the budget needs from a mapped file. */
export interface BudgetedFile {
  readonly fileSize: number
  /** End of the part reserved for writes; without it the file counts for its whole size. */
  readonly reservedPosition?: number
  /** End of what was written (a reopened file's old bytes are not in its reservation). */
  readonly wrotePosition?: number
  /** Unmaps the file if it is idle (no reader, nothing unflushed); true when it did. */
  unmapIfIdle(): boolean
}

export interface MappingBudgetOptions {
  /** Mapped bytes above which idle files are unmapped, least recently used first. */
  maxBytes: number
  /** A file unused for this long is unmapped by the next sweep. */
  idleMs: number
  /** Mapped files above which idle ones are unmapped (default MAX_MAPPED_FILES). */
  maxFiles?: number
  /** The clock for ages (the store's injected clock). */
  clock: () => number
}

/**
 * Files mapped through one budget at most, by default: each is a kernel mapping, and the kernel
 * allows a process 65,530 of them by default (vm.max_map_count), the runtime's own included.
 */
export const MAX_MAPPED_FILES = 16_384

/** The bytes a mapped file counts for: written or reserved, at least a page, at most its size. */
function chargeOf(file: BudgetedFile): number {
  const reserved = file.reservedPosition
  if (reserved === undefined) return file.fileSize
  return Math.min(file.fileSize, Math.max(PAGE_BYTES, reserved, file.wrotePosition ?? 0))
}

const PAGE_BYTES = 4096

export class MappingBudget {
  readonly maxBytes: number
  readonly maxFiles: number
  readonly idleMs: number
  private readonly clock: () => number
  /** Mapped files by last use, least recent first (Map keeps insertion order). */
  private readonly lastUse = new Map<BudgetedFile, number>()
  /** What each mapped file counts for now (its budgetBytes when last seen). */
  private readonly charged = new Map<BudgetedFile, number>()
  /**
   * The file last in lastUse, or null when not known: a read uses the same file again and again,
   * and setting its time in place keeps the order without a delete and re-insert per read.
   */
  private newest: BudgetedFile | null = null
  private bytes = 0
  /** While > 0, mapping does not unmap others (open maps each queue once, then shrinks). */
  private suspended = 0
  /** Maps and unmaps so far (stats and tests). */
  maps = 0
  unmaps = 0

  constructor(options: MappingBudgetOptions) {
    if (!Number.isSafeInteger(options.maxBytes) || options.maxBytes < 0) {
      throw new RangeError(`mapped-bytes budget must be a non-negative integer, got ${options.maxBytes}`)
    }
    if (!Number.isSafeInteger(options.idleMs) || options.idleMs < 0) {
      throw new RangeError(`idle time must be a non-negative integer, got ${options.idleMs}`)
    }
    const maxFiles = options.maxFiles ?? MAX_MAPPED_FILES
    if (!Number.isSafeInteger(maxFiles) || maxFiles < 1) {
      throw new RangeError(`mapped-files budget must be a positive integer, got ${maxFiles}`)
    }
    this.maxBytes = options.maxBytes
    this.maxFiles = maxFiles
    this.idleMs = options.idleMs
    this.clock = options.clock
  }

  /** Bytes of the files mapped through this budget right now. */
  get mappedBytes(): number {
    return this.bytes
  }

  get mappedFiles(): number {
    return this.lastUse.size
  }

  /** A file was just mapped: count it, then bring the total back under the budget. */
  mapped(file: BudgetedFile): void {
    if (this.lastUse.has(file)) {
      this.used(file)
      return
    }
    this.lastUse.set(file, this.clock())
    this.newest = file
    this.charge(file)
    this.maps++
    if (this.over() && this.suspended === 0) this.shrink(this.maxBytes, file)
  }

  /** Counts `file` for what it can have touched now (replacing what it counted for before). */
  private charge(file: BudgetedFile): void {
    const bytes = chargeOf(file)
    this.bytes += bytes - (this.charged.get(file) ?? 0)
    this.charged.set(file, bytes)
  }

  private discharge(file: BudgetedFile): void {
    this.bytes -= this.charged.get(file) ?? 0
    this.charged.delete(file)
  }

  private over(): boolean {
    return this.bytes > this.maxBytes || this.lastUse.size > this.maxFiles
  }

  /**
   * Runs `fn` without unmapping anything for the budget, then shrinks back under it: a pass that
   * visits every queue's files several times (recovery at open) maps each file once, not once
   * per visit.
   */
  withoutEviction<T>(fn: () => T): T {
    this.suspended++
    try {
      return fn()
    } finally {
      this.suspended--
      if (this.suspended === 0 && this.over()) this.shrink(this.maxBytes)
    }
  }

  /**
   * Starts counting a file that was mapped outside the budget (a commit-log file the writer just
   * left: it was mapped while written, and only now may be unmapped when idle). Not a map.
   */
  adopt(file: BudgetedFile): void {
    if (this.lastUse.has(file)) return
    this.lastUse.set(file, this.clock())
    this.newest = file
    this.charge(file)
    if (this.over() && this.suspended === 0) this.shrink(this.maxBytes, file)
  }

  /** Stops counting a file that stays mapped outside the budget (it became the file being written). Not an unmap. */
  forget(file: BudgetedFile): void {
    if (file === this.newest) this.newest = null
    if (this.lastUse.delete(file)) this.discharge(file)
  }

  /** A file was used (read or written): it becomes the most recent. */
  used(file: BudgetedFile): void {
    if (file === this.newest) {
      // Already the most recent: a new time, same place (set keeps a key's position).
      this.lastUse.set(file, this.clock())
    } else {
      if (!this.lastUse.delete(file)) return
      this.lastUse.set(file, this.clock())
      this.newest = file
    }
    // A file that grew (more of it reserved) counts for more, and may push others out.
    if (file.reservedPosition !== undefined && chargeOf(file) !== this.charged.get(file)) {
      this.charge(file)
      if (this.over() && this.suspended === 0) this.shrink(this.maxBytes, file)
    }
  }

  /** A file was unmapped (idle unmap, shutdown, deletion): stop counting it. */
  unmapped(file: BudgetedFile): void {
    if (file === this.newest) this.newest = null
    if (!this.lastUse.delete(file)) return
    this.discharge(file)
    this.unmaps++
  }

  /** Unmaps idle files, least recently used first, until at most `target` bytes (and maxFiles files) are mapped. */
  shrink(target: number, spare: BudgetedFile | null = null): number {
    let count = 0
    // Unmapping deletes the entry being visited, which a Map's iteration allows.
    for (const file of this.lastUse.keys()) {
      if (this.bytes <= target && this.lastUse.size <= this.maxFiles) break
      if (file !== spare && file.unmapIfIdle()) count++
    }
    return count
  }

  /** Unmaps every idle file unused for `idleMs`; returns how many it unmapped. */
  sweep(): number {
    const before = this.clock() - this.idleMs
    let count = 0
    for (const [file, at] of [...this.lastUse]) {
      if (at > before) break // the rest were used later
      if (file.unmapIfIdle()) count++
    }
    return count
  }
}

/** The budget's figures for stats() (zeros without a budget). */
export function mappingStats(budget: MappingBudget | null): {
  budgetBytes: number
  mappedBytes: number
  mappedFiles: number
  maps: number
  unmaps: number
} {
  if (budget === null) return { budgetBytes: 0, mappedBytes: 0, mappedFiles: 0, maps: 0, unmaps: 0 }
  return {
    budgetBytes: budget.maxBytes,
    mappedBytes: budget.mappedBytes,
    mappedFiles: budget.mappedFiles,
    maps: budget.maps,
    unmaps: budget.unmaps,
  }
}

/** Runs `fn` under `budget.withoutEviction`, or as is without a budget. */
export function withoutEviction<T>(budget: MappingBudget | null, fn: () => T): T {
  return budget === null ? fn() : budget.withoutEviction(fn)
}
