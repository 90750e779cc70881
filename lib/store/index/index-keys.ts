// The keys a record is indexed under: its UNIQ_KEY, then every non-empty token of its KEYS property
// (keys separated by single spaces), each as `topic#key`. Rolled-back transaction records are not
// indexed (RocketMQ). The index service writes these hashes and `mqstore verify` checks entries
// against them: one rule, here.
import { continueJavaBytesHash, continueJavaStringHash, javaStringHashCode } from '../bytes.js'
import { CheckedRecord } from '../commitlog/dispatch-request.js'
import { isRolledBackRecord } from '../commitlog/sys-flag.js'
import { toIndexKeyHash } from './index-layout.js'
import { RecentTopics } from '../topics/recent-topics.js'

const HASH_KEY_SEPARATOR = '#'
const SEPARATOR_CODE = HASH_KEY_SEPARATOR.charCodeAt(0)
const SPACE_BYTE = 0x20

/** What the key rule reads of a record (a DispatchRequest has these fields). */
export interface IndexedRecord {
  topic: string
  sysFlag: number
  /** The KEYS property: keys separated by single spaces. */
  keys: string | undefined
  uniqKey: string | undefined
}

/**
 * The index hashes of a record's keys, in the order they are indexed, written into `out` (emptied
 * first, so a caller can reuse one array). `topic#` is hashed once and continued over each key,
 * so no key string is built.
 */
export function indexKeyHashesOf(record: IndexedRecord, out: number[] = []): number[] {
  out.length = 0
  if (isRolledBackRecord(record.sysFlag)) return out
  const prefixHash = topicPrefixHash(record.topic)
  const uniqKey = record.uniqKey
  if (uniqKey != null) out.push(toIndexKeyHash(continueJavaStringHash(prefixHash, uniqKey, 0, uniqKey.length)))
  const keys = record.keys
  if (keys != null) {
    const length = keys.length
    for (let start = 0; start < length; ) {
      let stop = keys.indexOf(' ', start)
      if (stop < 0) stop = length
      if (stop > start) out.push(toIndexKeyHash(continueJavaStringHash(prefixHash, keys, start, stop)))
      start = stop + 1
    }
  }
  return out
}

/** The Java hashes of "topic#" for the topics the last records named (RecentTopics). */
const recentPrefixHashes = new RecentTopics<number>()

/** The Java hash of `topic` + "#", which every key hash of the topic continues. */
function topicPrefixHash(topic: string): number {
  let hash = recentPrefixHashes.find(topic)
  if (hash === undefined) {
    hash = continueJavaStringHash(javaStringHashCode(topic), HASH_KEY_SEPARATOR, 0, 1)
    recentPrefixHashes.keep(topic, hash)
  }
  return hash
}

/**
 * indexKeyHashesOf into a typed array: writes the first `out.length` hashes, returns how many the
 * record has (more than `out.length`: the caller takes indexKeyHashesOf instead). No array is
 * resized on this path, which runs once per put.
 */
export function indexKeyHashesInto(record: IndexedRecord, out: Int32Array): number {
  if (isRolledBackRecord(record.sysFlag)) return 0
  if (record instanceof CheckedRecord) return checkedKeyHashesInto(record, out)
  const uniqKey = record.uniqKey
  const keys = record.keys
  if (uniqKey == null && keys == null) return 0
  const prefixHash = topicPrefixHash(record.topic)
  let count = 0
  if (uniqKey != null) out[count++] = toIndexKeyHash(continueJavaStringHash(prefixHash, uniqKey, 0, uniqKey.length))
  return keys == null ? count : keyHashesInto(prefixHash, keys, out, count)
}

/** Appends the hashes of the non-empty space-separated tokens of `keys` to out[count...]; returns the new count. */
function keyHashesInto(prefixHash: number, keys: string, out: Int32Array, count: number): number {
  const length = keys.length
  for (let start = 0; start < length; ) {
    let stop = keys.indexOf(' ', start)
    if (stop < 0) stop = length
    if (stop > start) {
      if (count < out.length) out[count] = toIndexKeyHash(continueJavaStringHash(prefixHash, keys, start, stop))
      count++
    }
    start = stop + 1
  }
  return count
}

/**
 * indexKeyHashesInto for a record still in its bytes (a recovery scan's): ASCII keys are hashed
 * from the bytes, which gives the Java hash of the decoded text (one byte is one UTF-16 unit, and
 * a space byte is the separator), so no string is made; other keys are decoded first.
 */
function checkedKeyHashesInto(record: CheckedRecord, out: Int32Array): number {
  const { bytes, uniqAt, keysAt } = record
  if (uniqAt < 0 && keysAt < 0) return 0
  const prefixHash = (Math.imul(31, record.topicHash) + SEPARATOR_CODE) | 0
  let count = 0
  if (uniqAt >= 0) {
    const uniqKey = record.uniqAscii ? null : record.uniqKey!
    const hash =
      uniqKey === null
        ? continueJavaBytesHash(prefixHash, bytes, uniqAt, record.uniqEnd)
        : continueJavaStringHash(prefixHash, uniqKey, 0, uniqKey.length)
    out[count++] = toIndexKeyHash(hash)
  }
  if (keysAt < 0) return count
  if (!record.keysAscii) return keyHashesInto(prefixHash, record.keys!, out, count)
  const end = record.keysEnd
  // Each token hashed as it is walked, in one pass over the bytes.
  let hash = prefixHash
  let start = keysAt
  for (let at = keysAt; at <= end; at++) {
    if (at < end && bytes[at] !== SPACE_BYTE) {
      hash = (Math.imul(31, hash) + bytes[at]) | 0
      continue
    }
    if (at > start) {
      if (count < out.length) out[count] = toIndexKeyHash(hash)
      count++
    }
    hash = prefixHash
    start = at + 1
  }
  return count
}

/** The keys themselves, without the topic prefix (for messages about a record). */
export function indexKeysOf(record: IndexedRecord): string[] {
  if (isRolledBackRecord(record.sysFlag)) return []
  const out: string[] = []
  if (record.uniqKey != null) out.push(record.uniqKey)
  for (const key of (record.keys ?? '').split(' ')) if (key !== '') out.push(key)
  return out
}
