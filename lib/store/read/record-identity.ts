// Whether the record a read found is the one it was looking for. The body CRC covers the body
// only, and a read trusts a consume-queue unit or an index entry to point at the right place: a
// damaged unit can point at another queue's record, and a damaged header (in an old file that
// recovery does not scan) can claim another position. Both would be served as something they are
// not, so a read checks the fields it knows before serving a record (RocketMQ does not). Properties
// no writer makes (propertiesAreWellFormed) are damage too: such a record is not served.
import type { CommitLogReader } from '../commitlog/commit-log.js'
import { Buffer } from 'node:buffer'
import {
  emptyRecordFields,
  locateRecordFields,
  OFFSET_PHYSICALOFFSET,
  OFFSET_QUEUEID,
  OFFSET_QUEUEOFFSET,
  propertiesAreWellFormed,
  type RecordFields,
} from '../commitlog/record.js'
import { getInt64 } from '../bytes.js'

/** Where a consume-queue unit says its record belongs. */
export interface QueuePlace {
  topic: string
  /** The topic's UTF-8 bytes (encoded once per read). */
  topicBytes: Buffer
  /** Its whole 4-byte words, big-endian (topicWordsOf): the topic is compared a word at a time. */
  topicWords: Int32Array
  queueId: number
  queueOffset: number
}

const fields = emptyRecordFields()

/** A place for reads to fill again and again (see placeFor). */
export function emptyQueuePlace(): QueuePlace {
  return { topic: '', topicBytes: Buffer.alloc(0), topicWords: new Int32Array(0), queueId: 0, queueOffset: 0 }
}

/** `place` set to `topic`'s queue `queueId`; the topic's bytes are encoded once per topic. */
export function placeFor(place: QueuePlace, topic: string, queueId: number): QueuePlace {
  if (place.topic !== topic) {
    place.topic = topic
    place.topicBytes = Buffer.from(topic)
    place.topicWords = topicWordsOf(place.topicBytes)
  }
  place.queueId = queueId
  return place
}

/** The whole big-endian 4-byte words of `bytes` (the last 0-3 bytes are left out). */
export function topicWordsOf(bytes: Uint8Array): Int32Array {
  const words = new Int32Array(bytes.length >> 2)
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  for (let w = 0; w < words.length; w++) words[w] = dv.getInt32(4 * w)
  return words
}

/**
 * True when the record at `at` of the reader's held file is whole, says it lies at commit-log
 * offset `offset`, has well-formed properties, and (when `place` is given) is the record of that
 * topic, queue and queue offset.
 */
export function isRecordAt(reader: CommitLogReader, at: number, offset: number, place: QueuePlace | null): boolean {
  const data = reader.data
  return identifyRecord(data, reader.views.of(data), at, offset, place, fields)
}

/**
 * isRecordAt over `data` (`dv` a view of the same bytes), leaving the record's field positions in
 * `out`: a read locates and checks a record in one pass, then copies it by those positions.
 */
export function identifyRecord(
  data: Buffer,
  dv: DataView,
  at: number,
  offset: number,
  place: QueuePlace | null,
  out: RecordFields,
): boolean {
  if (!locateRecordFields(dv, at, data.length, out)) return false
  if (getInt64(dv, at + OFFSET_PHYSICALOFFSET) !== offset) return false
  if (!propertiesAreWellFormed(data, dv, out.propertiesAt, out.propertiesAt + out.propertiesLength)) return false
  return place === null || isRecordOf(data, dv, at, place, out)
}

/** Whether the record located at `at` (its fields in `fields`) names `place`'s topic, queue and queue offset. */
export function isRecordOf(data: Buffer, dv: DataView, at: number, place: QueuePlace, out: RecordFields): boolean {
  if (dv.getInt32(at + OFFSET_QUEUEID) !== place.queueId) return false
  if (getInt64(dv, at + OFFSET_QUEUEOFFSET) !== place.queueOffset) return false
  const topic = place.topicBytes
  const length = topic.length
  if (out.topicLength !== length) return false
  // Topics are short: words, then the last bytes, beat a call into Buffer.compare.
  const topicAt = out.topicAt
  const words = place.topicWords
  for (let w = 0; w < words.length; w++) if (dv.getInt32(topicAt + 4 * w) !== words[w]) return false
  for (let i = 4 * words.length; i < length; i++) if (data[topicAt + i] !== topic[i]) return false
  return true
}
