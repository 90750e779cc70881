import { Buffer } from 'node:buffer'
import { dataViewOf, getInt64, javaStringHashCode, setInt64, type DataViewCache } from '../bytes.js'
import {
  hex8,
  ipOf,
  IPV4_HOST_LENGTH,
  IPV6_HOST_LENGTH,
  readHost,
  validPort,
  writeHost,
  type Ip,
  type HostAddress,
} from './host-address.js'
import { SysFlag } from './sys-flag.js'

export { SysFlag } from './sys-flag.js'
export { javaStringHashCode } from '../bytes.js'
export type { HostAddress } from './host-address.js'

import { bodyCrcOf } from './body-crc.js'
import { parsePropertiesString, tagsAndKeysLength, writeAscii, writeTagsAndKeys } from './properties.js'
import { validateTopic } from './record-names.js'
import { isAsciiRange, MAX_TOPIC_CACHE, readText, readTopic } from './record-text.js'
import { RecentTopics } from '../topics/recent-topics.js'
import {
  MESSAGE_MAGIC_CODE,
  BLANK_MAGIC_CODE,
  END_FILE_MIN_BLANK_LENGTH,
  MAX_PROPERTIES_LENGTH,
  PropertyName,
  OFFSET_TOTALSIZE,
  OFFSET_MAGIC,
  OFFSET_BODYCRC,
  OFFSET_QUEUEID,
  OFFSET_FLAG,
  OFFSET_QUEUEOFFSET,
  OFFSET_PHYSICALOFFSET,
  OFFSET_SYSFLAG,
  OFFSET_BORNTIMESTAMP,
  OFFSET_BORNHOST,
  REL_STORETIMESTAMP,
  REL_STOREHOST,
  REL_RECONSUMETIMES,
  REL_PREPAREDTXOFFSET,
  REL_BODYLENGTH,
  REL_BODY,
  REL_TOPICLENGTH,
  REL_TOPIC,
  REL_PROPERTIESLENGTH,
  REL_PROPERTIES,
  FIXED_LENGTH,
  MIN_RECORD_LENGTH,
  RECORD_HEADROOM,
  INT32_MAX,
  bornHostLength,
  storeHostLength,
  recordLength,
} from './record-layout.js'

export * from './properties.js'
export * from './record-check.js'
export * from './record-layout.js'
export * from './record-names.js'
export { latin1Slice, utf8Slice, type Slice } from './record-text.js'
export { blankDispatchRequest, CheckedRecord, type CheckStatus, type DispatchRequest } from './dispatch-request.js'

// ---------------------------------------------------------------------------------------------
// Encoding

export interface RecordInput extends RecordParts {
  storeHost: HostAddress
  /** Already built by encodeProperties (or taken from a stored record). */
  propertiesString: string
  /** The body's BODYCRC when the caller computed it already (a batch put does, in one call). */
  bodyCRC?: number
}

export interface PreparedRecord {
  readonly length: number
  readonly topic: string
  readonly queueId: number
  /** The input sysFlag with BORNHOST_V6 / STOREHOST_V6 set from the hosts. */
  readonly sysFlag: number
  /** -1 until its writer computes it, for a record prepared with BODY_CRC_AFTER_WRITE. */
  readonly bodyCRC: number
  readonly body: Uint8Array
  readonly bornTimestamp: number
  readonly preparedTransactionOffset: number
  /** TAGS, KEYS and UNIQ_KEY as written (undefined when absent or empty), for the put's own dispatch. */
  readonly tags: string | undefined
  readonly keys: string | undefined
  readonly uniqKey: string | undefined
}

/**
 * The message's own fields of a record, as prepareMessageRecord takes them. Properties come either
 * as a built string (`propertiesString`) or, for the common message that carries only tags and
 * keys, as those two strings alone (written as bytes, never joined into a string).
 */
export interface RecordParts {
  topic: string
  queueId: number
  body: Uint8Array
  flag: number
  sysFlag: number
  bornTimestamp: number
  bornHost: HostAddress
  reconsumeTimes: number
  preparedTransactionOffset: number
}

export type PrepareFailure = { status: 'MESSAGE_ILLEGAL' | 'PROPERTIES_SIZE_EXCEEDED'; reason: string }

export function isPrepareFailure(r: PreparedRecord | PrepareFailure): r is PrepareFailure {
  return !(r instanceof EncodedRecord)
}

/** Everything writeRecord needs, computed outside the append lock. */
const NO_BYTES = new Uint8Array(0)
/** What a record holds before it is first filled. */
const LOOPBACK = ipOf('127.0.0.1') as Ip

export class EncodedRecord implements PreparedRecord {
  // Every field starts with a value of its kind, so every instance has one shape from the start;
  // set() fills them. A put refills the records of a pool (record-slots.ts) rather than making one
  // per message.
  length = 0
  topic = ''
  queueId = 0
  sysFlag = 0
  bodyCRC = -1
  flag = 0
  bornTimestamp = 0
  reconsumeTimes = 0
  preparedTransactionOffset = 0
  body: Uint8Array = NO_BYTES
  topicBytes: Uint8Array = NO_BYTES
  /** The property string when it is ASCII (written as is), else null and `propertiesBytes` holds it. */
  propertiesAscii: string | null = null
  propertiesBytes: Uint8Array | null = null
  propertiesLength = 0
  bornIp: Ip = LOOPBACK
  bornPort = 0
  storeIp: Ip = LOOPBACK
  storePort = 0
  /**
   * With propertiesAscii and propertiesBytes both null: the properties are TAGS and KEYS alone,
   * these two ASCII strings (either may be undefined), written as `TAGS\x01t\x02KEYS\x01k`.
   */
  tags: string | undefined = undefined
  keys: string | undefined = undefined
  uniqKey: string | undefined = undefined

  set(
    length: number,
    parts: RecordParts,
    sysFlag: number,
    bodyCRC: number,
    topicBytes: Uint8Array,
    propertiesAscii: string | null,
    propertiesBytes: Uint8Array | null,
    propertiesLength: number,
    bornIp: Ip,
    storeIp: Ip,
    storePort: number,
    tags: string | undefined,
    keys: string | undefined,
    uniqKey: string | undefined,
  ): this {
    this.length = length
    this.topic = parts.topic
    this.queueId = parts.queueId
    this.sysFlag = sysFlag
    this.bodyCRC = bodyCRC
    this.flag = parts.flag
    this.bornTimestamp = parts.bornTimestamp
    this.reconsumeTimes = parts.reconsumeTimes
    this.preparedTransactionOffset = parts.preparedTransactionOffset
    this.body = parts.body
    this.topicBytes = topicBytes
    this.propertiesAscii = propertiesAscii
    this.propertiesBytes = propertiesBytes
    this.propertiesLength = propertiesLength
    this.bornIp = bornIp
    this.bornPort = parts.bornHost.port
    this.storeIp = storeIp
    this.storePort = storePort
    this.tags = tags
    this.keys = keys
    this.uniqKey = uniqKey
    return this
  }

  /** Lets go of the message's body and strings (a pooled record outlives its put). */
  forget(): void {
    this.body = NO_BYTES
    this.propertiesAscii = null
    this.propertiesBytes = null
    this.tags = undefined
    this.keys = undefined
    this.uniqKey = undefined
  }
}

// Module-level caches (topic bytes here, decoded topics in record-text.ts) are shared by
// every store in the process. That is safe: they hold topic text and small copies of its bytes,
// never a view of a mapping, are bounded (cleared when full), and a stale entry is still correct.
/** Valid topics seen so far → their bytes (ASCII, so one byte per character). */
const topicCache = new Map<string, Uint8Array>()

/** The bytes of the topics the last records named, found without a lookup in topicCache. */
const recentTopicBytes = new RecentTopics<Uint8Array>()

function topicBytesOf(topic: string): Uint8Array | string {
  let bytes = recentTopicBytes.find(topic) ?? topicCache.get(topic)
  if (bytes === undefined) {
    const why = validateTopic(topic)
    if (why !== null) return why
    bytes = new Uint8Array(topic.length)
    for (let i = 0; i < topic.length; i++) bytes[i] = topic.charCodeAt(i)
    if (topicCache.size >= MAX_TOPIC_CACHE) topicCache.clear()
    topicCache.set(topic, bytes)
  }
  recentTopicBytes.keep(topic, bytes)
  return bytes
}

function illegal(reason: string): PrepareFailure {
  return { status: 'MESSAGE_ILLEGAL', reason }
}

function isInt32(v: number): boolean {
  return (v | 0) === v
}

/**
 * Validates and measures one message and computes its body CRC, outside the append lock. The body
 * is not copied: it must not change until writeRecord has run.
 */
/**
 * A bodyCRC for prepareMessageRecord: the CRC is computed on the bytes written, after the append
 * (the commit log's batch append does it); until then the record's bodyCRC is -1.
 */
export const BODY_CRC_AFTER_WRITE = -2

export function prepareRecord(input: RecordInput, maxMessageSize: number): PreparedRecord | PrepareFailure {
  const known = input.bodyCRC
  return prepareMessageRecord(
    input,
    input.storeHost,
    input.propertiesString,
    undefined,
    undefined,
    undefined,
    known !== undefined && known >= 0 ? known : -1,
    maxMessageSize,
  )
}

/**
 * prepareRecord for a put: `propertiesString` is the built properties, or null when the message
 * carries only tags and keys (`tags` / `keys`, each plain ASCII as isPlainAscii says, or
 * undefined), which are then written as bytes. `tags`, `keys` and `uniqKey` (undefined when
 * absent or empty) are kept for the put's own dispatch: passed one by one, as no object is made
 * per message on this path. `bodyCRC` < 0: computed here.
 */
export function prepareMessageRecord(
  parts: RecordParts,
  storeHost: HostAddress,
  propertiesString: string | null,
  tags: string | undefined,
  keys: string | undefined,
  uniqKey: string | undefined,
  bodyCRC: number,
  maxMessageSize: number,
  into: EncodedRecord | null = null,
): PreparedRecord | PrepareFailure {
  const topicBytes = topicBytesOf(parts.topic)
  if (typeof topicBytes === 'string') return illegal(topicBytes)

  let propsLength: number
  let propsBytes: Uint8Array | null = null
  const props = propertiesString
  if (props === null) {
    propsLength = tagsAndKeysLength(tags, keys)
  } else {
    if (typeof props !== 'string') return illegal('properties must be a string')
    if (props.length > MAX_PROPERTIES_LENGTH) {
      return illegal(`properties are ${props.length} characters long, more than ${MAX_PROPERTIES_LENGTH}`)
    }
    // Every UTF-16 unit above 0x7f takes more than one UTF-8 byte, so equal lengths mean ASCII,
    // which is written straight from the string; anything else is encoded here, once.
    propsLength = props.length === 0 ? 0 : Buffer.byteLength(props, 'utf8')
    if (propsLength !== props.length) {
      propsBytes = Buffer.from(props, 'utf8')
      propsLength = propsBytes.length
    }
  }
  if (propsLength > MAX_PROPERTIES_LENGTH) {
    return {
      status: 'PROPERTIES_SIZE_EXCEEDED',
      reason: `properties are ${propsLength} bytes long, more than ${MAX_PROPERTIES_LENGTH}`,
    }
  }

  const body = parts.body
  if (!(body instanceof Uint8Array)) return illegal('body must be a Uint8Array')
  const bodyLength = body.length
  if (bodyLength > maxMessageSize) {
    return illegal(`body is ${bodyLength} bytes, more than maxMessageSize ${maxMessageSize}`)
  }

  const bornIp = ipOf(parts.bornHost.address)
  if (bornIp === null) return illegal(`born host ${JSON.stringify(parts.bornHost.address)} is not an IP address`)
  const storeIp = ipOf(storeHost.address)
  if (storeIp === null) return illegal(`store host ${JSON.stringify(storeHost.address)} is not an IP address`)
  const sysFlag =
    (parts.sysFlag & ~(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)) |
    (bornIp.v6 ? SysFlag.BORNHOST_V6 : 0) |
    (storeIp.v6 ? SysFlag.STOREHOST_V6 : 0)

  const length =
    FIXED_LENGTH +
    (bornIp.v6 ? IPV6_HOST_LENGTH : IPV4_HOST_LENGTH) +
    (storeIp.v6 ? IPV6_HOST_LENGTH : IPV4_HOST_LENGTH) +
    bodyLength +
    topicBytes.length +
    propsLength
  if (length > maxMessageSize + RECORD_HEADROOM || length > INT32_MAX) {
    return illegal(`record is ${length} bytes, more than maxMessageSize ${maxMessageSize} + ${RECORD_HEADROOM}`)
  }

  const queueId = parts.queueId
  if (!isInt32(queueId) || queueId < 0) return illegal(`queueId must be an int32 >= 0, got ${queueId}`)
  if (!isInt32(parts.flag)) return illegal(`flag must be an int32, got ${parts.flag}`)
  if (!isInt32(parts.sysFlag)) return illegal(`sysFlag must be an int32, got ${parts.sysFlag}`)
  if (!isInt32(parts.reconsumeTimes)) return illegal(`reconsumeTimes must be an int32, got ${parts.reconsumeTimes}`)
  if (!Number.isSafeInteger(parts.bornTimestamp)) {
    return illegal(`bornTimestamp must be an integer, got ${parts.bornTimestamp}`)
  }
  if (!Number.isSafeInteger(parts.preparedTransactionOffset)) {
    return illegal(`preparedTransactionOffset must be an integer, got ${parts.preparedTransactionOffset}`)
  }
  if (!validPort(parts.bornHost.port)) return illegal(`born host port ${parts.bornHost.port} is not in 0..65535`)
  if (!validPort(storeHost.port)) return illegal(`store host port ${storeHost.port} is not in 0..65535`)

  return (into ?? new EncodedRecord()).set(
    length,
    parts,
    sysFlag,
    bodyCRC >= 0 ? bodyCRC : bodyCRC === BODY_CRC_AFTER_WRITE ? -1 : bodyCrcOf(body),
    topicBytes,
    props !== null && propsBytes === null ? props : null,
    propsBytes,
    propsLength,
    bornIp,
    storeIp,
    storeHost.port,
    tags,
    keys,
    uniqKey,
  )
}

// The DataViews over the buffers below come from the caller's DataViewCache (one per owner of a
// mapping, cleared when it lets go of it); without one, each call builds its own view.

/**
 * Writes the record at target[pos, pos + rec.length) and returns where its body starts. This is
 * where the body is copied, once. A record prepared with BODY_CRC_AFTER_WRITE gets BODYCRC -1 here,
 * which its writer replaces (WrittenBodyCrcs). RangeError when the record does not fit or an offset / timestamp is not a safe integer.
 */
export function writeRecord(
  target: Buffer,
  pos: number,
  rec: PreparedRecord,
  queueOffset: number,
  physicalOffset: number,
  storeTimestamp: number,
  views?: DataViewCache,
): number {
  if (!(rec instanceof EncodedRecord)) throw new TypeError('writeRecord needs a record made by prepareRecord')
  const length = rec.length
  if (!(Number.isInteger(pos) && pos >= 0 && pos + length <= target.length)) {
    throw new RangeError(`record of ${length} bytes at ${pos} does not fit in a buffer of ${target.length}`)
  }
  if (!Number.isSafeInteger(queueOffset) || !Number.isSafeInteger(physicalOffset) || !Number.isSafeInteger(storeTimestamp)) {
    throw new RangeError('queueOffset, physicalOffset and storeTimestamp must be safe integers')
  }
  const dv = dataViewOf(target, views)
  dv.setInt32(pos + OFFSET_TOTALSIZE, length)
  dv.setInt32(pos + OFFSET_BODYCRC, rec.bodyCRC)
  dv.setInt32(pos + OFFSET_QUEUEID, rec.queueId)
  dv.setInt32(pos + OFFSET_FLAG, rec.flag)
  setInt64(dv, pos + OFFSET_QUEUEOFFSET, queueOffset)
  setInt64(dv, pos + OFFSET_PHYSICALOFFSET, physicalOffset)
  dv.setInt32(pos + OFFSET_SYSFLAG, rec.sysFlag)
  setInt64(dv, pos + OFFSET_BORNTIMESTAMP, rec.bornTimestamp)
  const bornEnd = writeHost(dv, pos + OFFSET_BORNHOST, rec.bornIp, rec.bornPort)
  setInt64(dv, bornEnd + REL_STORETIMESTAMP, storeTimestamp)
  const storeEnd = writeHost(dv, bornEnd + REL_STOREHOST, rec.storeIp, rec.storePort)
  dv.setInt32(storeEnd + REL_RECONSUMETIMES, rec.reconsumeTimes)
  setInt64(dv, storeEnd + REL_PREPAREDTXOFFSET, rec.preparedTransactionOffset)
  const body = rec.body
  dv.setInt32(storeEnd + REL_BODYLENGTH, body.length)
  const bodyAt = storeEnd + REL_BODY
  if (body.length !== 0) target.set(body, bodyAt)
  const bodyEnd = bodyAt + body.length
  const topic = rec.topicBytes
  dv.setInt8(bodyEnd + REL_TOPICLENGTH, topic.length)
  const topicAt = bodyEnd + REL_TOPIC
  for (let i = 0; i < topic.length; i++) target[topicAt + i] = topic[i]
  const topicEnd = topicAt + topic.length
  const propsLength = rec.propertiesLength
  dv.setInt16(topicEnd + REL_PROPERTIESLENGTH, propsLength)
  if (propsLength !== 0) {
    const propsAt = topicEnd + REL_PROPERTIES
    if (rec.propertiesAscii !== null) writeAscii(target, propsAt, rec.propertiesAscii)
    else if (rec.propertiesBytes !== null) target.set(rec.propertiesBytes, propsAt)
    else writeTagsAndKeys(target, propsAt, rec.tags, rec.keys)
  }
  // The magic code goes in last: a writer killed part-way leaves a record without it, which
  // recovery sees as a torn write. (The body CRC does not cover the header or the properties.)
  dv.setInt32(pos + OFFSET_MAGIC, MESSAGE_MAGIC_CODE)
  return bodyAt
}

/**
 * Writes the 8-byte blank header that closes a segment: TOTALSIZE = maxBlank (the bytes left in
 * the file), MAGICCODE = BLANK_MAGIC_CODE. The rest of the tail is left as it is.
 */
export function writeBlank(target: Buffer, pos: number, maxBlank: number, views?: DataViewCache): void {
  if (!isInt32(maxBlank) || maxBlank < END_FILE_MIN_BLANK_LENGTH) {
    throw new RangeError(`a blank needs at least ${END_FILE_MIN_BLANK_LENGTH} bytes, got ${maxBlank}`)
  }
  if (!(Number.isInteger(pos) && pos >= 0 && pos + END_FILE_MIN_BLANK_LENGTH <= target.length)) {
    throw new RangeError(`blank header at ${pos} does not fit in a buffer of ${target.length}`)
  }
  const dv = dataViewOf(target, views)
  dv.setInt32(pos + OFFSET_TOTALSIZE, maxBlank)
  dv.setInt32(pos + OFFSET_MAGIC, BLANK_MAGIC_CODE)
}

// ---------------------------------------------------------------------------------------------
// Full decoding (reads)

export interface DecodedMessage {
  topic: string
  queueId: number
  queueOffset: number
  commitLogOffset: number
  storeSize: number
  /** A zero-copy view of the record's body unless copyBody was set. */
  body: Buffer
  tags: string | undefined
  /** KEYS split on spaces, empty ones dropped. */
  keys: string[]
  properties: Record<string, string>
  storeTimestamp: number
  bornTimestamp: number
  bornHost: HostAddress
  storeHost: HostAddress
  /** The offset message id (store host and physical offset), not the client's UNIQ_KEY. */
  msgId: string
  sysFlag: number
  reconsumeTimes: number
  bodyCRC: number
  flag: number
  preparedTransactionOffset: number
}

/** Upper-case hex of the int32 words in [from, to), to a multiple of 4 bytes. */
function hexWords(dv: DataView, from: number, to: number): string {
  let out = ''
  for (let at = from; at < to; at += 4) out += hex8(dv.getInt32(at))
  return out
}

/**
 * Decodes the whole record at buf[pos] (the body is not decompressed and its CRC not checked).
 * Null when the bytes there are not a complete, self-consistent message record.
 */
export function decodeMessage(buf: Buffer, pos: number, copyBody: boolean, views?: DataViewCache): DecodedMessage | null {
  if (!Number.isInteger(pos)) return null
  const dv = dataViewOf(buf, views)
  const f = DECODE_FIELDS
  if (!locateRecordFields(dv, pos, buf.length, f)) return null
  const { totalSize, sysFlag, bodyAt, topicAt, topicLength } = f
  const bodyEnd = bodyAt + f.bodyLength
  const propsAt = f.propertiesAt
  const storeAt = f.storeHostAt
  const storeEnd = storeAt + storeHostLength(sysFlag)
  const propsEnd = propsAt + f.propertiesLength
  const properties = parsePropertiesString(readText(buf, propsAt, propsEnd, isAsciiRange(buf, propsAt, propsEnd)))
  const keysText = properties[PropertyName.KEYS]
  const view = buf.subarray(bodyAt, bodyEnd)
  return {
    topic: readTopic(buf, topicAt, topicLength).text,
    queueId: dv.getInt32(pos + OFFSET_QUEUEID),
    queueOffset: getInt64(dv, pos + OFFSET_QUEUEOFFSET),
    commitLogOffset: getInt64(dv, pos + OFFSET_PHYSICALOFFSET),
    storeSize: totalSize,
    body: copyBody ? Buffer.from(view) : view,
    tags: properties[PropertyName.TAGS],
    keys: keysText === undefined ? [] : keysText.split(' ').filter((k) => k !== ''),
    properties,
    storeTimestamp: getInt64(dv, f.storeTimestampAt),
    bornTimestamp: getInt64(dv, pos + OFFSET_BORNTIMESTAMP),
    bornHost: readHost(dv, pos + OFFSET_BORNHOST, (sysFlag & SysFlag.BORNHOST_V6) !== 0),
    storeHost: readHost(dv, storeAt, (sysFlag & SysFlag.STOREHOST_V6) !== 0),
    // The store host field is address ‖ port, exactly the head of the msgId.
    msgId: hexWords(dv, storeAt, storeEnd) + hexWords(dv, pos + OFFSET_PHYSICALOFFSET, pos + OFFSET_SYSFLAG),
    sysFlag,
    reconsumeTimes: dv.getInt32(f.reconsumeTimesAt),
    bodyCRC: dv.getInt32(pos + OFFSET_BODYCRC),
    flag: dv.getInt32(pos + OFFSET_FLAG),
    preparedTransactionOffset: getInt64(dv, f.preparedTransactionOffsetAt),
  }
}

// ---------------------------------------------------------------------------------------------
// Tag filter

/**
 * The consume-queue stage of RocketMQ's tag filter. Matches when there is no filter (undefined or
 * empty list) or one of the tags is '*'; otherwise when the Java hash of one trimmed, non-empty
 * tag equals the low 32 bits of tagsCode. Hashes collide: the client re-checks the tag text.
 */
export function tagsMatch(filterTags: string[] | undefined, tagsCode: number): boolean {
  if (filterTags === undefined || filterTags.length === 0) return true
  const code = tagsCode | 0
  for (const raw of filterTags) {
    const tag = raw.trim()
    if (tag === '*') return true
    if (tag !== '' && javaStringHashCode(tag) === code) return true
  }
  return false
}

// ---------------------------------------------------------------------------------------------
// Field positions (lazy reads)

/** Where the variable fields of one record lie, as absolute positions in the buffer read. */
export interface RecordFields {
  totalSize: number
  sysFlag: number
  storeTimestampAt: number
  storeHostAt: number
  reconsumeTimesAt: number
  preparedTransactionOffsetAt: number
  bodyAt: number
  bodyLength: number
  topicAt: number
  topicLength: number
  propertiesAt: number
  propertiesLength: number
}

export function emptyRecordFields(): RecordFields {
  return {
    totalSize: 0,
    sysFlag: 0,
    storeTimestampAt: 0,
    storeHostAt: 0,
    reconsumeTimesAt: 0,
    preparedTransactionOffsetAt: 0,
    bodyAt: 0,
    bodyLength: 0,
    topicAt: 0,
    topicLength: 0,
    propertiesAt: 0,
    propertiesLength: 0,
  }
}

/** decodeMessage's scratch positions: numbers only, so sharing it keeps no buffer reachable. */
const DECODE_FIELDS = emptyRecordFields()

/**
 * Fills `out` with the field positions of the message record at `pos` of a buffer `limit` bytes
 * long, with the same checks as decodeMessage; false when the bytes there are not a complete,
 * self-consistent message record. Decodes nothing: readers decode a field when it is asked for.
 */
export function locateRecordFields(dv: DataView, pos: number, limit: number, out: RecordFields): boolean {
  if (pos < 0 || pos + END_FILE_MIN_BLANK_LENGTH > limit) return false
  const totalSize = dv.getInt32(pos + OFFSET_TOTALSIZE)
  if (dv.getInt32(pos + OFFSET_MAGIC) !== MESSAGE_MAGIC_CODE) return false
  if (totalSize < MIN_RECORD_LENGTH || totalSize > limit - pos) return false
  const recordEnd = pos + totalSize
  const sysFlag = dv.getInt32(pos + OFFSET_SYSFLAG)
  const bornEnd = pos + OFFSET_BORNHOST + bornHostLength(sysFlag)
  const storeEnd = bornEnd + REL_STOREHOST + storeHostLength(sysFlag)
  const bodyAt = storeEnd + REL_BODY
  if (bodyAt > recordEnd) return false
  const bodyLength = dv.getInt32(storeEnd + REL_BODYLENGTH)
  const bodyEnd = bodyAt + (bodyLength > 0 ? bodyLength : 0)
  if (bodyEnd + REL_TOPIC > recordEnd) return false
  const topicLength = dv.getInt8(bodyEnd + REL_TOPICLENGTH)
  const topicAt = bodyEnd + REL_TOPIC
  const topicEnd = topicAt + topicLength
  if (topicLength < 0 || topicEnd + REL_PROPERTIES > recordEnd) return false
  const propertiesLength = dv.getInt16(topicEnd + REL_PROPERTIESLENGTH)
  if (recordLength(sysFlag, bodyLength, topicLength, propertiesLength) !== totalSize) return false
  out.totalSize = totalSize
  out.sysFlag = sysFlag
  out.storeTimestampAt = bornEnd + REL_STORETIMESTAMP
  out.storeHostAt = bornEnd + REL_STOREHOST
  out.reconsumeTimesAt = storeEnd + REL_RECONSUMETIMES
  out.preparedTransactionOffsetAt = storeEnd + REL_PREPAREDTXOFFSET
  out.bodyAt = bodyAt
  out.bodyLength = bodyLength > 0 ? bodyLength : 0
  out.topicAt = topicAt
  out.topicLength = topicLength
  out.propertiesAt = topicEnd + REL_PROPERTIES
  out.propertiesLength = propertiesLength > 0 ? propertiesLength : 0
  return true
}
