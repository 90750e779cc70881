// native crc32Ranges (many body CRCs in one call) and what close does to a mapping whose buffer was
// transferred away (anonymous memory instead of an unmap).
import * as fs from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { describe, expect, it } from 'vitest'

import { native } from '../lib/native.js'
import { distInternals, runNodeScript, tempDir } from './helpers/tmp.js'

const bodyCrc = (b: Uint8Array) => (b.length === 0 ? 0 : crc32(b) & 0x7fffffff)

describe('crc32Ranges', () => {
  it("gives zlib's CRC-32 & 0x7fffffff for each range, 0 for an empty one", () => {
    const bytes = Buffer.alloc(5000)
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff
    const pairs = [
      [0, 256],
      [300, 1],
      [301, 0],
      [1000, 4000],
      [4999, 1],
      [17, 63],
      [64, 64],
    ]
    const ranges = new Int32Array(pairs.flat())
    const out = new Int32Array(pairs.length)
    native.crc32Ranges(bytes, ranges, pairs.length, out)
    expect([...out]).toEqual(pairs.map(([at, n]) => bodyCrc(bytes.subarray(at, at + n))))
  })

  it('agrees with zlib on every length 0..600 and on long ranges, at every alignment (the folding path and its tail)', () => {
    const bytes = Buffer.alloc(70_000)
    let x = 0x12345678
    for (let i = 0; i < bytes.length; i++) {
      x ^= x << 13
      x ^= x >>> 17
      x ^= x << 5
      bytes[i] = x & 0xff
    }
    const pairs: number[][] = []
    for (let n = 0; n <= 600; n++) pairs.push([n % 16, n])
    for (const n of [1023, 1024, 4096 + 7, 65_536, 69_000]) for (let at = 0; at < 16; at += 5) pairs.push([at, n])
    const out = new Int32Array(pairs.length)
    native.crc32Ranges(bytes, new Int32Array(pairs.flat()), pairs.length, out)
    const wrong = pairs.filter(([at, n], k) => out[k] !== bodyCrc(bytes.subarray(at, at + n)))
    expect(wrong).toEqual([])
  })

  it('a range outside the bytes or a count past the arrays is a RangeError, and nothing is written', () => {
    const bytes = Buffer.alloc(100)
    const out = new Int32Array([11, 22])
    expect(() => native.crc32Ranges(bytes, new Int32Array([0, 10, 95, 6]), 2, out)).toThrow(RangeError)
    expect(() => native.crc32Ranges(bytes, new Int32Array([-1, 10]), 1, out)).toThrow(RangeError)
    expect(() => native.crc32Ranges(bytes, new Int32Array([0, 10]), 2, out)).toThrow(RangeError)
    expect(() => native.crc32Ranges(bytes, new Int32Array([0, 10, 0, 10, 0, 10]), 3, out)).toThrow(RangeError)
    expect([...out]).toEqual([11, 22])
  })

  it('wrong argument types are TypeErrors', () => {
    const out = new Int32Array(1)
    expect(() => native.crc32Ranges(new Uint16Array(4) as unknown as Uint8Array, new Int32Array(2), 1, out)).toThrow(TypeError)
    expect(() => native.crc32Ranges(Buffer.alloc(4), new Uint32Array(2) as unknown as Int32Array, 1, out)).toThrow(TypeError)
    expect(() => native.crc32Ranges(Buffer.alloc(4), new Int32Array(2), '1' as unknown as number, out)).toThrow(TypeError)
    // Arguments left out are undefined: a TypeError naming the first one missing, not a crash.
    const partial = native.crc32Ranges as unknown as (...args: unknown[]) => void
    expect(() => partial(Buffer.alloc(4), new Int32Array(2), 1)).toThrow(/out has the wrong type/)
    expect(() => partial(Buffer.alloc(4))).toThrow(/ranges has the wrong type/)
    expect(() => partial()).toThrow(/bytes has the wrong type/)
  })
})

describe('crc32Each', () => {
  it('gives each Uint8Array body its BODYCRC and -1 for anything else', () => {
    const slab = Buffer.alloc(4096)
    for (let i = 0; i < slab.length; i++) slab[i] = (i * 7) & 0xff
    const bodies: unknown[] = [
      slab.subarray(0, 256),
      slab.subarray(100, 101),
      Buffer.alloc(0),
      'text',
      null,
      new Uint16Array(4),
      new Uint8Array(slab.buffer, 5, 3000),
    ]
    const out = new Int32Array(bodies.length)
    native.crc32Each(bodies, out)
    expect([...out]).toEqual([
      bodyCrc(slab.subarray(0, 256)),
      bodyCrc(slab.subarray(100, 101)),
      0,
      -1,
      -1,
      -1,
      bodyCrc(slab.subarray(5, 3005)),
    ])
  })

  it('an output shorter than the list is a RangeError', () => {
    expect(() => native.crc32Each([Buffer.alloc(1), Buffer.alloc(1)], new Int32Array(1))).toThrow(RangeError)
  })
})

describe('close of a mapping whose buffer was transferred (child process)', () => {
  it('the transferred buffer stays readable and writable after close, and the file keeps its bytes', () => {
    const dir = tempDir()
    const file = join(dir, 'f')
    fs.writeFileSync(file, Buffer.alloc(65536, 0x61))
    const result = runNodeScript(
      `
      import * as fs from 'node:fs'
      const { native } = await import(${JSON.stringify(distInternals)})
      const fd = fs.openSync(process.argv[2], 'r+')
      for (const writable of [true, false]) {
        const handle = native.map(fd, 65536, writable)
        const buffer = handle.buffer
        const moved = typeof buffer.transfer === 'function' ? buffer.transfer() : structuredClone(buffer, { transfer: [buffer] })
        handle.close()
        const view = new Uint8Array(moved)
        // Anonymous memory now (zeros), or a copy where the runtime copied on transfer (0x61):
        // either way writes go nowhere near the file.
        const first = view[0]
        view.fill(0x62)
        console.log(JSON.stringify({ writable, length: view.length, first: first === 0 || first === 0x61, wrote: view[100] }))
      }
      fs.closeSync(fd)
      globalThis.gc?.()
    `,
      [file],
    )
    expect(result.signal).toBeNull()
    expect(result.status).toBe(0)
    const lines = result.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(lines).toEqual([
      { writable: true, length: 65536, first: true, wrote: 0x62 },
      { writable: false, length: 65536, first: true, wrote: 0x62 },
    ])
    expect(fs.readFileSync(file).every((b) => b === 0x61)).toBe(true)
  })
})
