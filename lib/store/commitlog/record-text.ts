// Text inside a stored record, read from its bytes: topics (interned, with their Java hash and
// validity kept beside them, so a scan of millions of records decodes and checks each topic once),
// property values, and Buffer's own decoders without toString's argument handling.
import { Buffer } from 'node:buffer'
import { javaStringHashCode } from '../bytes.js'
import { validateTopic } from './record-names.js'

export type Slice = (this: Buffer, start: number, end: number) => string
const bufferInternals = Buffer.prototype as unknown as { latin1Slice?: Slice; utf8Slice?: Slice }
// Buffer's own decoders, without toString's argument handling; the public form otherwise.
export const latin1Slice: Slice =
  bufferInternals.latin1Slice ??
  function (this: Buffer, start: number, end: number): string {
    return this.toString('latin1', start, end)
  }
export const utf8Slice: Slice =
  bufferInternals.utf8Slice ??
  function (this: Buffer, start: number, end: number): string {
    return this.toString('utf8', start, end)
  }

/** Bound of each module-level cache of topic text (cleared when full: a stale entry is still correct). */
export const MAX_TOPIC_CACHE = 4096

/** A topic as read from a record: its text, the Java hash of that text, and whether it is valid. */
export class TopicText {
  /** Why the topic is invalid (validateTopic), null when valid; undefined until first asked. */
  private verdict: string | null | undefined = undefined

  /**
   * For an interned ASCII topic of at least 4 bytes: its bytes as big-endian int32 words, every
   * whole word from the start and then the last four bytes (so a topic is compared a word at a
   * time); null otherwise.
   */
  words: Int32Array | null = null

  constructor(
    readonly text: string,
    readonly hash: number,
  ) {}

  /** validateTopic(text), computed once per interned topic. */
  invalidReason(): string | null {
    if (this.verdict === undefined) this.verdict = validateTopic(this.text)
    return this.verdict
  }
}

/** Interned ASCII topics keyed by the Java hash of their bytes (equal bytes are compared). */
const topicTexts = new Map<number, TopicText>()

/** Recently read interned topics, by a mix of their length and first and last four bytes. */
const RECENT_TOPICS = 64
const recentTopics: (TopicText | undefined)[] = new Array<TopicText | undefined>(RECENT_TOPICS).fill(undefined)

/**
 * The topic of `length` bytes at buf[start]: interned when ASCII (the common case), decoded as
 * UTF-8 otherwise. With `dv` (a DataView of buf's bytes), a topic read recently is recognised by
 * comparing its bytes a word at a time: a scan meets the same few topics millions of times, and
 * hashing and comparing them byte by byte was a third of a record's checks.
 */
export function readTopic(buf: Buffer, start: number, length: number, dv?: DataView): TopicText {
  if (dv === undefined || length < 4) return internTopic(buf, start, length)
  const last = dv.getInt32(start + length - 4)
  const slot = (Math.imul(dv.getInt32(start) ^ length, 0x9e3779b1) ^ last) & (RECENT_TOPICS - 1)
  const recent = recentTopics[slot]
  if (recent !== undefined && recent.text.length === length) {
    const words = recent.words!
    const whole = length >>> 2
    let same = words[whole] === last
    for (let w = 0; same && w < whole; w++) same = dv.getInt32(start + 4 * w) === words[w]
    if (same) return recent
  }
  const topic = internTopic(buf, start, length)
  if (topic.words !== null) recentTopics[slot] = topic
  return topic
}

function internTopic(buf: Buffer, start: number, length: number): TopicText {
  // A cache key: the Java hash of the (ASCII) bytes, computed in the same pass as the ASCII test;
  // for ASCII bytes it is also the Java hash of the decoded text.
  let h = 0
  let high = 0
  for (let i = start, end = start + length; i < end; i++) {
    const b = buf[i]
    high |= b
    h = (Math.imul(31, h) + b) | 0
  }
  if (high >= 0x80) {
    const text = utf8Slice.call(buf, start, start + length)
    return new TopicText(text, javaStringHashCode(text))
  }
  const cached = topicTexts.get(h)
  if (cached !== undefined && cached.text.length === length) {
    const text = cached.text
    let same = true
    for (let i = 0; i < length; i++) {
      if (text.charCodeAt(i) !== buf[start + i]) {
        same = false
        break
      }
    }
    if (same) return cached
  }
  const entry = new TopicText(latin1Slice.call(buf, start, start + length), h)
  if (length >= 4) {
    const whole = length >>> 2
    const words = new Int32Array(whole + 1)
    for (let w = 0; w < whole; w++) words[w] = buf.readInt32BE(start + 4 * w)
    words[whole] = buf.readInt32BE(start + length - 4)
    entry.words = words
  }
  if (topicTexts.size >= MAX_TOPIC_CACHE) topicTexts.clear()
  topicTexts.set(h, entry)
  return entry
}

/** Text of buf[start, end): latin1 is exact for ASCII and cheaper than UTF-8 decoding. */
export function readText(buf: Buffer, start: number, end: number, ascii: boolean): string {
  return ascii ? latin1Slice.call(buf, start, end) : utf8Slice.call(buf, start, end)
}

export function isAsciiRange(buf: Buffer, start: number, end: number): boolean {
  let bits = 0
  for (let i = start; i < end; i++) bits |= buf[i]
  return bits < 0x80
}

/** Java Integer.parseInt over ASCII bytes; NaN when it would throw. */
export function parseIntBytes(buf: Buffer, start: number, end: number): number {
  let i = start
  let negative = false
  if (i < end && (buf[i] === 0x2d || buf[i] === 0x2b)) negative = buf[i++] === 0x2d
  if (i === end) return NaN
  let v = 0
  for (; i < end; i++) {
    const d = buf[i] - 0x30
    if (d < 0 || d > 9) return NaN
    v = v * 10 + d
    if (v > 2147483648) return NaN
  }
  if (negative) return -v
  return v > 0x7fffffff ? NaN : v
}
