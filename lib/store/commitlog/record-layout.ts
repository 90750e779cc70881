// The byte layout of a RocketMQ 4.9 commit-log record: its fields' offsets (fixed, and relative
// to the variable-length parts), the magic codes, and the lengths that follow from a sysFlag.
import { IPV4_HOST_LENGTH, IPV6_HOST_LENGTH } from './host-address.js'
import { SysFlag } from './sys-flag.js'

export const MESSAGE_MAGIC_CODE = -626843481 // 0xDAA320A7
/** A RocketMQ 5.1+ v2 record (two-byte topic length). Recognised only to name it in errors. */
export const MESSAGE_MAGIC_CODE_V2 = -626843477 // 0xDAA320AB
export const BLANK_MAGIC_CODE = -875286124 // 0xCBD43194
export const END_FILE_MIN_BLANK_LENGTH = 8

export const MAX_PROPERTIES_LENGTH = 32767

export const PropertyName = {
  KEYS: 'KEYS',
  TAGS: 'TAGS',
  UNIQ_KEY: 'UNIQ_KEY',
  DELAY: 'DELAY',
  REAL_TOPIC: 'REAL_TOPIC',
  REAL_QID: 'REAL_QID',
  WAIT: 'WAIT',
} as const

/** The topic that holds delayed messages until their delivery time. */
export const SCHEDULE_TOPIC = 'SCHEDULE_TOPIC_XXXX'

// Fixed field offsets, from the first byte of the record.
export const OFFSET_TOTALSIZE = 0
export const OFFSET_MAGIC = 4
export const OFFSET_BODYCRC = 8
export const OFFSET_QUEUEID = 12
export const OFFSET_FLAG = 16
export const OFFSET_QUEUEOFFSET = 20
export const OFFSET_PHYSICALOFFSET = 28
export const OFFSET_SYSFLAG = 36
export const OFFSET_BORNTIMESTAMP = 40
export const OFFSET_BORNHOST = 48

// Fields after the born host, relative to the end of the born host (48 + B).
export const REL_STORETIMESTAMP = 0
export const REL_STOREHOST = 8
// Relative to the end of the store host (56 + B + S).
export const REL_RECONSUMETIMES = 0
export const REL_PREPAREDTXOFFSET = 4
export const REL_BODYLENGTH = 12
export const REL_BODY = 16
// Relative to the end of the body.
export const REL_TOPICLENGTH = 0
export const REL_TOPIC = 1
// Relative to the end of the topic.
export const REL_PROPERTIESLENGTH = 0
export const REL_PROPERTIES = 2

/** Bytes of a record besides the two hosts, the body, the topic and the properties. */
export const FIXED_LENGTH = OFFSET_BORNHOST + REL_STOREHOST + REL_BODY + REL_TOPIC + REL_PROPERTIES // 75

/** The smallest possible record: two IPv4 hosts, empty body, topic and properties (91 bytes). */
export const MIN_RECORD_LENGTH = FIXED_LENGTH + 2 * IPV4_HOST_LENGTH

/** Headroom over maxMessageSize a whole record may use (topic, properties, fixed fields). */
export const RECORD_HEADROOM = 64 * 1024
export const INT32_MAX = 0x7fffffff

export function bornHostLength(sysFlag: number): number {
  return (sysFlag & SysFlag.BORNHOST_V6) !== 0 ? IPV6_HOST_LENGTH : IPV4_HOST_LENGTH
}

export function storeHostLength(sysFlag: number): number {
  return (sysFlag & SysFlag.STOREHOST_V6) !== 0 ? IPV6_HOST_LENGTH : IPV4_HOST_LENGTH
}

/** Offset of the body inside a record with this sysFlag (BODYLENGTH is the 4 bytes before it). */
export function bodyOffset(sysFlag: number): number {
  return OFFSET_BORNHOST + bornHostLength(sysFlag) + REL_STOREHOST + storeHostLength(sysFlag) + REL_BODY
}

/** Offset of STORETIMESTAMP inside a record with this sysFlag: 48 + born host length. */
export function storeTimestampOffset(sysFlag: number): number {
  return OFFSET_BORNHOST + bornHostLength(sysFlag) + REL_STORETIMESTAMP
}

/**
 * The length a record must have (its TOTALSIZE), from the sysFlag and the three variable byte
 * lengths. Negative body or properties lengths count as 0, as RocketMQ's reader does.
 */
export function recordLength(sysFlag: number, bodyLength: number, topicLength: number, propertiesLength: number): number {
  return (
    FIXED_LENGTH +
    bornHostLength(sysFlag) +
    storeHostLength(sysFlag) +
    (bodyLength > 0 ? bodyLength : 0) +
    topicLength +
    (propertiesLength > 0 ? propertiesLength : 0)
  )
}
