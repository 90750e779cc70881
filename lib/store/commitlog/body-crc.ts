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

/** What WrittenBodyCrcs fills in: a prepared record whose CRC was left for after its write. */
export interface PendingBodyCrc {
  bodyCRC: number
}

/**
 * Body CRCs of records a put batch has just written, computed on the written bytes: one native
 * call per buffer written into, instead of one per body before the write (Node-API's per-element
 * calls cost more than the CRC of a small body). Each record's BODYCRC field is filled in before
 * the batch returns, so before anything is dispatched, acknowledged or flushed on purpose; a
 * background flush or a crash that catches a record before that sees a wrong CRC, which recovery
 * treats as a torn write of an unacknowledged record.
 */
export class WrittenBodyCrcs {
  private target: Uint8Array | null = null
  private view: DataView | null = null
  private ranges = new Int32Array(512)
  private fields = new Int32Array(256)
  private out = new Int32Array(256)
  private owners: (PendingBodyCrc | null)[] = []
  private count = 0

  /** Queues the body at target[bodyAt, bodyAt + length), whose CRC field is at target[field]. */
  add(target: Uint8Array, view: DataView, field: number, bodyAt: number, length: number, owner: PendingBodyCrc): void {
    if (target !== this.target) {
      this.finish()
      this.target = target
      this.view = view
    }
    const k = this.count
    if (k === this.fields.length) this.grow()
    this.ranges[2 * k] = bodyAt
    this.ranges[2 * k + 1] = length
    this.fields[k] = field
    this.owners[k] = owner
    this.count = k + 1
  }

  /** Computes every queued CRC and writes it into its field and its record. */
  finish(): void {
    const count = this.count
    const target = this.target
    const view = this.view
    this.count = 0
    this.target = null
    this.view = null
    if (count === 0 || target === null || view === null) return
    native.crc32Ranges(target, this.ranges, count, this.out)
    for (let k = 0; k < count; k++) {
      const crc = this.out[k]
      view.setInt32(this.fields[k], crc)
      ;(this.owners[k] as PendingBodyCrc).bodyCRC = crc
      this.owners[k] = null
    }
  }

  private grow(): void {
    const n = this.fields.length * 2
    const ranges = new Int32Array(2 * n)
    ranges.set(this.ranges)
    this.ranges = ranges
    const fields = new Int32Array(n)
    fields.set(this.fields)
    this.fields = fields
    this.out = new Int32Array(n)
  }
}
