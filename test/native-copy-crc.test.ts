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

/** Copies `pairs` ([start, length]) of src packed one after another; returns dst, CRCs and offsets. */
function packed(src: Uint8Array, pairs: number[][], withCrc = true) {
  const offsets = new Float64Array(pairs.length)
  let total = 0
  pairs.forEach(([, n], k) => {
    offsets[k] = total
    total += n
  })
  const dst = Buffer.alloc(total, 0xee)
  const crcs = withCrc ? new Int32Array(pairs.length).fill(-7) : null
  native.copyCrcRanges(src, new Float64Array(pairs.flat()), pairs.length, dst, offsets, crcs)
  return { dst, crcs, offsets }
}

describe('copyCrcRanges', () => {
  it("copies each range and gives zlib's CRC-32 & 0x7fffffff of it, at every length 0..600 and alignment", () => {
    const src = noise(80_000)
    const pairs: number[][] = []
    for (let n = 0; n <= 600; n++) pairs.push([(n * 7) % 16, n])
    for (const n of [1023, 1024, 4096 + 7, 65_536]) for (let at = 0; at < 16; at += 5) pairs.push([at + 3, n])
    const { dst, crcs, offsets } = packed(src, pairs)
    const wrongCopies = pairs.filter(([at, n], k) => !dst.subarray(offsets[k], offsets[k] + n).equals(src.subarray(at, at + n)))
    const wrongCrcs = pairs.filter(([at, n], k) => crcs![k] !== bodyCrc(src.subarray(at, at + n)))
    expect(wrongCopies).toEqual([])
    expect(wrongCrcs).toEqual([])
    // Every destination byte was written (the ranges are packed end to end).
    expect(dst.length).toBe(pairs.reduce((s, [, n]) => s + n, 0))
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

  it('copies only, leaving no CRC, when crcOut is null', () => {
    const src = noise(1000, 5)
    const { dst } = packed(
      src,
      [
        [10, 300],
        [500, 17],
      ],
      false,
    )
    expect(dst.equals(Buffer.concat([src.subarray(10, 310), src.subarray(500, 517)]))).toBe(true)
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
      const { dst, crcs } = packed(src, [
        [60_000, 5536],
        [1, 255],
      ])
      expect(dst.equals(Buffer.concat([bytes.subarray(60_000), bytes.subarray(1, 256)]))).toBe(true)
      expect(crcs![0]).toBe(bodyCrc(bytes.subarray(60_000)))
      handle.close()
      // A closed mapping's buffer is empty: any range is outside it.
      expect(() => native.copyCrcRanges(src, new Float64Array([0, 1]), 1, dst, new Float64Array([0]), null)).toThrow(RangeError)
    } finally {
      handle.close()
    }
  })

  it('a range outside src or dst, a bad position, an overlap or a count past the arrays is a RangeError, and nothing is written', () => {
    const src = Buffer.alloc(100, 1)
    const dst = Buffer.alloc(50, 0)
    const crcs = new Int32Array([11, 22])
    const call = (ranges: number[], count: number, offsets: number[], target: Uint8Array = dst, from: Uint8Array = src) =>
      native.copyCrcRanges(from, new Float64Array(ranges), count, target, new Float64Array(offsets), crcs)
    // The first range is fine; the second is bad: neither is written.
    expect(() => call([0, 10, 95, 6], 2, [0, 10])).toThrow(RangeError)
    expect(() => call([0, 10, 0, 10], 2, [0, 45])).toThrow(RangeError)
    expect(() => call([-1, 10], 1, [0])).toThrow(RangeError)
    expect(() => call([0.5, 10], 1, [0])).toThrow(RangeError)
    expect(() => call([0, Number.NaN], 1, [0])).toThrow(RangeError)
    expect(() => call([0, 10], 1, [Number.POSITIVE_INFINITY])).toThrow(RangeError)
    expect(() => call([0, 10], 1, [-3])).toThrow(RangeError)
    expect(() => call([0, 10], 2, [0, 0])).toThrow(RangeError)
    expect(() => call([0, 10, 0, 10], 2, [0])).toThrow(RangeError)
    expect(() => call([0, 10, 0, 10, 0, 10], 3, [0, 0, 0])).toThrow(RangeError)
    expect(() => call([0, 10], -1, [0])).toThrow(RangeError)
    expect(() => call([0, 10], 1.5, [0])).toThrow(RangeError)
    // Overlapping source and destination in one buffer.
    expect(() => call([0, 20], 1, [10], src, src)).toThrow(RangeError)
    expect(dst.every((b) => b === 0)).toBe(true)
    expect([...crcs]).toEqual([11, 22])
    // Disjoint ranges of one buffer are fine.
    call([0, 20], 1, [50], src, src)
  })

  it('wrong argument types are TypeErrors', () => {
    const f = (args: unknown[]) => (native.copyCrcRanges as (...a: unknown[]) => void)(...args)
    const ok = [Buffer.alloc(8), new Float64Array([0, 4]), 1, Buffer.alloc(8), new Float64Array([0]), new Int32Array(1)]
    f(ok)
    for (const [index, bad] of [
      [0, new Uint16Array(4)],
      [0, 'bytes'],
      [1, new Int32Array([0, 4])],
      [2, '1'],
      [3, new ArrayBuffer(8)],
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
