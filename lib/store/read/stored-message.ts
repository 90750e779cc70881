// A message served by a read: a view of its record with the body sliced out; every other field of
// RocketMQ's MessageExt is read from the record when asked for (the text ones, topic, properties,
// tags, keys, hosts and msgId, are decoded once and kept). Most consumers read the body and an
// offset or two; decoding every field of every message was the read path's largest cost.
//
// The bytes are the reader's own copy by default (see read-batch.ts), so a lazy field decodes the
// same bytes whenever it is asked for. In zero-copy mode the message is decoded eagerly instead
// (decodeMessage), because the mapping under it may be unmapped or scribbled on later.
import {
  bornHostLength,
  decodeMessage,
  OFFSET_BODYCRC,
  OFFSET_BORNHOST,
  OFFSET_SYSFLAG,
  OFFSET_TOTALSIZE,
  OFFSET_BORNTIMESTAMP,
  OFFSET_FLAG,
  OFFSET_PHYSICALOFFSET,
  OFFSET_QUEUEID,
  OFFSET_QUEUEOFFSET,
  parsePropertiesString,
  PropertyName,
  storeHostLength,
  storeTimestampOffset,
  type DecodedMessage,
  type HostAddress,
} from '../commitlog/record.js'

const TWO_POW_32 = 4294967296
/** The store host follows the born host and the 8-byte store timestamp. */
const STORE_HOST_AT = 8

function getLong(dv: DataView, at: number): number {
  return dv.getInt32(at) * TWO_POW_32 + dv.getUint32(at + 4)
}

function isAscii(bytes: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (bytes[i] >= 0x80) return false
  return true
}

function text(bytes: Buffer, from: number, to: number): string {
  return bytes.toString(isAscii(bytes, from, to) ? 'latin1' : 'utf8', from, to)
}

export class StoredMessage implements DecodedMessage {
  readonly body: Buffer

  readonly #bytes: Buffer
  readonly #dv: DataView
  readonly #at: number
  readonly #bodyEnd: number
  #topic: string | undefined
  #properties: Record<string, string> | undefined
  #keys: string[] | undefined
  #full: DecodedMessage | null = null

  /**
   * The record at `at` of `bytes` (`dv` over the same bytes), whose body locateRecordFields found
   * at [bodyAt, bodyEnd): the record was checked whole before it gets here.
   */
  constructor(bytes: Buffer, dv: DataView, at: number, bodyAt: number, bodyEnd: number) {
    this.#bytes = bytes
    this.#dv = dv
    this.#at = at
    this.#bodyEnd = bodyEnd
    this.body = bytes.subarray(bodyAt, bodyEnd)
  }

  // Fixed-position fields: one DataView read each, when asked for.
  get queueId(): number {
    return this.#dv.getInt32(this.#at + OFFSET_QUEUEID)
  }

  get queueOffset(): number {
    return getLong(this.#dv, this.#at + OFFSET_QUEUEOFFSET)
  }

  get commitLogOffset(): number {
    return getLong(this.#dv, this.#at + OFFSET_PHYSICALOFFSET)
  }

  get storeSize(): number {
    return this.#dv.getInt32(this.#at + OFFSET_TOTALSIZE)
  }

  get sysFlag(): number {
    return this.#dv.getInt32(this.#at + OFFSET_SYSFLAG)
  }

  get bodyCRC(): number {
    return this.#dv.getInt32(this.#at + OFFSET_BODYCRC)
  }

  get flag(): number {
    return this.#dv.getInt32(this.#at + OFFSET_FLAG)
  }

  get bornTimestamp(): number {
    return getLong(this.#dv, this.#at + OFFSET_BORNTIMESTAMP)
  }

  // Fields after the born host move with its length (IPv4 or IPv6).
  get storeTimestamp(): number {
    return getLong(this.#dv, this.#at + storeTimestampOffset(this.sysFlag))
  }

  /** Where the fields after the store host begin: reconsumeTimes, then preparedTransactionOffset. */
  #afterStoreHost(): number {
    const sysFlag = this.sysFlag
    return this.#at + OFFSET_BORNHOST + bornHostLength(sysFlag) + STORE_HOST_AT + storeHostLength(sysFlag)
  }

  get reconsumeTimes(): number {
    return this.#dv.getInt32(this.#afterStoreHost())
  }

  get preparedTransactionOffset(): number {
    return getLong(this.#dv, this.#afterStoreHost() + 4)
  }

  /** [topicAt, topicEnd): after the body, behind the topic's one-byte length. */
  #topicRange(): [number, number] {
    const lengthAt = this.#bodyEnd
    const topicAt = lengthAt + 1
    return [topicAt, topicAt + this.#dv.getInt8(lengthAt)]
  }

  get topic(): string {
    if (this.#topic === undefined) {
      const [from, to] = this.#topicRange()
      this.#topic = text(this.#bytes, from, to)
    }
    return this.#topic
  }

  get properties(): Record<string, string> {
    if (this.#properties === undefined) {
      const topicEnd = this.#topicRange()[1]
      const length = Math.max(0, this.#dv.getInt16(topicEnd))
      this.#properties = parsePropertiesString(text(this.#bytes, topicEnd + 2, topicEnd + 2 + length))
    }
    return this.#properties
  }

  get tags(): string | undefined {
    return this.properties[PropertyName.TAGS]
  }

  /** KEYS split on spaces, empty ones dropped. */
  get keys(): string[] {
    if (this.#keys === undefined) {
      const keysText = this.properties[PropertyName.KEYS]
      this.#keys = keysText === undefined ? [] : keysText.split(' ').filter((k) => k !== '')
    }
    return this.#keys
  }

  get bornHost(): HostAddress {
    return this.#decoded().bornHost
  }

  get storeHost(): HostAddress {
    return this.#decoded().storeHost
  }

  /** The offset message id (store host and physical offset), not the client's UNIQ_KEY. */
  get msgId(): string {
    return this.#decoded().msgId
  }

  /** Every field, as a plain object (JSON.stringify, spreading, logging). */
  toJSON(): DecodedMessage {
    return {
      topic: this.topic,
      queueId: this.queueId,
      queueOffset: this.queueOffset,
      commitLogOffset: this.commitLogOffset,
      storeSize: this.storeSize,
      body: this.body,
      tags: this.tags,
      keys: this.keys,
      properties: this.properties,
      storeTimestamp: this.storeTimestamp,
      bornTimestamp: this.bornTimestamp,
      bornHost: this.bornHost,
      storeHost: this.storeHost,
      msgId: this.msgId,
      sysFlag: this.sysFlag,
      reconsumeTimes: this.reconsumeTimes,
      bodyCRC: this.bodyCRC,
      flag: this.flag,
      preparedTransactionOffset: this.preparedTransactionOffset,
    }
  }

  // The rarely read fields come from one full decode of the same bytes.
  #decoded(): DecodedMessage {
    if (this.#full === null) {
      const full = decodeMessage(this.#bytes, this.#at, false)
      // The constructor's caller located a valid record here, and the bytes are ours alone.
      if (full === null) throw new Error('mqstore: a served record no longer decodes')
      this.#full = full
    }
    return this.#full
  }
}
