// The shared byte helpers: longs as numbers (checked against BigInt's encoding), Java's string
// hash and its continuation, the per-owner DataView cache, and the Buffer view constructor.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

import {
  BufferView,
  continueJavaBytesHash,
  continueJavaStringHash,
  DataViewCache,
  getInt64,
  javaStringHashCode,
  readInt64BE,
  readUInt64BE,
  setInt64,
  writeInt64BE,
} from '../lib/store/bytes.js'

const safe = fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER })

describe('longs', () => {
  it("write the two's-complement big-endian bytes BigInt writes, for every safe integer, and read them back", () => {
    fc.assert(
      fc.property(safe, (value) => {
        const ours = Buffer.alloc(8)
        writeInt64BE(ours, 0, value)
        const reference = Buffer.alloc(8)
        reference.writeBigInt64BE(BigInt(value))
        expect(ours).toEqual(reference)
        expect(readInt64BE(ours, 0)).toBe(value)
        const view = new DataView(new ArrayBuffer(12))
        setInt64(view, 3, value)
        expect(getInt64(view, 3)).toBe(value)
      }),
    )
    for (const value of [0, -1, 2 ** 32, -(2 ** 32), 2 ** 32 - 1, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]) {
      const b = Buffer.alloc(8)
      writeInt64BE(b, 0, value)
      expect(b.readBigInt64BE(0)).toBe(BigInt(value))
    }
  })

  it('readUInt64BE reads a negative long as a large positive number (a damaged timestamp reads as far future)', () => {
    const b = Buffer.alloc(8)
    writeInt64BE(b, 0, -1)
    expect(readUInt64BE(b, 0)).toBe(2 ** 64 - 1)
  })
})

describe('Java string hash', () => {
  it('matches known values of String.hashCode', () => {
    expect(javaStringHashCode('')).toBe(0)
    expect(javaStringHashCode('hello')).toBe(99162322)
    expect(javaStringHashCode('polygenelubricants')).toBe(-2147483648)
  })

  it('continues over a slice as if the strings were joined, and over ASCII bytes as over the text', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (prefix, rest) => {
        const whole = javaStringHashCode(prefix + rest)
        expect(continueJavaStringHash(javaStringHashCode(prefix), `xx${rest}yy`, 2, 2 + rest.length)).toBe(whole)
      }),
    )
    const ascii = 'TopicTest#OrderID188'
    expect(continueJavaBytesHash(0, Buffer.from(ascii, 'latin1'), 0, ascii.length)).toBe(javaStringHashCode(ascii))
  })
})

describe('DataViewCache', () => {
  it('reuses the view of the buffer last asked for, and forgets it when cleared', () => {
    const cache = new DataViewCache()
    const a = Buffer.alloc(16)
    const b = Buffer.alloc(16)
    const viewA = cache.of(a)
    expect(cache.of(a)).toBe(viewA)
    expect(cache.of(b)).not.toBe(viewA)
    const viewB = cache.of(b)
    cache.clear()
    const again = cache.of(b)
    expect(again).not.toBe(viewB)
    expect(again.byteLength).toBe(16)
  })
})

describe('BufferView', () => {
  it("makes Buffers that view the ArrayBuffer (no copy), with Buffer.from's prototype, offset and length", () => {
    const bytes = new ArrayBuffer(16)
    const view = new BufferView(bytes, 4, 8)
    const from = Buffer.from(bytes, 4, 8)
    expect(Buffer.isBuffer(view)).toBe(true)
    expect(Object.getPrototypeOf(view)).toBe(Object.getPrototypeOf(from))
    expect([view.buffer === bytes, view.byteOffset, view.length]).toEqual([true, 4, 8])
    new Uint8Array(bytes)[5] = 0x41
    expect(view[1]).toBe(0x41)
    view.write('zz', 2)
    expect(from.toString('latin1', 2, 4)).toBe('zz')
    // Buffer methods work on it as on any Buffer, subarray included (which makes a Buffer too).
    expect(Buffer.isBuffer(view.subarray(1, 3))).toBe(true)
    expect(view.readUInt8(1)).toBe(0x41)
  })
})
