// Checking a stored record (dispatch and recovery): its fields read and checked in place, without
// reading past a limit, and what dispatch takes from it (a DispatchRequest or a CheckedRecord).
import type { Buffer } from 'node:buffer'
import { continueJavaBytesHash, dataViewOf, getInt64, javaStringHashCode, type DataViewCache } from '../bytes.js'
import { bodyCrcAt } from './body-crc.js'
import { CheckedRecord, fail, failed, type DispatchRequest } from './dispatch-request.js'
import { hex8 } from './host-address.js'
import { NAME_VALUE_SEPARATOR_BYTE, PROPERTY_SEPARATOR_BYTE, propertiesAreWellFormed } from './properties.js'
import {
  MESSAGE_MAGIC_CODE,
  MESSAGE_MAGIC_CODE_V2,
  BLANK_MAGIC_CODE,
  END_FILE_MIN_BLANK_LENGTH,
  PropertyName,
  SCHEDULE_TOPIC,
  OFFSET_TOTALSIZE,
  OFFSET_MAGIC,
  OFFSET_BODYCRC,
  OFFSET_QUEUEID,
  OFFSET_QUEUEOFFSET,
  OFFSET_PHYSICALOFFSET,
  OFFSET_SYSFLAG,
  OFFSET_BORNTIMESTAMP,
  OFFSET_BORNHOST,
  REL_STORETIMESTAMP,
  REL_STOREHOST,
  REL_PREPAREDTXOFFSET,
  REL_BODYLENGTH,
  REL_BODY,
  REL_TOPICLENGTH,
  REL_TOPIC,
  REL_PROPERTIESLENGTH,
  REL_PROPERTIES,
  MIN_RECORD_LENGTH,
  bornHostLength,
  storeHostLength,
  recordLength,
} from './record-layout.js'
import { DEFAULT_DELAY_TABLE } from './record-names.js'
import { parseIntBytes, readTopic, utf8Slice } from './record-text.js'

/** checkRecord's own, emptied after each use. */
const CHECK_SCRATCH = new CheckedRecord()

/** The int32 a big-endian read of s.slice(at, at + 4) gives (s ASCII). */
function wordOf(s: string, at: number): number {
  return (s.charCodeAt(at) << 24) | (s.charCodeAt(at + 1) << 16) | (s.charCodeAt(at + 2) << 8) | s.charCodeAt(at + 3)
}

// The property names checkRecord looks for, as words, compared with one read each.
const NAME_TAGS = wordOf(PropertyName.TAGS, 0)
const NAME_KEYS = wordOf(PropertyName.KEYS, 0)
const NAME_UNIQ_KEY_HEAD = wordOf(PropertyName.UNIQ_KEY, 0)
const NAME_UNIQ_KEY_TAIL = wordOf(PropertyName.UNIQ_KEY, 4)
const NAME_DELAY_HEAD = wordOf(PropertyName.DELAY, 0)
const NAME_DELAY_LAST = PropertyName.DELAY.charCodeAt(4)

const SCHEDULE_TOPIC_LENGTH = SCHEDULE_TOPIC.length

/**
 * Reads and checks the record at buf[pos] without reading at or past `limit` (RocketMQ's
 * checkMessageAndReturnSize with the body read). Never throws on bad bytes: BAD covers an unknown
 * magic code (including 0, unwritten space), a TOTALSIZE below the minimum or past `limit`, a
 * field past `limit`, a negative topic length, a body CRC mismatch (only when checkCRC), and an
 * unparsable DELAY on the schedule topic. A record whose fields add up to a length other than
 * TOTALSIZE is LENGTH_MISMATCH. `delayLevelTable` holds milliseconds per delay level (level - 1
 * indexes it); the default is DEFAULT_MESSAGE_DELAY_LEVEL. `bodyCrc`, when not negative, is the
 * CRC of this record's body computed ahead (a scan checks a whole chunk's bodies in one native
 * call, see crc-prefetch.ts): it is compared instead of computing the CRC again.
 */
export function checkRecord(
  buf: Buffer,
  pos: number,
  limit: number,
  checkCRC: boolean,
  delayLevelTable: readonly number[] = DEFAULT_DELAY_TABLE,
  views?: DataViewCache,
  bodyCrc = -1,
): DispatchRequest {
  const checked = CHECK_SCRATCH
  checkRecordInto(buf, pos, limit, checkCRC, delayLevelTable, views, bodyCrc, checked)
  const request = checked.status === 'OK' ? requestOf(checked) : failed(checked.status, checked.size, checked.reason)
  checked.release()
  return request
}

/** A checked record as a plain DispatchRequest of its own, keys decoded. */
export function requestOf(c: CheckedRecord): DispatchRequest {
  return {
    status: c.status,
    size: c.size,
    reason: c.reason,
    topic: c.topic,
    queueId: c.queueId,
    queueOffset: c.queueOffset,
    commitLogOffset: c.commitLogOffset,
    sysFlag: c.sysFlag,
    bornTimestamp: c.bornTimestamp,
    storeTimestamp: c.storeTimestamp,
    preparedTransactionOffset: c.preparedTransactionOffset,
    tagsCode: c.tagsCode,
    keys: c.keys,
    uniqKey: c.uniqKey,
    bodyCRC: c.bodyCRC,
  }
}

/** checkRecord into `out` (see CheckedRecord): the same checks and decisions, nothing allocated; true when OK. */
export function checkRecordInto(
  buf: Buffer,
  pos: number,
  limit: number,
  checkCRC: boolean,
  delayLevelTable: readonly number[],
  views: DataViewCache | undefined,
  bodyCrc: number,
  out: CheckedRecord,
): boolean {
  const end = limit < buf.length ? limit : buf.length
  if (!Number.isInteger(pos) || pos < 0 || pos + END_FILE_MIN_BLANK_LENGTH > end) {
    return fail(out, 'BAD', -1, 'bounds: no record header before the limit')
  }
  const dv = dataViewOf(buf, views)
  const totalSize = dv.getInt32(pos + OFFSET_TOTALSIZE)
  const magic = dv.getInt32(pos + OFFSET_MAGIC)
  if (magic !== MESSAGE_MAGIC_CODE) {
    if (magic === BLANK_MAGIC_CODE) return fail(out, 'BLANK', 0, undefined)
    const why =
      magic === MESSAGE_MAGIC_CODE_V2 ? 'magic: a v2 record (RocketMQ 5.1+), not supported' : `magic: unknown magic code 0x${hex8(magic)}`
    return fail(out, 'BAD', -1, why)
  }
  if (totalSize < MIN_RECORD_LENGTH || totalSize > end - pos) {
    return fail(out, 'BAD', -1, `bounds: TOTALSIZE ${totalSize} is below ${MIN_RECORD_LENGTH} or runs past the limit`)
  }

  const sysFlag = dv.getInt32(pos + OFFSET_SYSFLAG)
  const bornEnd = pos + OFFSET_BORNHOST + bornHostLength(sysFlag)
  const storeEnd = bornEnd + REL_STOREHOST + storeHostLength(sysFlag)
  const bodyAt = storeEnd + REL_BODY
  if (bodyAt > end) return fail(out, 'BAD', -1, 'bounds: header runs past the limit')
  const bodyCRC = dv.getInt32(pos + OFFSET_BODYCRC)
  const queueId = dv.getInt32(pos + OFFSET_QUEUEID)
  const queueOffset = getInt64(dv, pos + OFFSET_QUEUEOFFSET)
  const commitLogOffset = getInt64(dv, pos + OFFSET_PHYSICALOFFSET)
  const bornTimestamp = getInt64(dv, pos + OFFSET_BORNTIMESTAMP)
  const storeTimestamp = getInt64(dv, bornEnd + REL_STORETIMESTAMP)
  const preparedTransactionOffset = getInt64(dv, storeEnd + REL_PREPAREDTXOFFSET)
  const bodyLength = dv.getInt32(storeEnd + REL_BODYLENGTH)

  let bodyEnd = bodyAt
  if (bodyLength > 0) {
    bodyEnd = bodyAt + bodyLength
    if (bodyEnd > end) return fail(out, 'BAD', -1, 'bounds: body runs past the limit')
    if (checkCRC && (bodyCrc >= 0 ? bodyCrc : bodyCrcAt(buf, bodyAt, bodyEnd - bodyAt)) !== bodyCRC) {
      return fail(out, 'BAD', -1, 'crc: body CRC does not match BODYCRC')
    }
  }
  if (bodyEnd + REL_TOPIC > end) return fail(out, 'BAD', -1, 'bounds: topic length runs past the limit')
  const topicLength = dv.getInt8(bodyEnd + REL_TOPICLENGTH)
  if (topicLength < 0) return fail(out, 'BAD', -1, `length: negative topic length ${topicLength}`)
  const topicAt = bodyEnd + REL_TOPIC
  const topicEnd = topicAt + topicLength
  if (topicEnd + REL_PROPERTIES > end) return fail(out, 'BAD', -1, 'bounds: topic runs past the limit')
  const topicText = readTopic(buf, topicAt, topicLength, dv)
  const topic = topicText.text
  // The body CRC does not cover the header: a damaged queue id or topic must not pass as data
  // (the topic names a directory, the queue id an index).
  if (queueId < 0) return fail(out, 'BAD', -1, `header: negative queue id ${queueId}`)
  const why = topicText.invalidReason()
  if (why !== null) return fail(out, 'BAD', -1, `header: invalid topic (${why})`)
  const propsLength = dv.getInt16(topicEnd + REL_PROPERTIESLENGTH)
  const propsAt = topicEnd + REL_PROPERTIES

  let tagsCode = 0
  let keysAt = -1
  let keysEnd = 0
  let keysAscii = true
  let uniqAt = -1
  let uniqEnd = 0
  let uniqAscii = true
  if (propsLength > 0) {
    const propsEnd = propsAt + propsLength
    if (propsEnd > end) return fail(out, 'BAD', -1, 'bounds: properties run past the limit')
    // The checks of a scan (NUL bytes, pairs without 0x01, UTF-8) fold into the walk below; the
    // rare property string that may fail one is judged by the full checks after it.
    let suspect = false
    // Scan the bytes for the four names the store needs, without decoding the whole string. The
    // separators are ASCII, so byte positions give the same pairs as RocketMQ's parse of the text.
    let tagsAt = -1
    let tagsEnd = 0
    let tagsAscii = true
    let delayAt = -1
    let delayEnd = 0
    let i = propsAt
    while (i < propsEnd) {
      let sep = -1
      let bits = 0
      let j = i
      for (; j < propsEnd; j++) {
        const c = buf[j]
        if (c === PROPERTY_SEPARATOR_BYTE) break
        bits |= c
        if (c === NAME_VALUE_SEPARATOR_BYTE && sep < 0) sep = j
        else if (c === 0) suspect = true
      }
      if (bits >= 0x80 || (j > i && sep < 0)) suspect = true
      // A pair needs a non-empty name and a non-empty value.
      if (sep > i && sep < j - 1) {
        const nameLength = sep - i
        if (nameLength === 4) {
          const name = dv.getInt32(i)
          if (name === NAME_TAGS) {
            tagsAt = sep + 1
            tagsEnd = j
            tagsAscii = bits < 0x80
          } else if (name === NAME_KEYS) {
            keysAt = sep + 1
            keysEnd = j
            keysAscii = bits < 0x80
          }
        } else if (nameLength === 8) {
          if (dv.getInt32(i) === NAME_UNIQ_KEY_HEAD && dv.getInt32(i + 4) === NAME_UNIQ_KEY_TAIL) {
            uniqAt = sep + 1
            uniqEnd = j
            uniqAscii = bits < 0x80
          }
        } else if (nameLength === 5) {
          if (dv.getInt32(i) === NAME_DELAY_HEAD && buf[i + 4] === NAME_DELAY_LAST) {
            delayAt = sep + 1
            delayEnd = j
          }
        }
      }
      i = j + 1
    }
    if (checkCRC && suspect) {
      const nul = buf.indexOf(0, propsAt)
      if (nul >= 0 && nul < propsEnd) return fail(out, 'BAD', -1, 'properties: a NUL byte (zeros of a torn write)')
      if (!propertiesAreWellFormed(buf, dv, propsAt, propsEnd)) return fail(out, 'BAD', -1, 'properties: a pair without 0x01, or not UTF-8')
    }
    if (tagsAt >= 0) {
      if (tagsAscii) {
        tagsCode = continueJavaBytesHash(0, buf, tagsAt, tagsEnd)
      } else {
        tagsCode = javaStringHashCode(utf8Slice.call(buf, tagsAt, tagsEnd))
      }
    }
    if (delayAt >= 0 && topicLength === SCHEDULE_TOPIC_LENGTH && topic === SCHEDULE_TOPIC) {
      let level = parseIntBytes(buf, delayAt, delayEnd)
      if (Number.isNaN(level)) return fail(out, 'BAD', -1, 'delay: DELAY is not an integer')
      if (level > delayLevelTable.length) level = delayLevelTable.length
      if (level > 0) {
        const delay = delayLevelTable[level - 1]
        tagsCode = storeTimestamp + (delay === undefined ? 1000 : delay)
      }
    }
  }

  const expected = recordLength(sysFlag, bodyLength, topicLength, propsLength)
  if (expected !== totalSize) {
    return fail(out, 'LENGTH_MISMATCH', totalSize, `length: fields add up to ${expected} bytes, TOTALSIZE is ${totalSize}`)
  }
  out.status = 'OK'
  out.size = totalSize
  out.reason = undefined
  out.topic = topic
  out.topicHash = topicText.hash
  out.queueId = queueId
  out.queueOffset = queueOffset
  out.commitLogOffset = commitLogOffset
  out.sysFlag = sysFlag
  out.bornTimestamp = bornTimestamp
  out.storeTimestamp = storeTimestamp
  out.preparedTransactionOffset = preparedTransactionOffset
  out.tagsCode = tagsCode
  out.bodyCRC = bodyCRC
  out.bytes = buf
  out.keysAt = keysAt
  out.keysEnd = keysEnd
  out.keysAscii = keysAscii
  out.uniqAt = uniqAt
  out.uniqEnd = uniqEnd
  out.uniqAscii = uniqAscii
  return true
}

/**
 * BODYLENGTH of the record at buf[pos] (a record checkRecord found OK): the compaction cleaner
 * tells tombstones (empty bodies) from values by it without decoding the record.
 */
export function bodyLengthAt(buf: Buffer, pos: number, views?: DataViewCache): number {
  const dv = dataViewOf(buf, views)
  const sysFlag = dv.getInt32(pos + OFFSET_SYSFLAG)
  const storeEnd = pos + OFFSET_BORNHOST + bornHostLength(sysFlag) + REL_STOREHOST + storeHostLength(sysFlag)
  return dv.getInt32(storeEnd + REL_BODYLENGTH)
}
