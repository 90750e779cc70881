// What a read asks of a record before it copies it, answered from the stored bytes without
// decoding them: is its topic this one, does its TAGS property equal one of these tags, do its
// KEYS or UNIQ_KEY hold this key. Each answer is the one the decoded message would give
// (StoredMessage's topic, tags and keys), so records a read would drop are never copied.
import { NAME_VALUE_SEPARATOR_BYTE, PROPERTY_SEPARATOR_BYTE } from '../commitlog/properties.js'
import { PropertyName } from '../commitlog/record.js'

/** Characters below this are one byte in UTF-8 and in Latin-1 alike. */
const ASCII_END = 0x80
const SPACE = 0x20

function isAsciiText(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= ASCII_END) return false
  return true
}

/** True when bytes[from, to) are all ASCII. */
function isAsciiBytes(bytes: Uint8Array, from: number, to: number): boolean {
  let high = 0
  for (let i = from; i < to; i++) high |= bytes[i]
  return high < ASCII_END
}

/**
 * Whether bytes[from, to), decoded as a read decodes text (UTF-8), equals `s`. ASCII on both
 * sides compares character codes with bytes; anything else decodes the bytes and compares strings.
 */
export function textEquals(bytes: Buffer, from: number, to: number, s: string, sIsAscii: boolean = isAsciiText(s)): boolean {
  if (sIsAscii) {
    if (to - from !== s.length) return false
    for (let i = 0; i < s.length; i++) if (bytes[from + i] !== s.charCodeAt(i)) return false
    return true
  }
  // A non-ASCII string never equals ASCII bytes; otherwise compare the decoded text.
  if (isAsciiBytes(bytes, from, to)) return false
  return bytes.toString('utf8', from, to) === s
}

/** Where a property's value lies; `at` is -1 when the property is absent. */
export interface ValueRange {
  at: number
  end: number
}

/**
 * The value of property `name` (ASCII) in the properties bytes[from, to), as parsePropertiesString
 * reads them: pairs split on 0x02, name and value on the first 0x01 of the pair, a pair with an
 * empty name or value dropped, a later duplicate winning. Sets `out` and returns it.
 */
export function findProperty(bytes: Uint8Array, from: number, to: number, name: string, out: ValueRange): ValueRange {
  out.at = -1
  out.end = -1
  const nameLength = name.length
  let i = from
  while (i < to) {
    let sep = -1
    let j = i
    for (; j < to; j++) {
      const c = bytes[j]
      if (c === PROPERTY_SEPARATOR_BYTE) break
      if (c === NAME_VALUE_SEPARATOR_BYTE && sep < 0) sep = j
    }
    if (sep - i === nameLength && sep < j - 1) {
      let same = true
      for (let k = 0; k < nameLength; k++) {
        if (bytes[i + k] !== name.charCodeAt(k)) {
          same = false
          break
        }
      }
      if (same) {
        out.at = sep + 1
        out.end = j
      }
    }
    i = j + 1
  }
  return out
}

const scratch: ValueRange = { at: -1, end: -1 }

/** Whether the record's TAGS value (properties bytes[from, to)) is one of `tags`. */
export function hasTagIn(bytes: Buffer, from: number, to: number, tags: readonly string[]): boolean {
  const value = findProperty(bytes, from, to, PropertyName.TAGS, scratch)
  if (value.at < 0) return false
  for (const tag of tags) if (textEquals(bytes, value.at, value.end, tag)) return true
  return false
}

/**
 * Whether `key` (non-empty) is one of the record's keys: a token of KEYS split on spaces, or its
 * UNIQ_KEY (properties bytes[from, to)). The key is matched against the bytes; a space-separated
 * token is compared only where it starts and ends at a space or the value's ends.
 */
export function hasKey(bytes: Buffer, from: number, to: number, key: string, keyIsAscii: boolean): boolean {
  const keys = findProperty(bytes, from, to, PropertyName.KEYS, scratch)
  if (keys.at >= 0) {
    const end = keys.end
    for (let start = keys.at; start < end; ) {
      let stop = start
      while (stop < end && bytes[stop] !== SPACE) stop++
      if (stop > start && textEquals(bytes, start, stop, key, keyIsAscii)) return true
      start = stop + 1
    }
  }
  const uniq = findProperty(bytes, from, to, PropertyName.UNIQ_KEY, scratch)
  return uniq.at >= 0 && textEquals(bytes, uniq.at, uniq.end, key, keyIsAscii)
}

export { isAsciiText }
