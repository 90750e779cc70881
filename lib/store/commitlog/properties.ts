// A record's properties (RocketMQ's name 0x01 value 0x02 … text), the tag code, and the batch blob
// that putMessages carries: the strings inside a record, apart from its byte layout.
import { Buffer, isUtf8 } from 'node:buffer'

import { javaStringHashCode } from '../bytes.js'

const NAME_VALUE_SEPARATOR = '\u0001'
const PROPERTY_SEPARATOR = '\u0002'
export const NAME_VALUE_SEPARATOR_BYTE = 1
export const PROPERTY_SEPARATOR_BYTE = 2

/** The consume-queue tag code of a TAGS value: its Java hash, 0 when absent or empty. */
export function tagsCodeOf(tags: string | undefined): number {
  return tags ? javaStringHashCode(tags) : 0
}

/**
 * Serialises properties in the 4.9.1+ form (no separator after the last pair). Undefined and
 * empty values are left out: readers drop an empty value anyway. A name or value containing
 * 0x00, 0x01 or 0x02, or an empty name, cannot be represented: RangeError naming the property.
 */
export function encodeProperties(props: Record<string, string | undefined>): string {
  let out = ''
  for (const name of Object.keys(props)) {
    const value = props[name]
    if (value === undefined || value === null) continue
    if (typeof value !== 'string') {
      throw new TypeError(`property ${JSON.stringify(name)}: value must be a string, got ${typeof value}`)
    }
    if (value === '') continue
    if (name === '') throw new RangeError('property name must not be empty')
    if (hasSeparator(name)) {
      throw new RangeError(`property name ${JSON.stringify(name)} contains a 0x00, 0x01 or 0x02 character`)
    }
    if (hasSeparator(value)) {
      throw new RangeError(`property ${JSON.stringify(name)}: value contains a 0x00, 0x01 or 0x02 character`)
    }
    if (out !== '') out += PROPERTY_SEPARATOR
    out += name + NAME_VALUE_SEPARATOR + value
  }
  return out
}

/**
 * True for the two separators, and for NUL: no property carries a NUL byte, so recovery can take
 * one as the zeros of a torn write (the body CRC does not cover the properties).
 */
function hasSeparator(s: string): boolean {
  return s.includes(NAME_VALUE_SEPARATOR) || s.includes(PROPERTY_SEPARATOR) || s.includes('\u0000')
}

/**
 * Parses a property string as RocketMQ 4.9.1+ does, which also reads the older form with a
 * trailing 0x02: pairs are separated by 0x02; in each pair the first 0x01 splits name from value;
 * pairs with an empty name or value, or without 0x01, are dropped; a later duplicate wins.
 * The result has no prototype, so any name is safe as a key.
 */
/**
 * The type of parsed property maps: its prototype is an empty null-prototype object, so no name
 * (toString, __proto__, ...) resolves to an inherited member, yet V8 keeps instances in fast mode.
 * A plain Object.create(null) object lives in dictionary mode, which made reads 5-10 times slower.
 */
const PropertyMap = function PropertyMap() {} as unknown as { new (): Record<string, string>; prototype: object }
PropertyMap.prototype = Object.create(null)

export function parsePropertiesString(s: string): Record<string, string> {
  const map = new PropertyMap()
  const len = s.length
  let index = 0
  while (index < len) {
    let end = s.indexOf(PROPERTY_SEPARATOR, index)
    if (end < 0) end = len
    if (end - index >= 3) {
      const sep = s.indexOf(NAME_VALUE_SEPARATOR, index)
      if (sep > index && sep < end - 1) map[s.slice(index, sep)] = s.slice(sep + 1, end)
    }
    index = end + 1
  }
  return map
}

/** Bytes below 4 (the separators among them) become zero bytes: see propertiesAreWellFormed. */
const BELOW_FOUR = 0xfcfcfcfc
const ONES = 0x01010101
const HIGHS = 0x80808080

/**
 * Whether stored property bytes are what a writer makes: UTF-8, and every non-empty pair holds a
 * 0x01 between name and value. The body CRC does not cover the properties, so this is the only
 * check a flip in them can fail (a flip to another ASCII letter passes it). Empty values and a
 * trailing 0x02 (RocketMQ before 4.9.1) are allowed. `dv` views the same bytes as `buf`.
 *
 * Every read runs it on every record it serves, so it goes four bytes at a time: a word with no
 * byte below 4 holds no separator and changes nothing but the high bits seen; the rest go byte by
 * byte.
 */
export function propertiesAreWellFormed(buf: Uint8Array, dv: DataView, from: number, to: number): boolean {
  let pairAt = from
  let named = false
  let high = 0
  let i = from
  while (i < to) {
    if (i + 4 <= to) {
      const word = dv.getInt32(i)
      const low = word & BELOW_FOUR
      high |= word
      if (((low - ONES) & ~low & HIGHS) === 0) {
        i += 4
        continue
      }
    }
    // A byte below 4 in the next word (or the last bytes): one at a time up to the word's end.
    const end = i + 4 < to ? i + 4 : to
    for (; i < end; i++) {
      const c = buf[i]
      high |= c
      if (c === PROPERTY_SEPARATOR_BYTE) {
        if (i > pairAt && !named) return false
        pairAt = i + 1
        named = false
      } else if (c === NAME_VALUE_SEPARATOR_BYTE) {
        named = true
      }
    }
  }
  if (to > pairAt && !named) return false
  return (high & HIGHS) === 0 || isUtf8(buf.subarray(from, to))
}

/**
 * The property string stored for one message of a batch: its own string, then, when both are
 * non-empty and the own string does not already end with 0x02, a 0x02, then the batch's string.
 */
export function joinBatchProperties(own: string, batch: string): string {
  if (own === '') return batch
  if (batch === '') return own
  return own.endsWith(PROPERTY_SEPARATOR) ? own + batch : own + PROPERTY_SEPARATOR + batch
}

export interface BatchEntry {
  flag: number
  /** A zero-copy view into the blob. */
  body: Uint8Array
  propertiesString: string
}

// A client-encoded batch blob is a sequence of these entries (a different layout from a record):
//   0 TOTALSIZE int32, 4 MAGICCODE int32, 8 BODYCRC int32 (all three ignored), 12 FLAG int32,
//   16 BODYLENGTH int32, 20 BODY, then PROPERTIESLENGTH int16 and PROPERTIES.
const BATCH_OFFSET_FLAG = 12
const BATCH_OFFSET_BODYLENGTH = 16
const BATCH_OFFSET_BODY = 20
const BATCH_PROPERTIES_LENGTH_WIDTH = 2

/** Splits a client-encoded batch blob into its messages. Null when it is malformed. */
export function decodeBatchBlob(blob: Uint8Array): BatchEntry[] | null {
  const dv = new DataView(blob.buffer, blob.byteOffset, blob.byteLength)
  const buf = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength)
  const out: BatchEntry[] = []
  let p = 0
  const end = blob.length
  while (p < end) {
    const bodyStart = p + BATCH_OFFSET_BODY
    if (bodyStart + BATCH_PROPERTIES_LENGTH_WIDTH > end) return null
    const flag = dv.getInt32(p + BATCH_OFFSET_FLAG)
    const bodyLength = dv.getInt32(p + BATCH_OFFSET_BODYLENGTH)
    if (bodyLength < 0 || bodyStart + bodyLength + BATCH_PROPERTIES_LENGTH_WIDTH > end) return null
    const propsLengthAt = bodyStart + bodyLength
    const propsLength = dv.getInt16(propsLengthAt)
    const propsStart = propsLengthAt + BATCH_PROPERTIES_LENGTH_WIDTH
    if (propsLength < 0 || propsStart + propsLength > end) return null
    out.push({
      flag,
      body: blob.subarray(bodyStart, propsLengthAt),
      propertiesString: propsLength === 0 ? '' : buf.toString('utf8', propsStart, propsStart + propsLength),
    })
    p = propsStart + propsLength
  }
  return out
}

// ---- properties written as bytes (the put path: no properties string is built) -----------

/** `TAGS` + 0x01 and `KEYS` + 0x01: what precedes each value in the properties bytes. */
const NAME_PREFIX_LENGTH = 5
const TAGS_PREFIX = [0x54, 0x41, 0x47, 0x53, NAME_VALUE_SEPARATOR_BYTE]
const KEYS_PREFIX = [0x4b, 0x45, 0x59, 0x53, NAME_VALUE_SEPARATOR_BYTE]

/**
 * True when `s` can be written as properties bytes as it is: ASCII without the separators (0x00,
 * 0x01, 0x02). Anything else takes the string path, which reports separators precisely.
 */
export function isPlainAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c > 0x7f || c < 0x03) return false
  }
  return true
}

/** Bytes of `TAGS\x01tags\x02KEYS\x01keys`, either pair left out when its value is undefined. */
export function tagsAndKeysLength(tags: string | undefined, keys: string | undefined): number {
  const t = tags === undefined ? 0 : NAME_PREFIX_LENGTH + tags.length
  const k = keys === undefined ? 0 : NAME_PREFIX_LENGTH + keys.length
  return t !== 0 && k !== 0 ? t + 1 + k : t + k
}

type Latin1Write = (this: Uint8Array, s: string, offset: number, length: number) => number
// Buffer's own one-byte string writer (a straight copy for ASCII strings); the public form otherwise.
const latin1Write: Latin1Write =
  (Buffer.prototype as unknown as { latin1Write?: Latin1Write }).latin1Write ??
  function (this: Uint8Array, s: string, offset: number, length: number): number {
    return Buffer.from(this.buffer, this.byteOffset, this.byteLength).write(s, offset, length, 'latin1')
  }

/** Below this many characters a JS loop writes text faster than a call into Buffer's writer. */
const SHORT_TEXT = 96

/** Writes ASCII text at target[at, at + s.length); returns the end. Short texts in a JS loop. */
export function writeAscii(target: Buffer, at: number, s: string): number {
  const n = s.length
  if (n > SHORT_TEXT) latin1Write.call(target, s, at, n)
  else for (let i = 0; i < n; i++) target[at + i] = s.charCodeAt(i)
  return at + n
}

function writeNamed(target: Buffer, at: number, prefix: readonly number[], value: string): number {
  for (let i = 0; i < NAME_PREFIX_LENGTH; i++) target[at + i] = prefix[i]
  return writeAscii(target, at + NAME_PREFIX_LENGTH, value)
}

/** The properties of a record that carries only tags and keys: `TAGS\x01tags\x02KEYS\x01keys`. */
export function writeTagsAndKeys(target: Buffer, at: number, tags: string | undefined, keys: string | undefined): void {
  let pos = at
  if (tags !== undefined) pos = writeNamed(target, pos, TAGS_PREFIX, tags)
  if (keys !== undefined) {
    if (tags !== undefined) target[pos++] = PROPERTY_SEPARATOR_BYTE
    writeNamed(target, pos, KEYS_PREFIX, keys)
  }
}
