// Random access to the commit log for verify: single records anywhere (for pointers that arrive
// out of order), and the files as a ScanSource for the store's recovery classifier.
import { Buffer } from 'node:buffer'
import * as fs from 'node:fs'

import { checkRecord, MIN_RECORD_LENGTH, type DispatchRequest } from '../../store/commitlog/record.js'
import type { ScanSource } from '../../store/commitlog/recovery-scan.js'
import { errorCode, FileWindow, readFully, type Segment } from './files.js'

const RANDOM_CHUNK = 256 * 1024
/**
 * Records are read whole; none is larger than maxMessageSize (4 MiB by default) plus 64 KiB, so a
 * TOTALSIZE beyond this is damage, not a reason to allocate that much.
 */
export const MAX_RECORD_LENGTH = 64 * 1024 * 1024

/** Reads single records anywhere in the commit log (for pointers that arrive out of order). */
export class CommitLogReader {
  private readonly window = new FileWindow(RANDOM_CHUNK)
  private relisted = false

  constructor(
    private files: Segment[],
    private readonly relist: () => Segment[],
  ) {}

  private fileOf(phy: number): Segment | null {
    let lo = 0
    let hi = this.files.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const f = this.files[mid]
      if (phy < f.start) hi = mid - 1
      else if (phy >= f.start + f.size) lo = mid + 1
      else return f
    }
    return null
  }

  /** The valid record (CRC checked) that starts exactly at `phy`, or why there is none. */
  recordAt(phy: number): DispatchRequest | string {
    let f = this.fileOf(phy)
    const last = this.files[this.files.length - 1]
    if (f === null && !this.relisted && (last === undefined || phy >= last.start + last.size)) {
      // The log may have grown a file since it was listed.
      this.relisted = true
      this.files = this.relist()
      f = this.fileOf(phy)
    }
    if (f === null) return 'no commit-log file holds this offset'
    try {
      this.window.use(f.path, f.size)
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return 'its commit-log file was deleted during the check'
      throw error
    }
    const pos = phy - f.start
    let p = this.window.load(pos, 8)
    if (this.window.available(pos) < 8) return 'no record header fits there'
    const total = this.window.buf.readInt32BE(p)
    if (total > MAX_RECORD_LENGTH) return `TOTALSIZE ${total} is larger than any record this check reads`
    if (total >= MIN_RECORD_LENGTH && total <= f.size - pos) p = this.window.load(pos, total)
    const req = checkRecord(this.window.buf, p, p + this.window.available(pos), true)
    if (req.status === 'BLANK') return 'a blank (end-of-file) record starts there'
    if (req.status !== 'OK') return req.reason ?? req.status
    if (req.commitLogOffset !== phy) return `the record there says it is at offset ${req.commitLogOffset} (not a record start)`
    return req
  }

  close(): void {
    this.window.close()
  }
}

/**
 * The commit-log files as the recovery classifier reads them: positioned reads, clipped to what
 * each file holds; a file deleted meanwhile reads as empty.
 */
export function fileScanSource(files: readonly Segment[], fileSize: number): ScanSource {
  return {
    fileCount: files.length,
    fileSize,
    fileStart: (index) => files[index].start,
    read(index, from, to) {
      const f = files[index]
      const end = f === undefined ? 0 : Math.min(to, f.size, fileSize)
      if (end <= from) return Buffer.alloc(0)
      let fd: number
      try {
        fd = fs.openSync(f.path, 'r')
      } catch (error) {
        if (errorCode(error) === 'ENOENT') return Buffer.alloc(0)
        throw error
      }
      try {
        const buf = Buffer.allocUnsafe(end - from)
        return buf.subarray(0, readFully(fd, buf, 0, end - from, from))
      } finally {
        fs.closeSync(fd)
      }
    },
  }
}
