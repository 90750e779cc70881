// The framed binary protocol between producers in other processes and the writer, over the store's
// UNIX domain socket. Every frame, in both directions (integers big-endian):
//
//   u32 length     bytes after this field (header + payload)
//   u8  version    PROTOCOL_VERSION; a peer speaking another one is refused
//   u8  type       HELLO (writer -> producer, once, first), PUT (producer -> writer),
//                  RESULTS (writer -> producer, the answer to one PUT)
//   u32 requestId  chosen by the producer for a PUT, echoed by its RESULTS (puts pipeline:
//                  answers may come back in any order); 0 in HELLO
//   payload
//
// HELLO:   u32 maxFrameBytes, u16 storeHost port, str storeHost address
// PUT:     u32 count, then `count` messages (below), nothing after them
// RESULTS: u32 count, then per message: u8 status (index in PUT_STATUSES), f64 wroteOffset,
//          u32 wroteBytes, f64 queueOffset, f64 storeTimestamp, u8 hasReason, [str reason]
//
// A message: u16 field bits, str topic, bytes body (the body's bytes, a string body as UTF-8),
// then the fields whose bit is set, in bit order: queueId u32, tags str, keys str, keys list
// (u32 n, n str), properties (u32 n, n name/value str pairs), flag f64, sysFlag f64,
// bornTimestamp f64, reconsumeTimes f64, preparedTransactionOffset f64, bornHost str.
// `str` and `bytes` are a u32 length and that many bytes (UTF-8 for str). Numbers travel as f64,
// exactly as given: the writer's checks see what the producer's caller passed.
import { Buffer } from 'node:buffer'
import type { PutMessageStatus } from '../commitlog/commit-log.js'
import { latin1Slice, utf8Slice, type HostAddress } from '../commitlog/record.js'
import type { Message } from '../types.js'

export const PROTOCOL_VERSION = 1
/** The u32 length field before every frame. */
export const LENGTH_BYTES = 4
/** version, type and requestId: what every frame holds after its length. */
export const HEADER_BYTES = 6
/** What a frame's length field may say at least: the header alone. */
export const MIN_FRAME_LENGTH = HEADER_BYTES

export const FrameType = { HELLO: 1, PUT: 2, RESULTS: 3 } as const
export type FrameTypeCode = (typeof FrameType)[keyof typeof FrameType]

/**
 * How many messages of maxMessageSize one PUT frame may carry: the writer's frame limit is this
 * many times maxMessageSize (plus PER_MESSAGE_SLACK each). A larger batch travels in several frames.
 */
export const MAX_MESSAGES_PER_FULL_FRAME = 16
/** Room per message for what its encoding holds besides the record's bytes (lengths, field bits). */
export const PER_MESSAGE_SLACK = 1024
/** A frame limit that stays allocatable whatever maxMessageSize says. */
const FRAME_BYTES_CAP = 512 * 1024 * 1024

/** The writer's limit on a frame's length field, from the store's maxMessageSize. */
export function maxFrameBytesFor(maxMessageSize: number): number {
  return Math.min(FRAME_BYTES_CAP, MAX_MESSAGES_PER_FULL_FRAME * (maxMessageSize + PER_MESSAGE_SLACK) + HEADER_BYTES + 4)
}

/** The statuses in their wire order: a RESULTS frame carries the index. Append only. */
export const PUT_STATUSES: readonly PutMessageStatus[] = [
  'PUT_OK',
  'FLUSH_DISK_TIMEOUT',
  'SERVICE_NOT_AVAILABLE',
  'CREATE_MAPEDFILE_FAILED',
  'MESSAGE_ILLEGAL',
  'PROPERTIES_SIZE_EXCEEDED',
  'OS_PAGECACHE_BUSY',
  'UNKNOWN_ERROR',
]
const STATUS_CODES = new Map(PUT_STATUSES.map((status, code) => [status, code]))

/** Bits of a message's optional fields, in the order they follow topic and body. */
const Field = {
  QUEUE_ID: 1 << 0,
  TAGS: 1 << 1,
  KEYS: 1 << 2,
  KEYS_LIST: 1 << 3,
  PROPERTIES: 1 << 4,
  FLAG: 1 << 5,
  SYS_FLAG: 1 << 6,
  BORN_TIMESTAMP: 1 << 7,
  RECONSUME_TIMES: 1 << 8,
  PREPARED_TRANSACTION_OFFSET: 1 << 9,
  BORN_HOST: 1 << 10,
} as const
const KNOWN_FIELDS = (1 << 11) - 1
const NUMBER_BITS = Field.FLAG | Field.SYS_FLAG | Field.BORN_TIMESTAMP | Field.RECONSUME_TIMES | Field.PREPARED_TRANSACTION_OFFSET

/** Strings up to this many characters take the ASCII fast paths of the encoder and decoder. */
const SHORT_TEXT = 256

/** A frame the peer sent that breaks the protocol: the connection closes with this reason. */
export class FrameError extends Error {
  override readonly name = 'FrameError'
}

/** One frame as read off the socket. `payload` is a view of the frame's own buffer. */
export interface Frame {
  readonly type: number
  readonly requestId: number
  readonly payload: Buffer
}

export interface Hello {
  readonly maxFrameBytes: number
  readonly storeHost: HostAddress
}

/** One message's answer as RESULTS carries it. */
export interface WireResult {
  readonly status: PutMessageStatus
  readonly wroteOffset: number
  readonly wroteBytes: number
  readonly queueOffset: number
  readonly storeTimestamp: number
  readonly reason: string | undefined
}

// ---- reading frames off a stream -------------------------------------------------------------

/**
 * Cuts a byte stream into frames. A length below the header or above `maxFrameBytes` is refused as
 * soon as the length field is in, before any of the frame is buffered.
 */
export class FrameReader {
  private chunks: Buffer[] = []
  private buffered = 0

  constructor(private readonly maxFrameBytes: number) {}

  /** Bytes received that do not yet make a whole frame (a connection ending here cut a frame short). */
  get pendingBytes(): number {
    return this.buffered
  }

  /** Takes a chunk and returns the frames it completed; throws a FrameError for a bad one. */
  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk)
    this.buffered += chunk.length
    const frames: Frame[] = []
    while (this.buffered >= LENGTH_BYTES) {
      const head = this.peek(LENGTH_BYTES + HEADER_BYTES)
      const length = head.readUInt32BE(0)
      if (length < MIN_FRAME_LENGTH) throw new FrameError(`a frame of ${length} bytes is shorter than its ${HEADER_BYTES}-byte header`)
      if (length > this.maxFrameBytes) throw new FrameError(`a frame of ${length} bytes is over the limit of ${this.maxFrameBytes}`)
      if (head.length >= LENGTH_BYTES + 1 && head[LENGTH_BYTES] !== PROTOCOL_VERSION) {
        throw new FrameError(`protocol version ${head[LENGTH_BYTES]}, this store speaks ${PROTOCOL_VERSION}`)
      }
      if (this.buffered < LENGTH_BYTES + length) break
      const frame = this.take(LENGTH_BYTES + length)
      frames.push({ type: frame[5], requestId: frame.readUInt32BE(6), payload: frame.subarray(LENGTH_BYTES + HEADER_BYTES) })
    }
    return frames
  }

  /** Up to `n` bytes from the front, without consuming them. */
  private peek(n: number): Buffer {
    if (this.chunks[0].length >= n || this.chunks.length === 1) return this.chunks[0].subarray(0, n)
    this.chunks = [Buffer.concat(this.chunks)]
    return this.chunks[0].subarray(0, n)
  }

  /** Exactly `n` bytes from the front (one copy at most, when they span chunks). */
  private take(n: number): Buffer {
    let all = this.chunks[0]
    if (all.length < n) all = Buffer.concat(this.chunks)
    const rest = all.subarray(n)
    this.chunks = rest.length === 0 ? [] : [rest]
    this.buffered -= n
    return all.subarray(0, n)
  }
}

// ---- writing -----------------------------------------------------------------------------------

/** A growing frame: the header first, the length patched in at the end. */
class FrameWriter {
  private buffer: Buffer
  private at = LENGTH_BYTES + HEADER_BYTES

  constructor(type: FrameTypeCode, requestId: number, sizeHint: number) {
    this.buffer = Buffer.allocUnsafe(Math.max(64, LENGTH_BYTES + HEADER_BYTES + sizeHint))
    this.buffer[LENGTH_BYTES] = PROTOCOL_VERSION
    this.buffer[LENGTH_BYTES + 1] = type
    this.buffer.writeUInt32BE(requestId >>> 0, LENGTH_BYTES + 2)
  }

  private room(n: number): void {
    if (this.at + n <= this.buffer.length) return
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.at + n))
    this.buffer.copy(grown, 0, 0, this.at)
    this.buffer = grown
  }

  u8(value: number): void {
    this.room(1)
    this.buffer[this.at++] = value
  }

  u16(value: number): void {
    this.room(2)
    this.at = this.buffer.writeUInt16BE(value, this.at)
  }

  u32(value: number): void {
    this.room(4)
    this.at = this.buffer.writeUInt32BE(value, this.at)
  }

  f64(value: number): void {
    this.room(8)
    this.at = this.buffer.writeDoubleBE(value, this.at)
  }

  str(value: string): void {
    const length = value.length
    // Short ASCII text (topics, keys, tags) byte by byte: cheaper than a UTF-8 encoder call.
    if (length <= SHORT_TEXT) {
      this.room(4 + length)
      const buffer = this.buffer
      const start = this.at + 4
      let i = 0
      for (; i < length; i++) {
        const c = value.charCodeAt(i)
        if (c >= 0x80) break
        buffer[start + i] = c
      }
      if (i === length) {
        buffer.writeUInt32BE(length, this.at)
        this.at = start + length
        return
      }
    }
    const n = Buffer.byteLength(value, 'utf8')
    this.u32(n)
    this.room(n)
    this.at += this.buffer.write(value, this.at, 'utf8')
  }

  bytes(value: Uint8Array): void {
    this.u32(value.length)
    this.room(value.length)
    this.buffer.set(value, this.at)
    this.at += value.length
  }

  finish(): Buffer {
    this.buffer.writeUInt32BE(this.at - LENGTH_BYTES, 0)
    return this.buffer.subarray(0, this.at)
  }
}

export function encodeHello(hello: Hello): Buffer {
  const out = new FrameWriter(FrameType.HELLO, 0, 64)
  out.u32(hello.maxFrameBytes)
  out.u16(hello.storeHost.port)
  out.str(hello.storeHost.address)
  return out.finish()
}

/**
 * The bytes a message takes in a PUT frame. Throws a TypeError for a field whose type cannot
 * travel (the writer's own checks would throw the same kind of error in-process).
 */
export function encodedMessageBytes(message: Message): number {
  let n = 2 + 4 + Buffer.byteLength(message.topic, 'utf8') + 4
  n += typeof message.body === 'string' ? Buffer.byteLength(message.body, 'utf8') : message.body.length
  if (message.queueId !== undefined) n += 4
  if (message.tags !== undefined) n += 4 + Buffer.byteLength(message.tags, 'utf8')
  const keys: unknown = message.keys
  if (typeof keys === 'string') n += 4 + Buffer.byteLength(keys, 'utf8')
  else if (Array.isArray(keys)) for (const key of keys as string[]) n += 4 + Buffer.byteLength(key, 'utf8')
  if (Array.isArray(keys)) n += 4
  if (message.properties !== undefined) {
    if (message.properties === null || typeof message.properties !== 'object') throw new TypeError('message.properties must be an object')
    n += 4
    for (const [name, value] of Object.entries(message.properties)) {
      if (value === undefined || value === null) continue
      if (typeof value !== 'string') throw new TypeError(`property ${JSON.stringify(name)}: value must be a string, got ${typeof value}`)
      n += 8 + Buffer.byteLength(name, 'utf8') + Buffer.byteLength(value, 'utf8')
    }
  }
  n += numberField(message.flag, 'flag') + numberField(message.sysFlag, 'sysFlag') + numberField(message.bornTimestamp, 'bornTimestamp')
  n += numberField(message.reconsumeTimes, 'reconsumeTimes') + numberField(message.preparedTransactionOffset, 'preparedTransactionOffset')
  if (message.bornHost !== undefined) {
    if (typeof message.bornHost !== 'string') throw new TypeError('message.bornHost must be a string "ip:port"')
    n += 4 + Buffer.byteLength(message.bornHost, 'utf8')
  }
  return n
}

/** The bytes an optional number field takes: 8 when present (an f64); a TypeError when not a number. */
function numberField(value: unknown, name: string): number {
  if (value === undefined) return 0
  if (typeof value !== 'number') throw new TypeError(`message.${name} must be a number`)
  return 8
}

/** A PUT frame of messages[from, to), whose encoded sizes the caller measured (`bytes`). */
export function encodePut(requestId: number, messages: readonly Message[], from: number, to: number, bytes: number): Buffer {
  const out = new FrameWriter(FrameType.PUT, requestId, bytes + 4)
  out.u32(to - from)
  for (let i = from; i < to; i++) writeMessage(out, messages[i])
  return out.finish()
}

function writeMessage(out: FrameWriter, message: Message): void {
  const keys: unknown = message.keys
  let bits = 0
  if (message.queueId !== undefined) bits |= Field.QUEUE_ID
  if (message.tags !== undefined) bits |= Field.TAGS
  if (typeof keys === 'string') bits |= Field.KEYS
  else if (Array.isArray(keys)) bits |= Field.KEYS_LIST
  if (message.properties !== undefined) bits |= Field.PROPERTIES
  if (message.flag !== undefined) bits |= Field.FLAG
  if (message.sysFlag !== undefined) bits |= Field.SYS_FLAG
  if (message.bornTimestamp !== undefined) bits |= Field.BORN_TIMESTAMP
  if (message.reconsumeTimes !== undefined) bits |= Field.RECONSUME_TIMES
  if (message.preparedTransactionOffset !== undefined) bits |= Field.PREPARED_TRANSACTION_OFFSET
  if (message.bornHost !== undefined) bits |= Field.BORN_HOST
  out.u16(bits)
  out.str(message.topic)
  if (typeof message.body === 'string') out.str(message.body)
  else out.bytes(message.body)
  if (message.queueId !== undefined) out.u32(message.queueId)
  if (message.tags !== undefined) out.str(message.tags)
  if (typeof keys === 'string') out.str(keys)
  else if (Array.isArray(keys)) {
    out.u32(keys.length)
    for (const key of keys as string[]) out.str(key)
  }
  if (message.properties !== undefined) {
    const entries = Object.entries(message.properties).filter(([, value]) => value !== undefined && value !== null)
    out.u32(entries.length)
    for (const [name, value] of entries) {
      out.str(name)
      out.str(value)
    }
  }
  if ((bits & NUMBER_BITS) !== 0) {
    if (message.flag !== undefined) out.f64(message.flag)
    if (message.sysFlag !== undefined) out.f64(message.sysFlag)
    if (message.bornTimestamp !== undefined) out.f64(message.bornTimestamp)
    if (message.reconsumeTimes !== undefined) out.f64(message.reconsumeTimes)
    if (message.preparedTransactionOffset !== undefined) out.f64(message.preparedTransactionOffset)
  }
  if (message.bornHost !== undefined) out.str(message.bornHost)
}

export function encodeResults(requestId: number, results: readonly WireResult[]): Buffer {
  const out = new FrameWriter(FrameType.RESULTS, requestId, 4 + results.length * 40)
  out.u32(results.length)
  for (const result of results) {
    out.u8(STATUS_CODES.get(result.status) ?? STATUS_CODES.get('UNKNOWN_ERROR') ?? 0)
    out.f64(result.wroteOffset)
    out.u32(result.wroteBytes)
    out.f64(result.queueOffset)
    out.f64(result.storeTimestamp)
    out.u8(result.reason === undefined ? 0 : 1)
    if (result.reason !== undefined) out.str(result.reason)
  }
  return out.finish()
}

// ---- decoding payloads -----------------------------------------------------------------------

/** Reads a payload; every read checks that the bytes are there (a FrameError if not). */
class PayloadReader {
  private at = 0
  /** The message being read, named in errors (-1: none); `what` stays a constant per call site. */
  message = -1

  constructor(private readonly payload: Buffer) {}

  private need(n: number, what: string): void {
    if (this.at + n > this.payload.length) {
      throw new FrameError(`${this.name(what)} runs past the end of the frame (${this.payload.length - this.at} bytes left, ${n} needed)`)
    }
  }

  /** `what`, of the message being read when there is one. */
  name(what: string): string {
    return this.message < 0 ? what : `message ${this.message} ${what}`
  }

  u8(what: string): number {
    this.need(1, what)
    return this.payload[this.at++]
  }

  u16(what: string): number {
    this.need(2, what)
    const value = this.payload.readUInt16BE(this.at)
    this.at += 2
    return value
  }

  u32(what: string): number {
    this.need(4, what)
    const value = this.payload.readUInt32BE(this.at)
    this.at += 4
    return value
  }

  f64(what: string): number {
    this.need(8, what)
    const value = this.payload.readDoubleBE(this.at)
    this.at += 8
    return value
  }

  bytes(what: string): Buffer {
    const n = this.u32(what)
    this.need(n, what)
    const value = this.payload.subarray(this.at, this.at + n)
    this.at += n
    return value
  }

  str(what: string): string {
    const n = this.u32(what)
    this.need(n, what)
    const start = this.at
    const end = start + n
    this.at = end
    const payload = this.payload
    // latin1 is exact for ASCII and cheaper than UTF-8 decoding.
    let bits = 0
    if (n <= SHORT_TEXT) for (let i = start; i < end; i++) bits |= payload[i]
    return n <= SHORT_TEXT && bits < 0x80 ? latin1Slice.call(payload, start, end) : utf8Slice.call(payload, start, end)
  }

  /** A count of items that take at least `minBytes` each: one the payload cannot hold is refused. */
  count(what: string, minBytes: number): number {
    const n = this.u32(what)
    if (n * minBytes > this.payload.length - this.at) throw new FrameError(`${this.name(what)} ${n} cannot fit in the frame`)
    return n
  }

  end(what: string): void {
    if (this.at !== this.payload.length) throw new FrameError(`${this.payload.length - this.at} bytes follow the ${what}`)
  }
}

export function decodeHello(payload: Buffer): Hello {
  const reader = new PayloadReader(payload)
  const maxFrameBytes = reader.u32('maxFrameBytes')
  const port = reader.u16('storeHost port')
  const address = reader.str('storeHost address')
  reader.end('hello')
  return { maxFrameBytes, storeHost: { address, port } }
}

/** The messages of a PUT frame. Their bodies are views of the frame's buffer (no copy). */
export function decodePut(payload: Buffer): Message[] {
  const reader = new PayloadReader(payload)
  const count = reader.count('message count', 10)
  const messages: Message[] = new Array(count)
  for (let i = 0; i < count; i++) messages[i] = readMessage(reader, i)
  reader.message = -1
  reader.end('messages')
  return messages
}

function readMessage(reader: PayloadReader, i: number): Message {
  reader.message = i
  const bits = reader.u16('fields')
  if ((bits & ~KNOWN_FIELDS) !== 0) throw new FrameError(`message ${i} has unknown field bits 0x${bits.toString(16)}`)
  if ((bits & Field.KEYS) !== 0 && (bits & Field.KEYS_LIST) !== 0) throw new FrameError(`message ${i} has keys twice`)
  const message: Message = { topic: reader.str('topic'), body: reader.bytes('body') }
  if ((bits & Field.QUEUE_ID) !== 0) {
    message.queueId = reader.u32('queueId')
    if (message.queueId > 0x7fffffff) throw new FrameError(`message ${i} has queueId ${message.queueId}, over 2^31-1`)
  }
  if ((bits & Field.TAGS) !== 0) message.tags = reader.str('tags')
  if ((bits & Field.KEYS) !== 0) message.keys = reader.str('keys')
  if ((bits & Field.KEYS_LIST) !== 0) {
    const n = reader.count('key count', 4)
    const keys: string[] = new Array(n)
    for (let k = 0; k < n; k++) keys[k] = reader.str('key')
    message.keys = keys
  }
  if ((bits & Field.PROPERTIES) !== 0) {
    const n = reader.count('property count', 8)
    // No prototype: a property named __proto__ stays a property.
    const properties: Record<string, string> = Object.create(null)
    for (let p = 0; p < n; p++) {
      const name = reader.str('property name')
      properties[name] = reader.str('property value')
    }
    message.properties = properties
  }
  if ((bits & Field.FLAG) !== 0) message.flag = reader.f64('flag')
  if ((bits & Field.SYS_FLAG) !== 0) message.sysFlag = reader.f64('sysFlag')
  if ((bits & Field.BORN_TIMESTAMP) !== 0) message.bornTimestamp = reader.f64('bornTimestamp')
  if ((bits & Field.RECONSUME_TIMES) !== 0) message.reconsumeTimes = reader.f64('reconsumeTimes')
  if ((bits & Field.PREPARED_TRANSACTION_OFFSET) !== 0) message.preparedTransactionOffset = reader.f64('preparedTransactionOffset')
  if ((bits & Field.BORN_HOST) !== 0) message.bornHost = reader.str('bornHost')
  return message
}

export function decodeResults(payload: Buffer): WireResult[] {
  const reader = new PayloadReader(payload)
  const count = reader.count('result count', 30)
  const results: WireResult[] = new Array(count)
  for (let i = 0; i < count; i++) {
    const code = reader.u8('status')
    const status = PUT_STATUSES[code]
    if (status === undefined) throw new FrameError(`unknown put status ${code}`)
    const wroteOffset = reader.f64('wroteOffset')
    const wroteBytes = reader.u32('wroteBytes')
    const queueOffset = reader.f64('queueOffset')
    const storeTimestamp = reader.f64('storeTimestamp')
    const reason = reader.u8('reason flag') === 0 ? undefined : reader.str('reason')
    results[i] = { status, wroteOffset, wroteBytes, queueOffset, storeTimestamp, reason }
  }
  reader.end('results')
  return results
}
