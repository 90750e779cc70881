// The shared byte helpers: longs as numbers (checked against BigInt's encoding), Java's string
// hash and its continuation, and the per-owner DataView cache.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

import {
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
