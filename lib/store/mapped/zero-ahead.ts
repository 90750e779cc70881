// SYNC_FLUSH: the blocks just ahead of the commit log's writer are written with zeros, and synced,
// before records reach them. A file's blocks are reserved with fallocate, which leaves them
// "unwritten": the first sync of data written into such blocks must also record them as written
// (an extent change, a second write), so every group commit's fdatasync paid for two writes. Over
// blocks written once already it writes the data alone: on the bench machine (ext4, a virtio disk)
// a group's pwrite + fdatasync took 115 us instead of 175 us. Write-ahead logs that sync every
// commit do the same (PostgreSQL fills a new WAL segment with zeros first).
//
// The zeros are written on the JS thread, where every write of records into the file happens, so
// nothing can race them; always at or after the write position, and only into reserved blocks.
// Their sync runs on the libuv pool through a descriptor of its own: Linux reports a writeback
// error to every open file description of the file, so a group commit's own sync still sees an
// error whichever sync met it first. A hint only: a failure turns it off for the store.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

/** How far ahead of the write position the blocks are kept written. */
export const ZERO_LEAD_BYTES = 4 * 1024 * 1024
/** Zeros are written in runs of at least this many bytes (one background sync each). */
export const ZERO_STEP_BYTES = 1024 * 1024
const ZERO_PIECE_BYTES = 256 * 1024
/** Made on first use: a process whose stores never zero ahead (ASYNC_FLUSH, read-only openers, the CLI) keeps none. */
let zeros: Buffer | null = null

/** What ZeroAhead reads of the file being written (a MappedFile). */
export interface ZeroedFile {
  readonly fileName: string
  readonly fileSize: number
  readonly wrotePosition: number
  /** End of the blocks reserved for the file: zeros go no further. */
  readonly reservedPosition: number
}

export class ZeroAhead {
  /** The file being zeroed (by identity: a file destroyed and made again under its name is another). */
  private file: ZeroedFile | null = null
  private fd = -1
  /** Where the zeros written into the current file end. */
  private zeroedTo = 0
  private syncing: Promise<void> | null = null
  private syncAgain = false
  private off = false
  /** Bytes of zeros written since the store opened. */
  zeroedBytes = 0

  /** After records were written into `file` (or before it takes more): keeps its next blocks written. */
  after(file: ZeroedFile): void {
    if (this.off) return
    if (file !== this.file) this.switchTo(file)
    const from = Math.max(this.zeroedTo, file.wrotePosition)
    const limit = Math.min(file.reservedPosition, file.fileSize)
    const to = Math.min(limit, file.wrotePosition + ZERO_LEAD_BYTES)
    // In runs of a step at least, or what is left of the reservation.
    if (to <= from || (to - from < ZERO_STEP_BYTES && to < limit)) return
    try {
      if (this.fd < 0) this.fd = fs.openSync(file.fileName, 'r+')
      zeros ??= Buffer.alloc(ZERO_PIECE_BYTES)
      for (let at = from; at < to; ) at += fs.writeSync(this.fd, zeros, 0, Math.min(zeros.length, to - at), at)
    } catch {
      this.stop()
      return
    }
    this.zeroedTo = to
    this.zeroedBytes += to - from
    this.sync()
  }

  /** Waits for the sync in flight and closes the descriptor (close, or before a file goes away). */
  async close(): Promise<void> {
    this.off = true
    while (this.syncing !== null) await this.syncing
    this.closeDescriptor()
  }

  private switchTo(file: ZeroedFile): void {
    // The previous file's zeros are synced or being synced; its descriptor closes after that.
    if (this.syncing === null) this.closeDescriptor()
    else {
      const fd = this.fd
      this.syncing.then(() => closeQuietly(fd))
    }
    this.fd = -1
    this.file = file
    this.zeroedTo = 0
  }

  private sync(): void {
    if (this.syncing !== null) {
      this.syncAgain = true
      return
    }
    const fd = this.fd
    let settle = (): void => undefined
    this.syncing = new Promise<void>((resolve) => {
      settle = resolve
    })
    fs.fdatasync(fd, (error) => {
      this.syncing = null
      if (error !== null) this.off = true
      if (this.off) this.closeDescriptor()
      else if (this.syncAgain && this.fd >= 0) {
        // Zeros written meanwhile, into this file or the next one (whose descriptor this.fd is now).
        this.syncAgain = false
        this.sync()
      }
      settle()
    })
  }

  /** Stops zeroing; the descriptor closes now, or once the sync in flight ends. */
  stop(): void {
    this.off = true
    if (this.syncing === null) this.closeDescriptor()
  }

  private closeDescriptor(): void {
    if (this.fd >= 0) closeQuietly(this.fd)
    this.fd = -1
  }
}

function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd)
  } catch {
    // Already closed or never valid: nothing to release.
  }
}
