// Body CRCs of many records in one native call. A read collects the body range of each record it
// is about to serve, then checks them all at once: one crossing into C++ per batch instead of one
// zlib.crc32 call (and one subarray) per message.
import { native } from '../../native.js'

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
