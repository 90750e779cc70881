// RocketMQ 4.9's HA wire format: the slave reports its commit-log max offset as one 8-byte
// big-endian long; the master answers with frames of an 8-byte big-endian offset, a 4-byte
// big-endian body size and that many raw commit-log bytes. Size 0 is a heartbeat.
import { Buffer } from 'node:buffer'

/** A slave's report: its commit-log max offset, a big-endian long, nothing else. */
export const REPORT_BYTES = 8
/** A master's frame header: offset (long) then body size (int), big-endian. */
export const FRAME_HEADER_BYTES = 12
export const FRAME_OFFSET_AT = 0
export const FRAME_SIZE_AT = 8

/** RocketMQ's slave read buffer is 4 MiB and a frame must fit in it with its header. */
export const MAX_FRAME_BODY_BYTES = 4 * 1024 * 1024 - FRAME_HEADER_BYTES

export function encodeReport(offset: number): Buffer {
  const buffer = Buffer.allocUnsafe(REPORT_BYTES)
  buffer.writeBigInt64BE(BigInt(offset), 0)
  return buffer
}

export function encodeFrameHeader(offset: number, size: number): Buffer {
  const buffer = Buffer.allocUnsafe(FRAME_HEADER_BYTES)
  buffer.writeBigInt64BE(BigInt(offset), FRAME_OFFSET_AT)
  buffer.writeInt32BE(size, FRAME_SIZE_AT)
  return buffer
}

/** A long read as a number; NaN when it is negative or beyond what a number holds exactly. */
function readOffset(buffer: Buffer, at: number): number {
  const value = buffer.readBigInt64BE(at)
  return value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.NaN : Number(value)
}

/** Collects chunks until whole units can be read; what is left waits for the next chunk. */
class Accumulator {
  protected pending: Buffer = Buffer.alloc(0)

  protected push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
  }

  /** Bytes received that do not yet make a whole unit. */
  get buffered(): number {
    return this.pending.length
  }
}

/**
 * The master's side: reads reports. Every whole report counts (the newest is what matters); a
 * negative offset or one past 2^53 is refused with why.
 */
export class ReportReader extends Accumulator {
  /** The offsets of the whole reports in `chunk` (with what was left before), or an error. */
  read(chunk: Buffer): number[] | Error {
    this.push(chunk)
    const offsets: number[] = []
    let at = 0
    while (this.pending.length - at >= REPORT_BYTES) {
      const offset = readOffset(this.pending, at)
      if (Number.isNaN(offset)) return new Error(`bad report: offset ${this.pending.readBigInt64BE(at)} is out of range`)
      offsets.push(offset)
      at += REPORT_BYTES
    }
    this.pending = this.pending.subarray(at)
    return offsets
  }
}

export interface Frame {
  offset: number
  body: Buffer
}

/**
 * The slave's side: reads frames one at a time, so that each header is checked against the
 * slave's offset after the frame before it was appended. A header is checked before its body
 * arrives (as RocketMQ's slave does): an out-of-range offset or a size above `maxBody` is an error.
 */
export class FrameReader extends Accumulator {
  private at = 0

  constructor(private readonly maxBody: number) {
    super()
  }

  add(chunk: Buffer): void {
    this.pending = this.pending.subarray(this.at)
    this.at = 0
    this.push(chunk)
  }

  /** The next whole frame, null until one has arrived, or an error about a bad header. */
  next(checkHeader: (offset: number) => string | null): Frame | null | Error {
    if (this.pending.length - this.at < FRAME_HEADER_BYTES) return null
    const offset = readOffset(this.pending, this.at + FRAME_OFFSET_AT)
    const size = this.pending.readInt32BE(this.at + FRAME_SIZE_AT)
    if (Number.isNaN(offset)) return new Error(`bad frame: offset ${this.pending.readBigInt64BE(this.at)} is out of range`)
    if (size < 0 || size > this.maxBody) return new Error(`bad frame: body size ${size} is outside 0..${this.maxBody}`)
    const refused = checkHeader(offset)
    if (refused !== null) return new Error(refused)
    const bodyAt = this.at + FRAME_HEADER_BYTES
    if (this.pending.length - bodyAt < size) return null
    this.at = bodyAt + size
    return { offset, body: this.pending.subarray(bodyAt, bodyAt + size) }
  }

  override get buffered(): number {
    return this.pending.length - this.at
  }
}
