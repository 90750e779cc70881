// Body CRCs of a run of records computed ahead, in one native call per chunk: a recovery scan
// checks every body CRC, and one native call per record cost more than the CRC itself (a 256-byte
// body hashes in tens of nanoseconds; the call took about a microsecond). The walk here only
// finds the bodies (TOTALSIZE, magic, sysFlag, BODYLENGTH); checkRecord still decides every record
// and computes the CRC itself wherever the walk stopped or disagrees.
import { native } from '../../native.js'
import { bodyOffset, MESSAGE_MAGIC_CODE, MIN_RECORD_LENGTH, OFFSET_MAGIC, OFFSET_SYSFLAG, OFFSET_TOTALSIZE } from './record.js'

/** Records per native call, and the bytes a chunk may span. */
const CHUNK_RECORDS = 4096
const CHUNK_BYTES = 4 * 1024 * 1024

export class CrcPrefetch {
  private readonly positions = new Int32Array(CHUNK_RECORDS)
  private readonly ranges = new Int32Array(2 * CHUNK_RECORDS)
  private readonly crcs = new Int32Array(CHUNK_RECORDS)
  private count = 0
  private next = 0
  private bytes: Buffer | null = null

  /**
   * The CRC (RocketMQ's BODYCRC: crc32 & 0x7fffffff) of the body of the record at buf[pos], or -1
   * when the walk ahead could not find one there. Positions must be asked in increasing order
   * for the chunk to be reused; any other position starts a new chunk at it.
   */
  crcAt(buf: Buffer, pos: number, limit: number, dv: DataView): number {
    if (buf === this.bytes && this.next < this.count && this.positions[this.next] === pos) return this.crcs[this.next++]
    this.fill(buf, pos, limit, dv)
    if (this.count === 0) return -1
    this.next = 1
    return this.crcs[0]
  }

  /** Finds up to a chunk of bodies from buf[pos] (records chained by TOTALSIZE) and hashes them. */
  private fill(buf: Buffer, pos: number, limit: number, dv: DataView): void {
    this.bytes = buf
    this.count = 0
    this.next = 0
    const end = Math.min(limit, buf.length, dv.byteLength)
    const stop = Math.min(end, pos + CHUNK_BYTES)
    let count = 0
    let p = pos
    while (count < CHUNK_RECORDS && p >= 0 && p + MIN_RECORD_LENGTH <= stop) {
      const totalSize = dv.getInt32(p + OFFSET_TOTALSIZE)
      if (dv.getInt32(p + OFFSET_MAGIC) !== MESSAGE_MAGIC_CODE) break
      if (totalSize < MIN_RECORD_LENGTH || totalSize > end - p) break
      const bodyAt = p + bodyOffset(dv.getInt32(p + OFFSET_SYSFLAG))
      if (bodyAt > p + totalSize) break
      const bodyLength = dv.getInt32(bodyAt - 4)
      const length = bodyLength > 0 ? bodyLength : 0
      if (bodyAt + length > p + totalSize) break
      this.positions[count] = p
      this.ranges[2 * count] = bodyAt
      this.ranges[2 * count + 1] = length
      count++
      p += totalSize
    }
    if (count > 0) native.crc32Ranges(buf, this.ranges, count, this.crcs)
    this.count = count
  }
}
