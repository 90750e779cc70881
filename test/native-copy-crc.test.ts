// native splitCopyCrc: a read's records and their bodies copied apart, with the bodies' CRCs, in one call. The
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

/**
 * One table row per [start, length, innerFrom, innerLength] (innerFrom relative to start): the
 * bytes around each inner range to `outer` from outerAt, the inner ranges to `inner` from innerAt,
 * with their CRCs.
 */
function split(src: Uint8Array, rows: number[][], options: { outerAt?: number; innerAt?: number; withCrc?: boolean } = {}) {
  const { outerAt = 0, innerAt = 0, withCrc = true } = options
  const table = new Float64Array(4 * rows.length)
  let outerBytes = 0
  let innerBytes = 0
  rows.forEach(([at, n, from, m], k) => {
    table.set([at, n, at + from, m], 4 * k)
    outerBytes += n - m
    innerBytes += m
  })
  const outer = Buffer.alloc(outerAt + outerBytes + 3, 0xee)
  const inner = Buffer.alloc(innerAt + innerBytes + 3, 0xee)
  const crcs = withCrc ? new Int32Array(rows.length).fill(-7) : null
  native.splitCopyCrc(src, table, rows.length, outer, outerAt, inner, innerAt, crcs)
  return { outer, inner, crcs }
}

/** What split() should have written: each row's bytes around its inner range, and its inner range. */
function expected(src: Uint8Array, rows: number[][]) {
  const outer: Uint8Array[] = []
  const inner: Uint8Array[] = []
  for (const [at, n, from, m] of rows) {
    outer.push(src.subarray(at, at + from), src.subarray(at + from + m, at + n))
    inner.push(src.subarray(at + from, at + from + m))
  }
  return { outer: Buffer.concat(outer), inner: Buffer.concat(inner), inners: inner }
}

describe('splitCopyCrc', () => {
  it("copies the bytes around each inner range and the inner range apart, with zlib's CRC-32 & 0x7fffffff of it, at every length 0..600 and alignment", () => {
    const src = noise(80_000)
    const rows: number[][] = []
    for (let n = 0; n <= 600; n++) {
      const from = n === 0 ? 0 : (n * 13) % n
      rows.push([(n * 7) % 16, n, from, ((n * 5) % (n - from + 1)) | 0])
    }
    for (const n of [1023, 1024, 4096 + 7, 65_536]) for (let at = 0; at < 16; at += 5) rows.push([at + 3, n, 92, n - 92 - at])
    // Inner ranges at the start, at the end, empty and whole.
    rows.push([100, 50, 0, 10], [200, 50, 40, 10], [300, 50, 20, 0], [400, 50, 0, 50])
    for (const [outerAt, innerAt] of [
      [0, 0],
      [5, 77],
    ]) {
      const { outer, inner, crcs } = split(src, rows, { outerAt, innerAt })
      const want = expected(src, rows)
      expect(outer.subarray(outerAt, outerAt + want.outer.length).equals(want.outer)).toBe(true)
      expect(inner.subarray(innerAt, innerAt + want.inner.length).equals(want.inner)).toBe(true)
      // Nothing before the starts or past the ends is touched.
      expect([...outer.subarray(0, outerAt), ...outer.subarray(outerAt + want.outer.length)].every((b) => b === 0xee)).toBe(true)
      expect([...inner.subarray(0, innerAt), ...inner.subarray(innerAt + want.inner.length)].every((b) => b === 0xee)).toBe(true)
      const wrongCrcs = want.inners.filter((bytes, k) => crcs![k] !== bodyCrc(bytes))
      expect(wrongCrcs).toEqual([])
    }
  })

  it('agrees with crc32Ranges over the same bytes, and gives no CRC when crcOut is null', () => {
    const src = noise(10_000, 99)
    const rows = [
      [0, 300, 20, 256],
      [256, 400, 0, 308],
      [1000, 100, 37, 63],
      [5000, 4999, 0, 4999],
    ]
    const { crcs } = split(src, rows)
    const out = new Int32Array(rows.length)
    native.crc32Ranges(src, new Int32Array(rows.flatMap(([at, , from, m]) => [at + from, m])), rows.length, out)
    expect([...crcs!]).toEqual([...out])
    const { inner } = split(src, rows, { withCrc: false })
    expect(inner.subarray(0, expected(src, rows).inner.length).equals(expected(src, rows).inner)).toBe(true)
  })

  it('reads from a real mapping of a file, and a closed one is empty', () => {
    const dir = tempDir()
    const file = join(dir, 'f')
    const bytes = noise(65_536, 7)
    fs.writeFileSync(file, bytes)
    const fd = fs.openSync(file, 'r')
    const handle = native.map(fd, 65_536, false)
    fs.closeSync(fd)
    try {
      const src = new Uint8Array(handle.buffer)
      const rows = [
        [60_000, 5536, 16, 5000],
        [1, 255, 100, 0],
      ]
      const { outer, inner, crcs } = split(src, rows)
      const want = expected(bytes, rows)
      expect(outer.subarray(0, want.outer.length).equals(want.outer)).toBe(true)
      expect(inner.subarray(0, want.inner.length).equals(want.inner)).toBe(true)
      expect(crcs![0]).toBe(bodyCrc(bytes.subarray(60_016, 65_016)))
      handle.close()
      // A closed mapping's buffer is empty: any range is outside it.
      const out = Buffer.alloc(8)
      expect(() => native.splitCopyCrc(src, new Float64Array([0, 1, 0, 0]), 1, out, 0, out, 4, null)).toThrow(RangeError)
    } finally {
      handle.close()
    }
  })

  it('with a null inner, copies only the bytes around each inner range (the inner ones stay where they are); crcOut must then be null', () => {
    const src = noise(4096)
    const rows = [
      [10, 300, 88, 200],
      [400, 50, 0, 50],
      [500, 120, 30, 0],
    ]
    const table = new Float64Array(rows.flatMap(([at, n, from, m]) => [at, n, at + from, m]))
    const want = expected(src, rows)
    const outer = Buffer.alloc(7 + want.outer.length + 3, 0xee)
    native.splitCopyCrc(src, table, rows.length, outer, 7, null, 0, null)
    expect(outer.subarray(7, 7 + want.outer.length).equals(want.outer)).toBe(true)
    // Nothing before or after what was asked for.
    expect(outer.subarray(0, 7).every((b) => b === 0xee)).toBe(true)
    expect(outer.subarray(7 + want.outer.length).every((b) => b === 0xee)).toBe(true)
    // The outer bytes must still fit; a CRC without an inner destination is a TypeError.
    expect(() => native.splitCopyCrc(src, table, rows.length, Buffer.alloc(want.outer.length - 1), 0, null, 0, null)).toThrow(RangeError)
    expect(() => native.splitCopyCrc(src, table, rows.length, outer, 0, null, 0, new Int32Array(3))).toThrow(TypeError)
    expect(() => native.splitCopyCrc(src, table, rows.length, outer, 0, 'x' as unknown as Uint8Array, 0, null)).toThrow(TypeError)
  })

  it('a range outside src, an inner range outside its range, a bad position, a destination too small or overlapping src, or a count past the arrays is a RangeError, and nothing is written', () => {
    const src = Buffer.alloc(100, 1)
    const outer = Buffer.alloc(60, 0)
    const inner = Buffer.alloc(50, 0)
    const crcs = new Int32Array([11, 22])
    const ok = [0, 20, 5, 10]
    const call = (rows: number[], count: number, o: Uint8Array = outer, oAt = 0, i: Uint8Array = inner, iAt = 0) =>
      native.splitCopyCrc(src, new Float64Array(rows), count, o, oAt, i, iAt, crcs)
    // The first row is fine; the second is bad: neither is written.
    expect(() => call([...ok, 95, 6, 95, 1], 2)).toThrow(RangeError) // past src
    expect(() => call([...ok, 10, 20, 5, 1], 2)).toThrow(RangeError) // inner starts before its range
    expect(() => call([...ok, 10, 20, 25, 6], 2)).toThrow(RangeError) // inner ends after its range
    expect(() => call([...ok, 0, 80, 0, 10], 2)).toThrow(RangeError) // outer bytes do not fit (10 + 70 > 60)
    expect(() => call([...ok, 0, 45, 0, 45], 2)).toThrow(RangeError) // inner bytes do not fit (10 + 45 > 50)
    expect(() => call(ok, 1, outer, 51)).toThrow(RangeError) // outerAt + 10 > 60
    expect(() => call(ok, 1, outer, 0, inner, 41)).toThrow(RangeError)
    for (const bad of [-1, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      for (let field = 0; field < 4; field++) {
        const row = [...ok]
        row[field] = bad
        expect(() => call(row, 1), `field ${field} = ${bad}`).toThrow(RangeError)
      }
      expect(() => call(ok, 1, outer, bad), `outerAt = ${bad}`).toThrow(RangeError)
      expect(() => call(ok, 1, outer, 0, inner, bad), `innerAt = ${bad}`).toThrow(RangeError)
    }
    expect(() => call(ok, 2)).toThrow(RangeError)
    expect(() => call([...ok, ...ok], -1)).toThrow(RangeError)
    expect(() => call([...ok, ...ok], 1.5)).toThrow(RangeError)
    expect(() => native.splitCopyCrc(src, new Float64Array([...ok, ...ok, ...ok]), 3, outer, 0, inner, 0, crcs)).toThrow(RangeError)
    // A destination overlapping src (views of one buffer).
    expect(() => call(ok, 1, src.subarray(10, 40))).toThrow(RangeError)
    expect(() => call(ok, 1, outer, 0, src.subarray(15, 30))).toThrow(RangeError)
    expect(outer.every((b) => b === 0)).toBe(true)
    expect(inner.every((b) => b === 0)).toBe(true)
    expect([...crcs]).toEqual([11, 22])
    // A destination in the same buffer but past what is read is fine.
    native.splitCopyCrc(src.subarray(0, 20), new Float64Array(ok), 1, src.subarray(40, 60), 0, src.subarray(60, 80), 0, crcs)
    expect(crcs[0]).toBe(bodyCrc(Buffer.alloc(10, 1)))
  })

  it('wrong argument types are TypeErrors', () => {
    const f = (args: unknown[]) => (native.splitCopyCrc as (...a: unknown[]) => void)(...args)
    const ok = [Buffer.alloc(8), new Float64Array([0, 4, 1, 2]), 1, Buffer.alloc(8), 0, Buffer.alloc(8), 0, new Int32Array(1)]
    f(ok)
    for (const [index, bad] of [
      [0, new Uint16Array(4)],
      [0, 'bytes'],
      [1, new Int32Array(4)],
      [2, '1'],
      [3, new ArrayBuffer(8)],
      [3, null],
      [4, '0'],
      [5, [0]],
      [6, null],
      [7, new Uint32Array(1)],
    ] as [number, unknown][]) {
      const args: unknown[] = [...ok]
      args[index] = bad
      expect(() => f(args), `argument ${index}`).toThrow(TypeError)
    }
    expect(() => f(ok.slice(0, 7))).toThrow(TypeError)
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
