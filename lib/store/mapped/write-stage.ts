// SYNC_FLUSH's write stage for the commit log: records are encoded into this buffer instead of the
// mapping, and each group commit writes what it holds into the file with one positional write
// before it syncs (fdatasync). Through the mapping, every sync cleaned the pages just written, so
// the writer took a write-protect fault on nearly every page of the next group (each with a TLB
// flush, tens of microseconds in a virtual machine), and the sync write-protected each page again.
// Readers see staged bytes only once they are in the file (MappedFile.readPosition), and dispatch
// follows the write, as with the transient store pool.
//
// One stage per commit log, lent to the file being appended to from its write position; the file
// writes it out and gives it back when it fills (CommitLog.append) or the stage runs out of room.
import { Buffer } from 'node:buffer'
import { ZeroAhead, type ZeroedFile } from './zero-ahead.js'

/**
 * Bytes staged at most: many group commits' records (a full stage is written out and started
 * again mid-put). A record larger than the stage goes through the mapping.
 */
export const WRITE_STAGE_BYTES = 1 << 20

/** The file side (MappedFile). */
export interface StagedFile extends ZeroedFile {
  readonly wrotePosition: number
  readonly committedPosition: number
  readonly appendBase: number
  isFull(): boolean
  commit(commitLeastPages: number, startWriteBack?: boolean): number
  setWriteBuffer(buffer: Buffer | null, base: number): void
}

export class WriteStage {
  readonly buffer: Buffer
  /** The file the buffer is lent to, or null. */
  private holder: StagedFile | null = null
  /**
   * Keeps the blocks ahead of the writer written (zero-ahead.ts): on Linux, where fallocate leaves
   * reserved blocks for the first sync to convert; null elsewhere.
   */
  readonly zeroAhead: ZeroAhead | null

  constructor(bytes: number = WRITE_STAGE_BYTES, zeroAhead = process.platform === 'linux') {
    // Touched now, at open: the writer takes no first-touch page faults on it later.
    this.buffer = Buffer.allocUnsafeSlow(bytes).fill(0)
    this.zeroAhead = zeroAhead ? new ZeroAhead() : null
  }

  /** True when appending `length` bytes to `file` needs prepare() first. */
  needsRoom(file: StagedFile, length: number): boolean {
    if (file !== this.holder) return true
    const at = file.wrotePosition - file.appendBase
    // Below the start: the file's positions were set back (a truncation) since it was lent.
    return at < 0 || at + length > this.buffer.length
  }

  /**
   * Writes out what the stage holds, then lends it to `file` from its write position when
   * `length` bytes fit (a larger append goes through the mapping). The caller completes the
   * staged records first (their body CRCs): they are written as they are.
   */
  prepare(file: StagedFile, length: number): void {
    this.release()
    if (length > this.buffer.length || file.isFull()) return
    file.setWriteBuffer(this.buffer, file.wrotePosition)
    this.holder = file
    this.zeroAhead?.after(file)
  }

  /**
   * Writes the staged bytes into their file, and starts their write-back (a group commit syncs
   * them next; the I/O is under way before the pool's thread wakes up to sync); false when nothing
   * was staged.
   */
  commit(): boolean {
    const file = this.holder
    if (file === null) return false
    const before = file.committedPosition
    const wrote = file.commit(0, true) > before
    this.zeroAhead?.after(file)
    return wrote
  }

  /** Writes the staged bytes into their file and takes the stage back (the mapping takes the appends). */
  release(): void {
    const file = this.holder
    if (file === null) return
    this.holder = null
    file.commit(0)
    file.setWriteBuffer(null, 0)
  }
}
