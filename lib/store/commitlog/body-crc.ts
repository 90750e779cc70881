// Body CRCs (RocketMQ's BODYCRC: crc32 & 0x7fffffff) of many records in one native call, with the
// CPU's carry-less multiply where it has one: a read checks every body it serves at once, a batch
// put computes every body's CRC at once, instead of one zlib.crc32 call per message.
import { native } from '../../native.js'

let eachOut = new Int32Array(1024)
const oneRange = new Int32Array(2)
const oneOut = new Int32Array(1)

/** The BODYCRC of one body (a view): one native call, no zlib. */
export function bodyCrcOf(body: Uint8Array): number {
  return bodyCrcAt(body, 0, body.length)
}

/** The BODYCRC of bytes[at, at + length), without making a view of them. */
export function bodyCrcAt(bytes: Uint8Array, at: number, length: number): number {
  oneRange[0] = at
  oneRange[1] = length
  native.crc32Ranges(bytes, oneRange, 1, oneOut)
  return oneOut[0]
}

/**
 * The BODYCRC of each body that is a Uint8Array, -1 for anything else (a string body, or a value
 * the record's validation will refuse): those are computed, or refused, record by record. The
 * result is valid until the next call.
 */
export function bodyCrcsOf(bodies: readonly unknown[]): Int32Array {
  if (eachOut.length < bodies.length) eachOut = new Int32Array(Math.max(bodies.length, eachOut.length * 2))
  native.crc32Each(bodies, eachOut)
  return eachOut
}

export class BodyCrcBatch {
  private ranges = new Int32Array(64)
  private expected = new Int32Array(32)
  private actual = new Int32Array(32)
  count = 0

  /** Forgets the ranges queued. */
  reset(): void {
    this.count = 0
  }

  /** Queues [at, at + length) of the bytes `run` will get, which must have CRC `expected`. */
  add(at: number, length: number, expected: number): void {
    const k = this.count
    if (k === this.expected.length) this.grow()
    this.ranges[2 * k] = at
    this.ranges[2 * k + 1] = length
    this.expected[k] = expected
    this.count = k + 1
  }

  /** Computes every CRC queued over `bytes`; then `failed(k)` says whether range k failed. */
  run(bytes: Uint8Array): void {
    if (this.count === 0) return
    native.crc32Ranges(bytes, this.ranges, this.count, this.actual)
  }

  failed(k: number): boolean {
    return this.actual[k] !== this.expected[k]
  }

  private grow(): void {
    const n = this.expected.length * 2
    const ranges = new Int32Array(2 * n)
    ranges.set(this.ranges)
    const expected = new Int32Array(n)
    expected.set(this.expected)
    this.ranges = ranges
    this.expected = expected
    this.actual = new Int32Array(n)
  }
}
