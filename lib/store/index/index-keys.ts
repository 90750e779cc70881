// The keys a record is indexed under: its UNIQ_KEY, then every non-empty token of its KEYS property
// (keys separated by single spaces), each as `topic#key`. Rolled-back transaction records are not
// indexed (RocketMQ). The index service writes these hashes and `mqstore verify` checks entries
// against them: one rule, here.
import { continueJavaStringHash, javaStringHashCode } from '../bytes.js'
import { isRolledBackRecord } from '../commitlog/sys-flag.js'
import { toIndexKeyHash } from './index-layout.js'

const HASH_KEY_SEPARATOR = '#'

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
  const topic = record.topic
  const prefixHash = continueJavaStringHash(javaStringHashCode(topic), HASH_KEY_SEPARATOR, 0, 1)
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

/**
 * indexKeyHashesOf into a typed array: writes the first `out.length` hashes, returns how many the
 * record has (more than `out.length`: the caller takes indexKeyHashesOf instead). No array is
 * resized on this path, which runs once per put.
 */
export function indexKeyHashesInto(record: IndexedRecord, out: Int32Array): number {
  if (isRolledBackRecord(record.sysFlag)) return 0
  const uniqKey = record.uniqKey
  const keys = record.keys
  if (uniqKey == null && keys == null) return 0
  const topic = record.topic
  const prefixHash = continueJavaStringHash(javaStringHashCode(topic), HASH_KEY_SEPARATOR, 0, 1)
  let count = 0
  if (uniqKey != null) out[count++] = toIndexKeyHash(continueJavaStringHash(prefixHash, uniqKey, 0, uniqKey.length))
  if (keys != null) {
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
