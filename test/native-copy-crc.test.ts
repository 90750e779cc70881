// native copyCrcRanges: a read's records copied into one buffer with their CRCs, in one call. The
// addon holds no policy: ranges in, bytes and checksums out; bad arguments throw, never crash.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { describe, expect, it } from 'vitest'

import { native } from '../lib/native.js'
import { tempDir } from './helpers/tmp.js'

const bodyCrc = (b: Uint8Array) => (b.length === 0 ? 0 : crc32(b) & 0x7fffffff)

function noise(length: number, seed = 0x12345678): Buffer {
  const bytes = Buffer.alloc(length)
  let x = seed
  for (let i = 0; i < length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    bytes[i] = x & 0xff
  }
  return bytes
}

/** One table row per [start, length] pair: the whole range to `whole`, packed; the part (the
 * range without its first `skip` bytes) to `part`, packed, with its CRC. */
function packed(src: Uint8Array, pairs: number[][], options: { skip?: number; withWhole?: boolean; withCrc?: boolean } = {}) {
  const { skip = 0, withWhole = true, withCrc = true } = options
  const table = new Float64Array(6 * pairs.length)
  let wholeBytes = 0
  let partBytes = 0
  pairs.forEach(([at, n], k) => {
    const cut = Math.min(skip, n)
    table.set([at, n, wholeBytes, at + cut, n - cut, partBytes], 6 * k)
    wholeBytes += n
    partBytes += n - cut
  })
  const whole = Buffer.alloc(wholeBytes, 0xee)
  const part = Buffer.alloc(partBytes, 0xee)
  const crcs = withCrc ? new Int32Array(pairs.length).fill(-7) : null
  native.copyCrcRanges(src, table, pairs.length, withWhole ? whole : null, part, crcs)
  return { whole, part, crcs, table }
}

describe('copyCrcRanges', () => {
  it("copies each range whole and its part, and gives zlib's CRC-32 & 0x7fffffff of the part, at every length 0..600 and alignment", () => {
    const src = noise(80_000)
    const pairs: number[][] = []
    for (let n = 0; n <= 600; n++) pairs.push([(n * 7) % 16, n])
    for (const n of [1023, 1024, 4096 + 7, 65_536]) for (let at = 0; at < 16; at += 5) pairs.push([at + 3, n])
    for (const skip of [0, 5, 92]) {
      const { whole, part, crcs, table } = packed(src, pairs, { skip })
      const wrongWhole = pairs.filter(
        ([at, n], k) => !whole.subarray(table[6 * k + 2], table[6 * k + 2] + n).equals(src.subarray(at, at + n)),
      )
      const wrongPart = pairs.filter((_, k) => {
        const [, , , from, n, to] = table.subarray(6 * k, 6 * k + 6)
        return !part.subarray(to, to + n).equals(src.subarray(from, from + n))
      })
      const wrongCrcs = pairs.filter((_, k) => crcs![k] !== bodyCrc(src.subarray(table[6 * k + 3], table[6 * k + 3] + table[6 * k + 4])))
      expect([skip, wrongWhole, wrongPart, wrongCrcs]).toEqual([skip, [], [], []])
    }
  })

  it('agrees with crc32Ranges over the same bytes', () => {
    const src = noise(10_000, 99)
    const pairs = [
      [0, 256],
      [256, 308],
      [1000, 63],
      [2000, 64],
      [5000, 4999],
    ]
    const { crcs } = packed(src, pairs)
    const out = new Int32Array(pairs.length)
    native.crc32Ranges(src, new Int32Array(pairs.flat()), pairs.length, out)
    expect([...crcs!]).toEqual([...out])
  })

  it('copies parts only when whole is null, and gives no CRC when crcOut is null', () => {
    const src = noise(1000, 5)
    const { whole, part } = packed(
      src,
      [
        [10, 300],
        [500, 17],
      ],
      { skip: 2, withWhole: false, withCrc: false },
    )
    expect(part.equals(Buffer.concat([src.subarray(12, 310), src.subarray(502, 517)]))).toBe(true)
    expect(whole.every((b) => b === 0xee)).toBe(true)
  })

  it('reads from a real mapping of a file', () => {
    const dir = tempDir()
    const file = join(dir, 'f')
    const bytes = noise(65_536, 7)
    fs.writeFileSync(file, bytes)
    const fd = fs.openSync(file, 'r')
    const handle = native.map(fd, 65_536, false)
    fs.closeSync(fd)
    try {
      const src = new Uint8Array(handle.buffer)
      const { whole, part, crcs } = packed(
        src,
        [
          [60_000, 5536],
          [1, 255],
        ],
        { skip: 16 },
      )
      expect(whole.equals(Buffer.concat([bytes.subarray(60_000), bytes.subarray(1, 256)]))).toBe(true)
      expect(part.equals(Buffer.concat([bytes.subarray(60_016), bytes.subarray(17, 256)]))).toBe(true)
      expect(crcs![0]).toBe(bodyCrc(bytes.subarray(60_016)))
      handle.close()
      // A closed mapping's buffer is empty: any range is outside it.
      expect(() => native.copyCrcRanges(src, new Float64Array([0, 1, 0, 0, 1, 0]), 1, whole, part, null)).toThrow(RangeError)
    } finally {
      handle.close()
    }
  })

  it('a range outside src or its destination, a bad position, an overlap or a count past the arrays is a RangeError, and nothing is written', () => {
    const src = Buffer.alloc(100, 1)
    const whole = Buffer.alloc(60, 0)
    const part = Buffer.alloc(50, 0)
    const crcs = new Int32Array([11, 22])
    const ok = [0, 10, 0, 0, 10, 0]
    const call = (rows: number[], count: number, from: Uint8Array = src, w: Uint8Array | null = whole, p: Uint8Array = part) =>
      native.copyCrcRanges(from, new Float64Array(rows), count, w, p, crcs)
    // The first row is fine; the second is bad: neither is written.
    expect(() => call([...ok, 95, 6, 10, 0, 1, 10], 2)).toThrow(RangeError)
    expect(() => call([...ok, 0, 10, 55, 0, 1, 10], 2)).toThrow(RangeError)
    expect(() => call([...ok, 0, 1, 10, 0, 10, 45], 2)).toThrow(RangeError)
    expect(() => call([...ok, 0, 1, 10, 99, 2, 0], 2)).toThrow(RangeError)
    for (const bad of [-1, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      for (let field = 0; field < 6; field++) {
        const row = [...ok]
        row[field] = bad
        expect(() => call(row, 1), `field ${field} = ${bad}`).toThrow(RangeError)
      }
    }
    expect(() => call(ok, 2)).toThrow(RangeError)
    expect(() => call([...ok, ...ok], -1)).toThrow(RangeError)
    expect(() => call([...ok, ...ok], 1.5)).toThrow(RangeError)
    expect(() => native.copyCrcRanges(src, new Float64Array([...ok, ...ok, ...ok]), 3, whole, part, crcs)).toThrow(RangeError)
    // A destination overlapping its source (one buffer for both).
    expect(() => call([0, 20, 10, 0, 1, 99], 1, src, src, part)).toThrow(RangeError)
    expect(() => call([0, 1, 50, 0, 20, 10], 1, src, whole, src)).toThrow(RangeError)
    expect(whole.every((b) => b === 0)).toBe(true)
    expect(part.every((b) => b === 0)).toBe(true)
    expect([...crcs]).toEqual([11, 22])
    // Disjoint ranges of one buffer are fine.
    call([0, 20, 50, 0, 1, 99], 1, src, src, src)
  })

  it('wrong argument types are TypeErrors', () => {
    const f = (args: unknown[]) => (native.copyCrcRanges as (...a: unknown[]) => void)(...args)
    const ok = [Buffer.alloc(8), new Float64Array([0, 4, 0, 0, 4, 0]), 1, Buffer.alloc(8), Buffer.alloc(8), new Int32Array(1)]
    f(ok)
    for (const [index, bad] of [
      [0, new Uint16Array(4)],
      [0, 'bytes'],
      [1, new Int32Array(6)],
      [2, '1'],
      [3, new ArrayBuffer(8)],
      [4, null],
      [4, [0]],
      [5, new Uint32Array(1)],
    ] as [number, unknown][]) {
      const args: unknown[] = [...ok]
      args[index] = bad
      expect(() => f(args), `argument ${index}`).toThrow(TypeError)
    }
    expect(() => f(ok.slice(0, 5))).toThrow(TypeError)
  })
})

describe('prefetchRanges', () => {
  it('is a hint: it changes nothing, skips ranges outside the bytes, and reads from a closed mapping safely', () => {
    const src = noise(4096, 3)
    const before = Buffer.from(src)
    native.prefetchRanges(src, new Float64Array([0, 4096, 4000, 500, -1, 10, 0.5, 3, Number.NaN, 1]), 5)
    expect(src.equals(before)).toBe(true)
    const dir = tempDir()
    const file = join(dir, 'f')
    fs.writeFileSync(file, before)
    const fd = fs.openSync(file, 'r')
    const handle = native.map(fd, 4096, false)
    fs.closeSync(fd)
    const mapped = new Uint8Array(handle.buffer)
    native.prefetchRanges(mapped, new Float64Array([0, 4096]), 1)
    handle.close()
    // Closed: the view is empty, so every range is outside it and skipped.
    native.prefetchRanges(mapped, new Float64Array([0, 4096]), 1)
  })

  it('wrong types are TypeErrors and a count past the array a RangeError', () => {
    const f = native.prefetchRanges as (...a: unknown[]) => void
    expect(() => f(Buffer.alloc(8), new Float64Array([0, 4]), 2)).toThrow(RangeError)
    expect(() => f(Buffer.alloc(8), new Float64Array([0, 4]), -1)).toThrow(RangeError)
    expect(() => f(new Uint16Array(4), new Float64Array([0, 4]), 1)).toThrow(TypeError)
    expect(() => f(Buffer.alloc(8), new Int32Array([0, 4]), 1)).toThrow(TypeError)
    expect(() => f(Buffer.alloc(8), new Float64Array([0, 4]), '1')).toThrow(TypeError)
    expect(() => f(Buffer.alloc(8), new Float64Array([0, 4]))).toThrow(TypeError)
  })
})
