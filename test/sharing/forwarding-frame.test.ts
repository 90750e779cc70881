// The framed protocol of shared writes (lib/store/sharing/frame.ts): every field survives a round
// trip, frames split at any byte come out whole, and every way a frame can be wrong is a FrameError
// naming what is wrong, never a crash or a half-decoded message.
import { describe, expect, it } from 'vitest'

import {
  FrameError,
  FrameReader,
  FrameType,
  HEADER_BYTES,
  LENGTH_BYTES,
  MAX_MESSAGES_PER_FULL_FRAME,
  PROTOCOL_VERSION,
  PUT_STATUSES,
  decodeHello,
  decodePut,
  decodeResults,
  encodeHello,
  encodePut,
  encodeResults,
  encodedMessageBytes,
  maxFrameBytesFor,
  type WireResult,
} from '../../lib/store/sharing/frame.js'
import type { Message } from '../../lib/store/types.js'

const LIMIT = 1 << 20

function putFrame(messages: Message[], requestId = 7): Buffer {
  const bytes = messages.reduce((sum, m) => sum + encodedMessageBytes(m), 0)
  return encodePut(requestId, messages, 0, messages.length, bytes)
}

function only(frames: ReturnType<FrameReader['push']>) {
  expect(frames).toHaveLength(1)
  return frames[0]
}

/** A frame of `type` around `payload`, with the length field it should have. */
function rawFrame(type: number, payload: Buffer, version = PROTOCOL_VERSION, requestId = 1): Buffer {
  const head = Buffer.alloc(LENGTH_BYTES + HEADER_BYTES)
  head.writeUInt32BE(HEADER_BYTES + payload.length, 0)
  head[4] = version
  head[5] = type
  head.writeUInt32BE(requestId, 6)
  return Buffer.concat([head, payload])
}

describe('PUT frames', () => {
  it('carry every field of a message as given, bodies as bytes', () => {
    const messages: Message[] = [
      {
        topic: 'orders',
        queueId: 3,
        body: Buffer.from([0, 1, 2, 255]),
        tags: 'created',
        keys: ['k1', 'k 2', 'ключ'],
        // An own property named __proto__ (as JSON.parse makes one) stays a property.
        properties: JSON.parse('{"region":"eu","empty":"","__proto__":"kept"}'),
        flag: 5,
        sysFlag: 0,
        bornTimestamp: 1_700_000_000_123,
        reconsumeTimes: 2,
        preparedTransactionOffset: 2 ** 40,
        bornHost: '10.0.0.1:8080',
      },
      { topic: 'plain', body: 'text body ü' },
      { topic: 'keys', body: '', keys: 'one two', flag: 1.5 },
      // Longer than the ASCII fast paths take, ASCII and not.
      { topic: 'long', body: 'b', tags: 't'.repeat(300), keys: ['é'.repeat(300)] },
    ]
    const frame = only(new FrameReader(LIMIT).push(putFrame(messages, 42)))
    expect(frame.type).toBe(FrameType.PUT)
    expect(frame.requestId).toBe(42)
    const decoded = decodePut(frame.payload)
    expect(decoded).toHaveLength(4)
    const [first, second, third, fourth] = decoded
    expect(fourth.tags).toBe('t'.repeat(300))
    expect(fourth.keys).toEqual(['é'.repeat(300)])
    expect(Buffer.from(first.body as Uint8Array)).toEqual(Buffer.from([0, 1, 2, 255]))
    expect({ ...first, body: undefined, properties: { ...first.properties } }).toEqual({
      ...messages[0],
      body: undefined,
      properties: JSON.parse('{"region":"eu","empty":"","__proto__":"kept"}'),
    })
    expect(Buffer.from(second.body as Uint8Array).toString('utf8')).toBe('text body ü')
    expect(second).not.toHaveProperty('queueId')
    expect(second).not.toHaveProperty('tags')
    expect(third.keys).toBe('one two')
    expect(third.flag).toBe(1.5)
  })

  it('measure exactly what they hold', () => {
    const message: Message = {
      topic: 'tö',
      body: 'abc',
      keys: ['x'],
      properties: { a: 'b', gone: undefined } as unknown as Record<string, string>,
    }
    const frame = putFrame([message])
    expect(frame.length).toBe(LENGTH_BYTES + HEADER_BYTES + 4 + encodedMessageBytes(message))
  })

  it('refuse to measure fields whose type cannot travel', () => {
    expect(() => encodedMessageBytes({ topic: 't', body: 'b', flag: '1' as unknown as number })).toThrow(TypeError)
    expect(() => encodedMessageBytes({ topic: 't', body: 'b', properties: { a: 1 as unknown as string } })).toThrow(/must be a string/)
    expect(() => encodedMessageBytes({ topic: 't', body: 'b', properties: 'x' as unknown as Record<string, string> })).toThrow(TypeError)
    expect(() => encodedMessageBytes({ topic: 't', body: 'b', bornHost: 5 as unknown as string })).toThrow(TypeError)
  })

  it('are refused when a field runs past the end, bytes trail, or bits are unknown', () => {
    const good = putFrame([{ topic: 't', body: 'body', tags: 'a' }])
    const payload = good.subarray(LENGTH_BYTES + HEADER_BYTES)
    expect(() => decodePut(payload.subarray(0, payload.length - 1))).toThrow(/message 0 tags runs past the end/)
    expect(() => decodePut(Buffer.concat([payload, Buffer.from([0])]))).toThrow(/follow the messages/)
    const unknownBits = Buffer.from(payload)
    unknownBits.writeUInt16BE(0x8000, 4)
    expect(() => decodePut(unknownBits)).toThrow(/unknown field bits/)
    const bothKeys = Buffer.from(payload)
    bothKeys.writeUInt16BE(0b1100, 4)
    expect(() => decodePut(bothKeys)).toThrow(/keys twice/)
    const hugeCount = Buffer.from(payload)
    hugeCount.writeUInt32BE(0xffffffff, 0)
    expect(() => decodePut(hugeCount)).toThrow(/cannot fit/)
    const badQueue = putFrame([{ topic: 't', body: 'b', queueId: 1 }]).subarray(LENGTH_BYTES + HEADER_BYTES)
    badQueue.writeUInt32BE(0x80000000, badQueue.length - 4)
    expect(() => decodePut(badQueue)).toThrow(/over 2\^31-1/)
  })
})

describe('HELLO and RESULTS frames', () => {
  it('carry the writer limit, its host and each result', () => {
    const hello = only(new FrameReader(LIMIT).push(encodeHello({ maxFrameBytes: 123_456, storeHost: { address: '::1', port: 10911 } })))
    expect(hello.type).toBe(FrameType.HELLO)
    expect(decodeHello(hello.payload)).toEqual({ maxFrameBytes: 123_456, storeHost: { address: '::1', port: 10911 } })
    const results: WireResult[] = PUT_STATUSES.map((status, i) => ({
      status,
      wroteOffset: i * 1000,
      wroteBytes: i,
      queueOffset: 2 ** 45 + i,
      storeTimestamp: 1_700_000_000_000 + i,
      reason: i % 2 === 0 ? undefined : `why ${i}`,
    }))
    const frame = only(new FrameReader(LIMIT).push(encodeResults(9, results)))
    expect(frame.requestId).toBe(9)
    expect(decodeResults(frame.payload)).toEqual(results)
  })

  it('refuse an unknown status or trailing bytes', () => {
    const payload = encodeResults(1, [
      { status: 'PUT_OK', wroteOffset: 0, wroteBytes: 1, queueOffset: 0, storeTimestamp: 1, reason: undefined },
    ]).subarray(LENGTH_BYTES + HEADER_BYTES)
    const badStatus = Buffer.from(payload)
    badStatus[4] = 200
    expect(() => decodeResults(badStatus)).toThrow(/unknown put status/)
    expect(() => decodeResults(Buffer.concat([payload, Buffer.alloc(1)]))).toThrow(FrameError)
    expect(() => decodeHello(Buffer.alloc(3))).toThrow(FrameError)
  })
})

describe('FrameReader', () => {
  it('gives whole frames whatever the chunks, and keeps a cut frame pending', () => {
    const stream = Buffer.concat([putFrame([{ topic: 'a', body: 'x' }], 1), putFrame([{ topic: 'b', body: 'yy' }], 2), putFrame([], 3)])
    for (const step of [1, 3, 7, stream.length]) {
      const reader = new FrameReader(LIMIT)
      const ids: number[] = []
      for (let at = 0; at < stream.length; at += step)
        for (const frame of reader.push(stream.subarray(at, at + step))) ids.push(frame.requestId)
      expect(ids).toEqual([1, 2, 3])
      expect(reader.pendingBytes).toBe(0)
    }
    const reader = new FrameReader(LIMIT)
    expect(reader.push(stream.subarray(0, 9))).toEqual([])
    expect(reader.pendingBytes).toBe(9)
  })

  it('refuses a short, an oversized or a foreign-version frame as soon as its header is in', () => {
    const short = Buffer.alloc(4)
    short.writeUInt32BE(2)
    expect(() => new FrameReader(LIMIT).push(short)).toThrow(/shorter than its 6-byte header/)
    const big = Buffer.alloc(4)
    big.writeUInt32BE(LIMIT + 1)
    expect(() => new FrameReader(LIMIT).push(big)).toThrow(/over the limit/)
    expect(() => new FrameReader(LIMIT).push(rawFrame(FrameType.PUT, Buffer.alloc(4), 9))).toThrow(/protocol version 9/)
  })

  it('sizes the writer limit from maxMessageSize', () => {
    expect(maxFrameBytesFor(1024)).toBeGreaterThanOrEqual(MAX_MESSAGES_PER_FULL_FRAME * 1024)
    expect(maxFrameBytesFor(2 ** 40)).toBe(512 * 1024 * 1024)
  })
})
