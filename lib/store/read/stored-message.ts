// A message served by a read: a view of its record, created with no per-field work; every field
// of RocketMQ's MessageExt is read from the record when first asked for (the text ones, topic,
// properties, tags, keys, hosts and msgId, and the body view, are made once and kept). Most
// consumers read the body and an offset or two; decoding every field of every message was the
// read path's largest cost.
//
// A read copies its records in one native pass (read-batch.ts): each record without its body (the
// fields before the body, then those after it, end to end) into a private buffer no consumer can
// reach, which the fields are read from, and bodies into the buffer the bodies are views of. So a
// consumer may write into a body (or the whole buffer behind it) or transfer that buffer away, and
// every other field still reads what was stored. In zero-copy mode the fields come from the same
// private copy, and only the bodies are views of the commit-log file's private mapping, checked
// where they lie: what a consumer writes through that mapping reaches no field.
import { hex8, readHost } from '../commitlog/host-address.js'
import {
  bornHostLength,
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
import { SysFlag } from '../commitlog/sys-flag.js'
import { BufferView } from '../bytes.js'
import { Buffer } from 'node:buffer'

const TWO_POW_32 = 4294967296
/** The store host follows the born host and the 8-byte store timestamp. */
const STORE_HOST_AT = 8
/** After the store host: reconsumeTimes (4), preparedTransactionOffset (8), BODYLENGTH (4), then the body (not in the private copy). */
const BODY_AFTER_STORE_HOST = 16

/** The fields few consumers read, made together on first use. */
interface RareFields {
  bornHost: HostAddress
  storeHost: HostAddress
  msgId: string
}

function getLong(dv: DataView, at: number): number {
  return dv.getInt32(at) * TWO_POW_32 + dv.getUint32(at + 4)
}

function isAscii(bytes: Buffer, from: number, to: number): boolean {
  let high = 0
  for (let i = from; i < to; i++) high |= bytes[i]
  return high < 0x80
}

function text(bytes: Buffer, from: number, to: number): string {
  return bytes.toString(isAscii(bytes, from, to) ? 'latin1' : 'utf8', from, to)
}

/** The bytes of one read, shared by its messages. */
export class ReadBytes {
  /** bodies' ArrayBuffer and where bodies starts in it, taken once per read rather than per body view. */
  readonly bodiesArray: ArrayBuffer
  readonly bodiesOffset: number

  /**
   * @param records the records without their bodies, private to the store's messages (never handed out)
   * @param bodies the bodies, which messages hand out views of
   */
  constructor(
    readonly records: Buffer,
    readonly dv: DataView,
    readonly bodies: Buffer,
  ) {
    this.bodiesArray = bodies.buffer as ArrayBuffer
    this.bodiesOffset = bodies.byteOffset
  }
}

export class StoredMessage implements DecodedMessage {
  readonly #bytes: ReadBytes
  /** Where the record starts in bytes.records. */
  readonly #at: number
  /** Where the body starts in bytes.bodies, and its length. */
  readonly #bodyAt: number
  readonly #bodyLength: number
  #body: Buffer | undefined = undefined
  #topic: string | undefined = undefined
  #properties: Record<string, string> | undefined = undefined
  #keys: string[] | undefined = undefined
  #rare: RareFields | null = null

  /**
   * The record whose fields start at `at` of bytes.records (the fields after the body follow the
   * store host's, with no body between), and whose body is bytes.bodies[bodyAt, bodyAt +
   * bodyLength); checked whole where it was stored before it gets here.
   */
  constructor(bytes: ReadBytes, at: number, bodyAt: number, bodyLength: number) {
    this.#bytes = bytes
    this.#at = at
    this.#bodyAt = bodyAt
    this.#bodyLength = bodyLength
  }

  /** The body: a view of this read's own copy (made on first use). */
  get body(): Buffer {
    let body = this.#body
    if (body === undefined) {
      const bytes = this.#bytes
      const bodies = bytes.bodies
      const end = this.#bodyAt + this.#bodyLength
      // The only body of its read (a lookup) is the read's buffer itself. Otherwise a view of the
      // ArrayBuffer: the same view as subarray, made with fewer steps. Once the consumer
      // transferred the buffer away (bodies.length is 0): empty, as every view of it.
      if (this.#bodyAt === 0 && end === bodies.length) body = bodies
      else if (end <= bodies.length) body = new BufferView(bytes.bodiesArray, bytes.bodiesOffset + this.#bodyAt, this.#bodyLength)
      else body = Buffer.alloc(0)
      this.#body = body
    }
    return body
  }

  // Fixed-position fields: one DataView read each, when asked for.
  get queueId(): number {
    return this.#bytes.dv.getInt32(this.#at + OFFSET_QUEUEID)
  }

  get queueOffset(): number {
    return getLong(this.#bytes.dv, this.#at + OFFSET_QUEUEOFFSET)
  }

  get commitLogOffset(): number {
    return getLong(this.#bytes.dv, this.#at + OFFSET_PHYSICALOFFSET)
  }

  get storeSize(): number {
    return this.#bytes.dv.getInt32(this.#at + OFFSET_TOTALSIZE)
  }

  get sysFlag(): number {
    return this.#bytes.dv.getInt32(this.#at + OFFSET_SYSFLAG)
  }

  get bodyCRC(): number {
    return this.#bytes.dv.getInt32(this.#at + OFFSET_BODYCRC)
  }

  get flag(): number {
    return this.#bytes.dv.getInt32(this.#at + OFFSET_FLAG)
  }

  get bornTimestamp(): number {
    return getLong(this.#bytes.dv, this.#at + OFFSET_BORNTIMESTAMP)
  }

  // Fields after the born host move with its length (IPv4 or IPv6).
  get storeTimestamp(): number {
    return getLong(this.#bytes.dv, this.#at + storeTimestampOffset(this.sysFlag))
  }

  /** Where the fields after the store host begin: reconsumeTimes, then preparedTransactionOffset. */
  #afterStoreHost(): number {
    const sysFlag = this.sysFlag
    return this.#at + OFFSET_BORNHOST + bornHostLength(sysFlag) + STORE_HOST_AT + storeHostLength(sysFlag)
  }

  get reconsumeTimes(): number {
    return this.#bytes.dv.getInt32(this.#afterStoreHost())
  }

  get preparedTransactionOffset(): number {
    return getLong(this.#bytes.dv, this.#afterStoreHost() + 4)
  }

  /** Where the store host lies in bytes.records. */
  #storeHostAt(sysFlag: number): number {
    return this.#at + OFFSET_BORNHOST + bornHostLength(sysFlag) + STORE_HOST_AT
  }

  /** Where the topic's one-byte length lies in bytes.records: where the body was in the record. */
  #topicLengthAt(): number {
    const sysFlag = this.sysFlag
    return this.#storeHostAt(sysFlag) + storeHostLength(sysFlag) + BODY_AFTER_STORE_HOST
  }

  get topic(): string {
    if (this.#topic === undefined) {
      const lengthAt = this.#topicLengthAt()
      this.#topic = text(this.#bytes.records, lengthAt + 1, lengthAt + 1 + this.#bytes.dv.getInt8(lengthAt))
    }
    return this.#topic
  }

  get properties(): Record<string, string> {
    if (this.#properties === undefined) {
      const lengthAt = this.#topicLengthAt()
      const topicEnd = lengthAt + 1 + this.#bytes.dv.getInt8(lengthAt)
      const length = Math.max(0, this.#bytes.dv.getInt16(topicEnd))
      this.#properties = parsePropertiesString(text(this.#bytes.records, topicEnd + 2, topicEnd + 2 + length))
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
    return this.#rareFields().bornHost
  }

  get storeHost(): HostAddress {
    return this.#rareFields().storeHost
  }

  /** The offset message id (store host and physical offset), not the client's UNIQ_KEY. */
  get msgId(): string {
    return this.#rareFields().msgId
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

  // The rarely read fields, read from the same bytes as decodeMessage reads them.
  #rareFields(): RareFields {
    if (this.#rare === null) {
      const dv = this.#bytes.dv
      const sysFlag = this.sysFlag
      const storeAt = this.#storeHostAt(sysFlag)
      const storeEnd = storeAt + storeHostLength(sysFlag)
      // The store host field is address ‖ port, exactly the head of the msgId.
      let msgId = ''
      for (let at = storeAt; at < storeEnd; at += 4) msgId += hex8(dv.getInt32(at))
      msgId += hex8(dv.getInt32(this.#at + OFFSET_PHYSICALOFFSET)) + hex8(dv.getInt32(this.#at + OFFSET_PHYSICALOFFSET + 4))
      this.#rare = {
        bornHost: readHost(dv, this.#at + OFFSET_BORNHOST, (sysFlag & SysFlag.BORNHOST_V6) !== 0),
        storeHost: readHost(dv, storeAt, (sysFlag & SysFlag.STOREHOST_V6) !== 0),
        msgId,
      }
    }
    return this.#rare
  }
}
