// Big-endian 64-bit integers as JavaScript numbers, and Java's String.hashCode: the store's files
// are Java's, so longs and string hashes appear in every structure. This is their one home.
//
// A long is kept as a number (every offset and timestamp is a safe integer) and stored as two
// 32-bit halves: the high half signed, the low half unsigned, which is the two's-complement
// encoding for every safe integer, negative ones included. No BigInt on these paths: it allocates.
import { Buffer } from 'node:buffer'

export const TWO_POW_32 = 4294967296

/** A constructor of Buffer views: `new BufferView(arrayBuffer, byteOffset, length)`. */
export type BufferViewConstructor = new (buffer: ArrayBuffer, byteOffset: number, length: number) => Buffer

/**
 * Node's own Buffer class, the one Buffer.from returns, which Node hands out as Buffer's species:
 * a view made with it skips Buffer.from's argument checks, half the cost of a read's body view.
 * Buffer.from stands in where the species is not that class.
 */
export const BufferView: BufferViewConstructor = (() => {
  const species: unknown = (Buffer as unknown as Record<symbol, unknown>)[Symbol.species]
  if (typeof species === 'function' && species !== Buffer) {
    try {
      const view = new (species as BufferViewConstructor)(new ArrayBuffer(2), 1, 1)
      if (Buffer.isBuffer(view) && Object.getPrototypeOf(view) === Buffer.prototype && view.byteOffset === 1 && view.length === 1) {
        return species as BufferViewConstructor
      }
    } catch {
      // Not a view constructor: Buffer.from below.
    }
  }
  return function viewOf(buffer: ArrayBuffer, byteOffset: number, length: number): Buffer {
    return Buffer.from(buffer, byteOffset, length)
  } as unknown as BufferViewConstructor
})()

/** The long at buf[at, at + 8) (exact for safe integers). */
export function readInt64BE(buf: Buffer, at: number): number {
  return buf.readInt32BE(at) * TWO_POW_32 + buf.readUInt32BE(at + 4)
}

/**
 * The long at buf[at, at + 8) read as unsigned: for store timestamps, where a damaged value must
 * read as far in the future rather than as a negative number (-1 means "unreadable" to callers).
 */
export function readUInt64BE(buf: Buffer, at: number): number {
  return buf.readUInt32BE(at) * TWO_POW_32 + buf.readUInt32BE(at + 4)
}

/** Writes a safe integer as a long at buf[at, at + 8). */
export function writeInt64BE(buf: Buffer, at: number, value: number): void {
  buf.writeInt32BE(Math.floor(value / TWO_POW_32), at)
  buf.writeUInt32BE(value >>> 0, at + 4)
}

/** readInt64BE through a DataView (the encoders' hot paths use DataViews). */
export function getInt64(view: DataView, at: number): number {
  return view.getInt32(at) * TWO_POW_32 + view.getUint32(at + 4)
}

/** writeInt64BE through a DataView. */
export function setInt64(view: DataView, at: number, value: number): void {
  view.setInt32(at, Math.floor(value / TWO_POW_32))
  view.setUint32(at + 4, value >>> 0)
}

/** Java's String.hashCode: 31-based polynomial over UTF-16 code units, in signed 32 bits. */
export function javaStringHashCode(s: string): number {
  return continueJavaStringHash(0, s, 0, s.length)
}

/**
 * Continues a Java string hash over `s[from, to)`: the hash of `prefix + s.slice(from, to)` given
 * `h`, the hash of `prefix`, without building the string.
 */
export function continueJavaStringHash(h: number, s: string, from: number, to: number): number {
  for (let i = from; i < to; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0
  return h
}

/**
 * continueJavaStringHash over bytes taken as one-byte characters: for ASCII (and Latin-1) text
 * this is the Java hash of the decoded string, without decoding it.
 */
export function continueJavaBytesHash(h: number, bytes: Uint8Array, from: number, to: number): number {
  for (let i = from; i < to; i++) h = (Math.imul(31, h) + bytes[i]) | 0
  return h
}

const EMPTY_VIEW: DataView = new DataView(new ArrayBuffer(0))

/**
 * The DataView of the buffer last asked for, so that encoders and decoders walking one mapping do
 * not build a view per record. Each owner (a commit log, one dispatch pass) keeps its own and
 * clears it when it lets go of its mappings: a cache shared by every store in the process would
 * keep the last mapping it saw reachable after its store closed.
 */
export class DataViewCache {
  private target: Uint8Array | null = null
  private view: DataView = EMPTY_VIEW

  of(target: Uint8Array): DataView {
    if (target !== this.target) {
      this.view = new DataView(target.buffer, target.byteOffset, target.byteLength)
      this.target = target
    }
    return this.view
  }

  clear(): void {
    this.target = null
    this.view = EMPTY_VIEW
  }
}

/** A DataView over `target`: the cached one when a cache is given, else a new one. */
export function dataViewOf(target: Uint8Array, cache: DataViewCache | undefined): DataView {
  return cache === undefined ? new DataView(target.buffer, target.byteOffset, target.byteLength) : cache.of(target)
}
