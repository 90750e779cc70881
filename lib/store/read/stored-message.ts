// A message served by a read: the numbers RocketMQ's MessageExt carries are read when the message
// is made; the text fields (topic, properties, tags, keys, hosts, msgId) are decoded the first
// time they are asked for, from the record's bytes, then kept. Most consumers read the body and
// an offset or two; parsing every property of every message was the read path's largest cost.
//
// The bytes are the reader's own copy by default (see read-batch.ts), so a lazy field decodes the
// same bytes whenever it is asked for. In zero-copy mode the message is decoded eagerly instead
// (decodeMessage), because the mapping under it may be unmapped or scribbled on later.
import {
  decodeMessage,
  OFFSET_BODYCRC,
  OFFSET_BORNTIMESTAMP,
  OFFSET_FLAG,
  OFFSET_PHYSICALOFFSET,
  OFFSET_QUEUEID,
  OFFSET_QUEUEOFFSET,
  parsePropertiesString,
  PropertyName,
  type DecodedMessage,
  type HostAddress,
  type RecordFields,
} from '../commitlog/record.js'

const TWO_POW_32 = 4294967296

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
  readonly queueId: number
  readonly queueOffset: number
  readonly commitLogOffset: number
  readonly storeSize: number
  readonly body: Buffer
  readonly storeTimestamp: number
  readonly bornTimestamp: number
  readonly sysFlag: number
  readonly reconsumeTimes: number
  readonly bodyCRC: number
  readonly flag: number
  readonly preparedTransactionOffset: number

  readonly #bytes: Buffer
  readonly #at: number
  readonly #topicAt: number
  readonly #topicEnd: number
  readonly #propertiesAt: number
  readonly #propertiesEnd: number
  #topic: string | undefined
  #properties: Record<string, string> | undefined
  #keys: string[] | undefined
  #full: DecodedMessage | null = null

  /** The record at `at` of `bytes`, whose fields `f` located (locateRecordFields). */
  constructor(bytes: Buffer, dv: DataView, at: number, f: Readonly<RecordFields>) {
    this.#bytes = bytes
    this.#at = at
    this.queueId = dv.getInt32(at + OFFSET_QUEUEID)
    this.queueOffset = getLong(dv, at + OFFSET_QUEUEOFFSET)
    this.commitLogOffset = getLong(dv, at + OFFSET_PHYSICALOFFSET)
    this.storeSize = f.totalSize
    this.body = bytes.subarray(f.bodyAt, f.bodyAt + f.bodyLength)
    this.storeTimestamp = getLong(dv, f.storeTimestampAt)
    this.bornTimestamp = getLong(dv, at + OFFSET_BORNTIMESTAMP)
    this.sysFlag = f.sysFlag
    this.reconsumeTimes = dv.getInt32(f.reconsumeTimesAt)
    this.bodyCRC = dv.getInt32(at + OFFSET_BODYCRC)
    this.flag = dv.getInt32(at + OFFSET_FLAG)
    this.preparedTransactionOffset = getLong(dv, f.preparedTransactionOffsetAt)
    this.#topicAt = f.topicAt
    this.#topicEnd = f.topicAt + f.topicLength
    this.#propertiesAt = f.propertiesAt
    this.#propertiesEnd = f.propertiesAt + f.propertiesLength
  }

  get topic(): string {
    return (this.#topic ??= text(this.#bytes, this.#topicAt, this.#topicEnd))
  }

  get properties(): Record<string, string> {
    return (this.#properties ??= parsePropertiesString(text(this.#bytes, this.#propertiesAt, this.#propertiesEnd)))
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
