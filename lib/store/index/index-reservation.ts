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

export class IndexReservation {
  private readonly file: MappedFile
  private readonly page: number
  /** One flag per page of the header and slot table: reserved in this run. */
  private readonly slotPages: Uint8Array
  /** Entry-table bytes below this are reserved (0 until the first entry of this run). */
  private entriesReservedTo = 0

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
    this.check(this.file.reserveRange(page * this.page, this.page))
    this.slotPages[page] = 1
  }

  /** Reserves the entry at `pos` (and a chunk ahead of it); throws NO_SPACE. */
  entry(pos: number, size: number): void {
    const end = pos + size
    if (end <= this.entriesReservedTo) return
    const chunk = INDEX_ENTRY_RESERVE_CHUNK_BYTES
    const from = Math.max(this.entriesReservedTo, Math.floor(pos / this.page) * this.page)
    const to = Math.min(this.file.fileSize, Math.ceil(end / chunk) * chunk + chunk)
    this.check(this.file.reserveRange(from, to - from))
    this.entriesReservedTo = to
  }

  private check(ok: boolean): void {
    if (ok) return
    throw this.file.lastReserveError ?? new MQStoreError('NO_SPACE', `cannot reserve blocks in ${this.file.fileName}`)
  }
}
