// Disk blocks of an index file, reserved as the file is written rather than all at creation.
//
// An index file is mostly its entry table (20 bytes per entry, written in order) and its hash-slot
// table (4 bytes per slot, written at random). Entries get a chunk reserved ahead of the writer;
// slots get the page holding them reserved the first time a slot there is written. Neither is
// remembered across opens: after an open the first write to each page reserves it again, which
// costs one cheap system call where the blocks already exist.
import { MQStoreError } from '../../errors.js'
import type { MappedFile } from '../mapped/mapped-file.js'
import { native } from '../../native.js'

/** Entry-table blocks reserved per step (52,428 entries). */
export const INDEX_ENTRY_RESERVE_CHUNK_BYTES = 1024 * 1024

/**
 * Slot pages reserved one by one before the whole slot table is reserved at once. Random keys
 * touch every page of the table after a few thousand keys, so past this point the table is taken
 * whole (one system call) and faulted in off the JS thread, instead of paying a reservation and a
 * page fault on the put path for each of its pages; a store of a few keys keeps a small index.
 * Each page's reservation is a system call on the JS thread that waits for the file system's
 * journal now and then (128 of them took 13 ms of a new store's first put; some 2 ms each).
 */
export const SLOT_PAGES_BEFORE_WHOLE_TABLE = 16
/** Keys from which a rebuild of the slots reserves the whole table first (tableForRebuild). */
export const WHOLE_TABLE_REBUILD_ENTRIES = 1024

export class IndexReservation {
  private readonly file: MappedFile
  private readonly page: number
  /** One flag per page of the header and slot table: reserved in this run. */
  private readonly slotPages: Uint8Array
  /** Entry-table bytes below this are reserved (0 until the first entry of this run). */
  private entriesReservedTo = 0
  /** Slot pages reserved one by one in this run; the whole table once it reaches the limit. */
  private slotPagesReserved = 0
  private wholeTable = false

  constructor(file: MappedFile, entriesStart: number, createdNow: boolean) {
    this.file = file
    this.page = native.pageSize
    this.slotPages = new Uint8Array(Math.ceil(entriesStart / this.page))
    // A file created now has its first page (the header) reserved by the creation.
    if (createdNow) this.slotPages[0] = 1
  }

  /** Reserves the page holding byte `pos` of the header or slot table; throws NO_SPACE. */
  slot(pos: number): void {
    const page = Math.floor(pos / this.page)
    if (this.slotPages[page] === 1) return
    if (!this.wholeTable && this.slotPagesReserved >= SLOT_PAGES_BEFORE_WHOLE_TABLE && this.reserveWholeTable()) return
    this.check(this.file.reserveRange(page * this.page, this.page))
    this.slotPages[page] = 1
    this.slotPagesReserved++
  }

  /**
   * Before the slots are rebuilt from `entries` keys (after a power cut): from
   * WHOLE_TABLE_REBUILD_ENTRIES on, reserves the whole header and slot table now, so that their
   * writes need no reservation each. So many random keys reach nearly every page of the table, and
   * past SLOT_PAGES_BEFORE_WHOLE_TABLE pages slot() takes the whole table anyway. True when the
   * whole table is reserved; false otherwise (fewer keys, or the file system refused): slot()
   * then reserves page by page.
   */
  tableForRebuild(entries: number): boolean {
    if (entries < WHOLE_TABLE_REBUILD_ENTRIES) return false
    return this.wholeTable ? this.slotPages.every((flag) => flag === 1) : this.reserveWholeTable()
  }

  /** Reserves every page of the header and slot table and faults them in off the JS thread. */
  private reserveWholeTable(): boolean {
    this.wholeTable = true
    const end = this.slotPages.length * this.page
    // A disk too full for the whole table goes on page by page (and says NO_SPACE when a page fails).
    if (!this.file.reserveRange(0, end)) return false
    this.slotPages.fill(1)
    this.file.warmRange(0, end)
    return true
  }

  /**
   * Reserves the entry at `pos`; throws NO_SPACE. Within half a chunk of the reserved end, the
   * next chunk is reserved and faulted in off the JS thread, so entries are written into pages
   * that are already there.
   */
  entry(pos: number, size: number): void {
    const end = pos + size
    const chunk = INDEX_ENTRY_RESERVE_CHUNK_BYTES
    if (end + (chunk >>> 1) <= this.entriesReservedTo || this.entriesReservedTo >= this.file.fileSize) return
    const from = Math.max(this.entriesReservedTo, Math.floor(pos / this.page) * this.page)
    const to = Math.min(this.file.fileSize, Math.ceil(end / chunk) * chunk + chunk)
    if (!this.file.reserveRange(from, to - from)) {
      // Ahead of need only: fail only when the entry itself has no blocks.
      if (end > this.entriesReservedTo) this.check(false)
      return
    }
    this.entriesReservedTo = to
    this.file.warmRange(from, to)
  }

  private check(ok: boolean): void {
    if (ok) return
    throw this.file.lastReserveError ?? new MQStoreError('NO_SPACE', `cannot reserve blocks in ${this.file.fileName}`)
  }
}
