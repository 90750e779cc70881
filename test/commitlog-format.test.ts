import { crc32 } from 'node:zlib'
import { spawnSync } from 'node:child_process'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

import {
  BLANK_MAGIC_CODE,
  DEFAULT_MESSAGE_DELAY_LEVEL,
  END_FILE_MIN_BLANK_LENGTH,
  MAX_PROPERTIES_LENGTH,
  MAX_TOPIC_LENGTH,
  MESSAGE_MAGIC_CODE,
  MIN_RECORD_LENGTH,
  OFFSET_BODYCRC,
  OFFSET_BORNHOST,
  OFFSET_BORNTIMESTAMP,
  OFFSET_FLAG,
  OFFSET_MAGIC,
  OFFSET_PHYSICALOFFSET,
  OFFSET_QUEUEID,
  OFFSET_QUEUEOFFSET,
  OFFSET_SYSFLAG,
  OFFSET_TOTALSIZE,
  PropertyName,
  SCHEDULE_TOPIC,
  SysFlag,
  checkRecord,
  createMsgId,
  decodeBatchBlob,
  decodeMessage,
  encodeProperties,
  isPrepareFailure,
  javaStringHashCode,
  joinBatchProperties,
  parseDelayLevels,
  parseMsgId,
  parsePropertiesString,
  prepareRecord,
  recordLength,
  storeTimestampOffset,
  tagsCodeOf,
  tagsMatch,
  validateTopic,
  writeBlank,
  writeRecord,
  type PrepareFailure,
  type PreparedRecord,
  type RecordInput,
} from '../lib/store/commitlog/record.js'

const MAX = 4 * 1024 * 1024

function input(over: Partial<RecordInput> = {}): RecordInput {
  return {
    topic: 'TopicTest',
    queueId: 2,
    body: Buffer.from('Hello'),
    flag: 7,
    sysFlag: 0,
    bornTimestamp: 1_700_000_000_123,
    bornHost: { address: '192.168.0.2', port: 51234 },
    storeHost: { address: '127.0.0.1', port: 10911 },
    reconsumeTimes: 3,
    preparedTransactionOffset: 0,
    propertiesString: encodeProperties({ TAGS: 'TagA' }),
    ...over,
  }
}

function prepared(over: Partial<RecordInput> = {}, max = MAX): PreparedRecord {
  const r = prepareRecord(input(over), max)
  if (isPrepareFailure(r)) throw new Error(`unexpected failure: ${r.reason}`)
  return r
}

function failure(over: Partial<RecordInput>, max = MAX): PrepareFailure {
  const r = prepareRecord(input(over), max)
  if (!isPrepareFailure(r)) throw new Error('expected a failure')
  return r
}

interface Written {
  buf: Buffer
  rec: PreparedRecord
  pos: number
}

/** Writes one record at `pos` of a fresh buffer with `slack` spare bytes after it. */
function written(
  over: Partial<RecordInput> = {},
  at: { pos?: number; queueOffset?: number; physicalOffset?: number; storeTimestamp?: number; slack?: number } = {},
): Written {
  const rec = prepared(over)
  const pos = at.pos ?? 0
  const buf = Buffer.alloc(pos + rec.length + (at.slack ?? 0))
  writeRecord(buf, pos, rec, at.queueOffset ?? 42, at.physicalOffset ?? 1_073_741_824 + pos, at.storeTimestamp ?? 1_700_000_000_456)
  return { buf, rec, pos }
}

describe('constants', () => {
  it('magic codes are the int32 forms of the RocketMQ constants', () => {
    expect(MESSAGE_MAGIC_CODE).toBe(0xdaa320a7 | 0)
    expect(BLANK_MAGIC_CODE).toBe(0xcbd43194 | 0)
    expect(END_FILE_MIN_BLANK_LENGTH).toBe(8)
    expect(MIN_RECORD_LENGTH).toBe(91)
  })

  it('store timestamp follows the born host', () => {
    expect(storeTimestampOffset(0)).toBe(56)
    expect(storeTimestampOffset(SysFlag.STOREHOST_V6)).toBe(56)
    expect(storeTimestampOffset(SysFlag.BORNHOST_V6)).toBe(68)
  })

  it('recordLength is 91 + L + T + P, +12 per IPv6 host, negative lengths count as 0', () => {
    expect(recordLength(0, 5, 9, 9)).toBe(114)
    expect(recordLength(SysFlag.BORNHOST_V6, 5, 9, 9)).toBe(126)
    expect(recordLength(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6, 5, 9, 9)).toBe(138)
    expect(recordLength(0, -3, 1, -1)).toBe(92)
  })
})

describe('javaStringHashCode and tagsCodeOf', () => {
  it('matches Java String.hashCode', () => {
    expect(javaStringHashCode('')).toBe(0)
    expect(javaStringHashCode('a')).toBe(97)
    expect(javaStringHashCode('hello')).toBe(99162322)
    expect(javaStringHashCode('TagA')).toBe(2598919)
    expect(javaStringHashCode('polygenelubricants')).toBe(-2147483648)
    expect(javaStringHashCode('Aa')).toBe(javaStringHashCode('BB'))
    // UTF-16 code units: a surrogate pair counts as two
    expect(javaStringHashCode('\u{1F600}')).toBe(31 * 0xd83d + 0xde00)
  })

  it('tagsCodeOf is 0 when tags are absent or empty', () => {
    expect(tagsCodeOf(undefined)).toBe(0)
    expect(tagsCodeOf('')).toBe(0)
    expect(tagsCodeOf('TagA')).toBe(2598919)
  })
})

describe('properties', () => {
  it('encodes the 4.9.1+ form and skips undefined and empty values', () => {
    expect(encodeProperties({})).toBe('')
    expect(encodeProperties({ A: '1', B: undefined, C: '', D: 'x y' })).toBe('A\u00011\u0002D\u0001x y')
  })

  it('rejects separators and empty names with a RangeError naming the property', () => {
    expect(() => encodeProperties({ KEYS: 'a\u0001b' })).toThrow(RangeError)
    expect(() => encodeProperties({ KEYS: 'a\u0002b' })).toThrow(/KEYS/)
    expect(() => encodeProperties({ 'bad\u0001name': 'v' })).toThrow(/bad/)
    expect(() => encodeProperties({ 'bad\u0002name': 'v' })).toThrow(RangeError)
    expect(() => encodeProperties({ '': 'v' })).toThrow(RangeError)
  })

  it('parses both the 4.8 / 4.9.0 form and the 4.9.1+ form', () => {
    const expected = { KEYS: 'k1 k2', TAGS: 'TagA', UNIQ_KEY: 'ABC' }
    expect(parsePropertiesString('KEYS\u0001k1 k2\u0002TAGS\u0001TagA\u0002UNIQ_KEY\u0001ABC\u0002')).toEqual(expected)
    expect(parsePropertiesString('KEYS\u0001k1 k2\u0002TAGS\u0001TagA\u0002UNIQ_KEY\u0001ABC')).toEqual(expected)
    expect(parsePropertiesString('')).toEqual({})
  })

  it('follows RocketMQ parsing of odd pairs', () => {
    const p = parsePropertiesString('\u0001v\u0002k\u0001\u0002noSep\u0002a\u0001b\u0001c\u0002x\u00011\u0002x\u00012\u0002\u0002')
    expect(p).toEqual({ a: 'b\u0001c', x: '2' })
  })

  it('round-trips unicode names and values, and is safe for any name', () => {
    const props = { KEYS: 'clé 键', názov: '値\u{1F600}', __proto__x: 'p', constructor: 'c' }
    const parsed = parsePropertiesString(encodeProperties(props))
    expect(parsed).toEqual(props)
    const proto = parsePropertiesString('__proto__\u0001polluted')
    expect(proto['__proto__']).toBe('polluted')
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined()
    expect(parsePropertiesString('a\u00011')['toString']).toBeUndefined()
  })

  it('joins batch properties as RocketMQ does', () => {
    expect(joinBatchProperties('', 'B\u00012')).toBe('B\u00012')
    expect(joinBatchProperties('A\u00011', '')).toBe('A\u00011')
    expect(joinBatchProperties('A\u00011', 'B\u00012')).toBe('A\u00011\u0002B\u00012')
    expect(joinBatchProperties('A\u00011\u0002', 'B\u00012')).toBe('A\u00011\u0002B\u00012')
  })
})

describe('validateTopic', () => {
  it('rejects empty, path-like, too long and non-ASCII topics', () => {
    for (const t of ['', '../x', 'a/b', '.', '..', 'a.b', 'a b', 'x'.repeat(128), 'tópico', '主题', 'a\u0000b']) {
      expect(validateTopic(t), JSON.stringify(t)).toBeTypeOf('string')
    }
  })

  it('accepts RocketMQ topic characters up to 127 characters', () => {
    for (const t of ['x'.repeat(MAX_TOPIC_LENGTH), '%RETRY%g', '%DLQ%group', 'a|b', 'Topic_1-2', SCHEDULE_TOPIC]) {
      expect(validateTopic(t), t).toBeNull()
    }
  })
})

describe('message ids', () => {
  it('is upper-case hex of store address, port and offset (32 characters for IPv4)', () => {
    const id = createMsgId({ address: '127.0.0.1', port: 10911 }, 0)
    expect(id).toBe('7F00000100002A9F0000000000000000')
    const big = createMsgId({ address: '10.1.2.254', port: 65535 }, 2 ** 40 + 0xabc)
    expect(big).toBe('0A0102FE' + '0000FFFF' + '00000100' + '00000ABC')
    expect(big).toMatch(/^[0-9A-F]{32}$/)
    expect(parseMsgId(big)).toEqual({ address: '10.1.2.254', port: 65535, offset: 2 ** 40 + 0xabc })
    expect(parseMsgId(big.toLowerCase())).toEqual(parseMsgId(big))
  })

  it('is 56 characters for IPv6 and round-trips', () => {
    const id = createMsgId({ address: 'fe80::1:2', port: 10911 }, 123456789)
    expect(id).toMatch(/^[0-9A-F]{56}$/)
    expect(id.slice(0, 32)).toBe('FE800000000000000000000000010002')
    expect(parseMsgId(id)).toEqual({ address: 'fe80::1:2', port: 10911, offset: 123456789 })
    // an IPv4-mapped address is an IPv4 address, as in Java
    expect(createMsgId({ address: '::ffff:127.0.0.1', port: 1 }, 0)).toHaveLength(32)
  })

  it('rejects bad input with a RangeError', () => {
    expect(() => parseMsgId('XYZ')).toThrow(RangeError)
    expect(() => parseMsgId('G'.repeat(32))).toThrow(RangeError)
    expect(() => createMsgId({ address: 'localhost', port: 1 }, 0)).toThrow(RangeError)
    expect(() => createMsgId({ address: '127.0.0.1', port: 1 }, -1)).toThrow(RangeError)
  })
})

describe('record layout', () => {
  it('writes the exact bytes of a known record', () => {
    const props = 'TAGS\u0001TagA'
    const { buf, rec } = written(
      { propertiesString: props },
      { queueOffset: 42, physicalOffset: 1_073_741_824, storeTimestamp: 1_700_000_000_456 },
    )
    const L = 5
    const T = 9
    const P = 9
    expect(rec.length).toBe(91 + L + T + P)
    expect(buf.length).toBe(114)

    // An independent encoding with Buffer's own methods, field by field.
    const e = Buffer.alloc(114)
    let o = 0
    const i32 = (v: number): void => void (o = e.writeInt32BE(v, o))
    const i64 = (v: number): void => void (o = e.writeBigInt64BE(BigInt(v), o))
    i32(114)
    i32(MESSAGE_MAGIC_CODE)
    i32(crc32(Buffer.from('Hello')) & 0x7fffffff)
    i32(2) // queue id
    i32(7) // flag
    i64(42)
    i64(1_073_741_824)
    i32(0) // sysFlag
    i64(1_700_000_000_123)
    o += Buffer.from([192, 168, 0, 2]).copy(e, o)
    i32(51234)
    i64(1_700_000_000_456)
    o += Buffer.from([127, 0, 0, 1]).copy(e, o)
    i32(10911)
    i32(3) // reconsume times
    i64(0) // prepared transaction offset
    i32(L)
    o += e.write('Hello', o)
    o = e.writeInt8(T, o)
    o += e.write('TopicTest', o)
    o = e.writeInt16BE(P, o)
    o += e.write(props, o)
    expect(o).toBe(114)
    expect(buf.equals(e)).toBe(true)

    // The exported offsets and the drawn positions agree with those bytes.
    expect(buf.readInt32BE(OFFSET_TOTALSIZE)).toBe(114)
    expect(buf.readInt32BE(OFFSET_MAGIC)).toBe(MESSAGE_MAGIC_CODE)
    expect(buf.readInt32BE(OFFSET_BODYCRC)).toBe(rec.bodyCRC)
    expect(buf.readInt32BE(OFFSET_QUEUEID)).toBe(2)
    expect(buf.readInt32BE(OFFSET_FLAG)).toBe(7)
    expect(buf.readBigInt64BE(OFFSET_QUEUEOFFSET)).toBe(42n)
    expect(buf.readBigInt64BE(OFFSET_PHYSICALOFFSET)).toBe(1_073_741_824n)
    expect(buf.readInt32BE(OFFSET_SYSFLAG)).toBe(0)
    expect(buf.readBigInt64BE(OFFSET_BORNTIMESTAMP)).toBe(1_700_000_000_123n)
    expect([...buf.subarray(OFFSET_BORNHOST, OFFSET_BORNHOST + 4)]).toEqual([192, 168, 0, 2])
    expect(buf.readBigInt64BE(storeTimestampOffset(0))).toBe(1_700_000_000_456n)
    expect(buf.readInt32BE(64 + 4)).toBe(10911)
    expect(buf.readInt32BE(72)).toBe(3)
    expect(buf.readInt32BE(84)).toBe(L)
    expect(buf.toString('latin1', 88, 93)).toBe('Hello')
    expect(buf.readInt8(93)).toBe(T)
    expect(buf.readInt16BE(103)).toBe(P)
  })

  it('writes IPv6 hosts as 16 + 4 bytes and sets their sysFlag bits', () => {
    const { buf, rec } = written({
      bornHost: { address: '2001:db8::8:800:200c:417a', port: 1 },
      storeHost: { address: '::1', port: 10911 },
    })
    expect(rec.sysFlag).toBe(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
    expect(rec.length).toBe(114 + 24)
    expect(buf.readInt32BE(OFFSET_SYSFLAG)).toBe(0x30)
    expect(buf.subarray(48, 64).toString('hex')).toBe('20010db80000000000080800200c417a')
    expect(buf.readInt32BE(64)).toBe(1)
    expect(storeTimestampOffset(rec.sysFlag)).toBe(68)
    expect(buf.subarray(76, 92).toString('hex')).toBe('00000000000000000000000000000001')
    expect(buf.readInt32BE(92)).toBe(10911)
  })

  it('body CRC is zlib crc32 masked to 31 bits, 0 for an empty body', () => {
    const body = Buffer.from('body-2') // crc32 has the top bit set
    expect(crc32(body)).toBeGreaterThan(0x7fffffff)
    expect(prepared({ body }).bodyCRC).toBe(crc32(body) & 0x7fffffff)
    expect(prepared({ body: new Uint8Array(0) }).bodyCRC).toBe(0)
    const big = Buffer.alloc(70_000, 0x5a)
    expect(prepared({ body: big }).bodyCRC).toBe(crc32(big) & 0x7fffffff)
  })

  it('writeRecord writes exactly rec.length bytes', () => {
    const rec = prepared({ body: Buffer.alloc(33, 1) })
    const buf = Buffer.alloc(rec.length + 20, 0xee)
    writeRecord(buf, 10, rec, 0, 10, 1)
    expect(buf.subarray(0, 10).every((b) => b === 0xee)).toBe(true)
    expect(buf.subarray(10 + rec.length).every((b) => b === 0xee)).toBe(true)
    expect(buf.readInt32BE(10)).toBe(rec.length)
    expect(checkRecord(buf, 10, buf.length, true).status).toBe('OK')
  })

  it('works on views with a byte offset into a larger buffer', () => {
    const rec = prepared()
    const whole = Buffer.alloc(rec.length + 300, 0x11)
    const view = whole.subarray(100, 100 + rec.length + 50)
    writeRecord(view, 7, rec, 5, 6, 7)
    expect(whole.readInt32BE(107)).toBe(rec.length)
    expect(whole.subarray(0, 107).every((x) => x === 0x11)).toBe(true)
    expect(checkRecord(view, 7, view.length, true)).toMatchObject({ status: 'OK', queueOffset: 5, commitLogOffset: 6, storeTimestamp: 7 })
    expect(checkRecord(whole, 107, whole.length, true).status).toBe('OK')
    expect(decodeMessage(view, 7, false)?.storeSize).toBe(rec.length)
  })

  it('writeRecord refuses a record that does not fit, a foreign record and non-integer offsets', () => {
    const rec = prepared()
    expect(() => writeRecord(Buffer.alloc(rec.length - 1), 0, rec, 0, 0, 0)).toThrow(RangeError)
    expect(() => writeRecord(Buffer.alloc(rec.length), 1, rec, 0, 0, 0)).toThrow(RangeError)
    expect(() => writeRecord(Buffer.alloc(rec.length), -1, rec, 0, 0, 0)).toThrow(RangeError)
    expect(() => writeRecord(Buffer.alloc(rec.length + 1), 0.5, rec, 0, 0, 0)).toThrow(RangeError)
    expect(() => writeRecord(Buffer.alloc(rec.length), 0, rec, 0.5, 0, 0)).toThrow(RangeError)
    expect(() => writeRecord(Buffer.alloc(rec.length), 0, rec, 0, Number.NaN, 0)).toThrow(RangeError)
    const fake = {
      length: rec.length,
      topic: 't',
      queueId: 0,
      sysFlag: 0,
      bodyCRC: 0,
      body: new Uint8Array(0),
      bornTimestamp: 0,
      preparedTransactionOffset: 0,
      tags: undefined,
      keys: undefined,
      uniqKey: undefined,
    }
    expect(() => writeRecord(Buffer.alloc(rec.length), 0, fake, 0, 0, 0)).toThrow(TypeError)
  })

  it('writeBlank writes only the 8-byte header', () => {
    const buf = Buffer.alloc(64, 0xab)
    writeBlank(buf, 16, 48)
    expect(buf.readInt32BE(16)).toBe(48)
    expect(buf.readInt32BE(20)).toBe(BLANK_MAGIC_CODE)
    expect(buf.subarray(0, 16).every((b) => b === 0xab)).toBe(true)
    expect(buf.subarray(24).every((b) => b === 0xab)).toBe(true)
    expect(() => writeBlank(buf, 60, 8)).toThrow(RangeError)
    expect(() => writeBlank(buf, 0, 7)).toThrow(RangeError)
  })
})

describe('round trip through decodeMessage and checkRecord', () => {
  const cases: Array<[string, Partial<RecordInput>]> = [
    ['IPv4 hosts', {}],
    ['IPv6 hosts', { bornHost: { address: 'fe80::abcd', port: 40000 }, storeHost: { address: '2001:db8::1', port: 10911 } }],
    ['IPv6 born host only', { bornHost: { address: '::1', port: 5 } }],
    ['empty body', { body: new Uint8Array(0) }],
    ['no properties', { propertiesString: '' }],
    [
      'unicode properties',
      { propertiesString: encodeProperties({ TAGS: 'Étiquette-标签', KEYS: 'k1 ключ  k3', UNIQ_KEY: 'U1', ключ: 'значение \u{1F600}' }) },
    ],
    ['4.8 properties form', { propertiesString: 'TAGS\u0001TagB\u0002KEYS\u0001a b\u0002UNIQ_KEY\u0001X\u0002' }],
    ['flags', { sysFlag: SysFlag.COMPRESSED | SysFlag.MULTI_TAGS | SysFlag.TRANSACTION_COMMIT, flag: -1, reconsumeTimes: 16 }],
    ['prepared transaction', { sysFlag: SysFlag.TRANSACTION_PREPARED, preparedTransactionOffset: 2 ** 45 + 3 }],
    ['negative born timestamp and int32 extremes', { bornTimestamp: -1, queueId: 2 ** 31 - 1, flag: -(2 ** 31) }],
    ['127-character topic', { topic: 'T'.repeat(127) }],
  ]

  for (const [name, over] of cases) {
    it(name, () => {
      const full = input(over)
      const { buf, rec, pos } = written(over, {
        pos: 13,
        queueOffset: 2 ** 33 + 1,
        physicalOffset: 2 ** 40 + 13,
        storeTimestamp: 1_700_000_009_999,
        slack: 5,
      })
      const props = parsePropertiesString(full.propertiesString)
      const m = decodeMessage(buf, pos, false)
      expect(m).not.toBeNull()
      if (m === null) return
      const v6 = (a: string): boolean => a.includes(':')
      const expectedSysFlag =
        full.sysFlag | (v6(full.bornHost.address) ? SysFlag.BORNHOST_V6 : 0) | (v6(full.storeHost.address) ? SysFlag.STOREHOST_V6 : 0)
      expect(m).toEqual({
        topic: full.topic,
        queueId: full.queueId,
        queueOffset: 2 ** 33 + 1,
        commitLogOffset: 2 ** 40 + 13,
        storeSize: rec.length,
        body: Buffer.from(full.body),
        tags: props.TAGS,
        keys: props.KEYS === undefined ? [] : props.KEYS.split(' ').filter((k) => k !== ''),
        properties: props,
        storeTimestamp: 1_700_000_009_999,
        bornTimestamp: full.bornTimestamp,
        bornHost: full.bornHost,
        storeHost: full.storeHost,
        msgId: createMsgId(full.storeHost, 2 ** 40 + 13),
        sysFlag: expectedSysFlag,
        reconsumeTimes: full.reconsumeTimes,
        bodyCRC: rec.bodyCRC,
        flag: full.flag,
        preparedTransactionOffset: full.preparedTransactionOffset,
      })
      expect(rec.sysFlag).toBe(expectedSysFlag)

      const d = checkRecord(buf, pos, buf.length, true)
      expect(d).toEqual({
        status: 'OK',
        size: rec.length,
        reason: undefined,
        topic: full.topic,
        queueId: full.queueId,
        queueOffset: 2 ** 33 + 1,
        commitLogOffset: 2 ** 40 + 13,
        sysFlag: expectedSysFlag,
        bornTimestamp: full.bornTimestamp,
        storeTimestamp: 1_700_000_009_999,
        preparedTransactionOffset: full.preparedTransactionOffset,
        tagsCode: tagsCodeOf(props.TAGS),
        keys: props.KEYS,
        uniqKey: props.UNIQ_KEY,
        bodyCRC: rec.bodyCRC,
      })
    })
  }

  it('body is a zero-copy view unless copyBody', () => {
    const { buf } = written({ body: Buffer.from('abc') })
    const view = decodeMessage(buf, 0, false)
    const copy = decodeMessage(buf, 0, true)
    buf[88] = 0x7a
    expect(view?.body.toString()).toBe('zbc')
    expect(copy?.body.toString()).toBe('abc')
  })

  it('clears stale IPv6 bits and stores an IPv4-mapped host as IPv4', () => {
    const rec = prepared({
      sysFlag: SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6 | SysFlag.COMPRESSED,
      bornHost: { address: '::ffff:10.0.0.9', port: 9 },
    })
    expect(rec.sysFlag).toBe(SysFlag.COMPRESSED)
    expect(rec.length).toBe(114)
    const buf = Buffer.alloc(rec.length)
    writeRecord(buf, 0, rec, 0, 0, 0)
    expect(decodeMessage(buf, 0, false)?.bornHost).toEqual({ address: '10.0.0.9', port: 9 })
  })

  it('decodes topics that share a hash code correctly', () => {
    const a = written({ topic: 'Aa' })
    const b = written({ topic: 'BB' })
    for (let i = 0; i < 3; i++) {
      expect(checkRecord(a.buf, 0, a.buf.length, false).topic).toBe('Aa')
      expect(checkRecord(b.buf, 0, b.buf.length, false).topic).toBe('BB')
      expect(decodeMessage(b.buf, 0, false)?.topic).toBe('BB')
    }
  })

  it('decodeMessage returns null for anything but a whole valid record', () => {
    const { buf, rec } = written()
    expect(decodeMessage(Buffer.alloc(200), 0, false)).toBeNull()
    expect(decodeMessage(buf.subarray(0, rec.length - 1), 0, false)).toBeNull()
    expect(decodeMessage(buf, 1, false)).toBeNull()
    expect(decodeMessage(buf, -1, false)).toBeNull()
    const blank = Buffer.alloc(16)
    writeBlank(blank, 0, 16)
    expect(decodeMessage(blank, 0, false)).toBeNull()
    const bad = Buffer.from(buf)
    bad.writeInt32BE(rec.length + 1, 0)
    expect(decodeMessage(Buffer.concat([bad, Buffer.alloc(1)]), 0, false)).toBeNull()
  })
})

describe('prepareRecord failures', () => {
  it('MESSAGE_ILLEGAL for an invalid topic', () => {
    for (const topic of ['', '../x', 'a/b', 'x'.repeat(128), 'é']) {
      expect(failure({ topic }).status).toBe('MESSAGE_ILLEGAL')
    }
  })

  it('MESSAGE_ILLEGAL when the property string has more than 32767 UTF-16 units', () => {
    const r = failure({ propertiesString: `A\u0001${'x'.repeat(MAX_PROPERTIES_LENGTH - 1)}` })
    expect(r.status).toBe('MESSAGE_ILLEGAL')
    expect(prepareRecord(input({ propertiesString: `A\u0001${'x'.repeat(MAX_PROPERTIES_LENGTH - 2)}` }), MAX)).not.toHaveProperty('status')
  })

  it('PROPERTIES_SIZE_EXCEEDED when the UTF-8 bytes exceed 32767', () => {
    const s = `A\u0001${'é'.repeat(20_000)}` // 20002 units, 40002 bytes
    expect(failure({ propertiesString: s }).status).toBe('PROPERTIES_SIZE_EXCEEDED')
  })

  it('MESSAGE_ILLEGAL when the body exceeds maxMessageSize', () => {
    expect(failure({ body: Buffer.alloc(1025) }, 1024).status).toBe('MESSAGE_ILLEGAL')
    expect(isPrepareFailure(prepareRecord(input({ body: Buffer.alloc(1024) }), 1024))).toBe(false)
  })

  it('MESSAGE_ILLEGAL when the record would not fit an int32 length', () => {
    // Only the length is read before the CRC: a fake 2 GiB body is enough.
    const huge = Object.create(Uint8Array.prototype, { length: { value: 2 ** 31 - 50 } }) as Uint8Array
    const r = failure({ body: huge }, 2 ** 31)
    expect(r.status).toBe('MESSAGE_ILLEGAL')
    expect(r.reason).toMatch(/record/)
  })

  it('MESSAGE_ILLEGAL for a bad queueId, integer field or host', () => {
    for (const over of [
      { queueId: -1 },
      { queueId: 1.5 },
      { queueId: 2 ** 31 },
      { flag: 2 ** 31 },
      { reconsumeTimes: Number.NaN },
      { bornTimestamp: 1.5 },
      { preparedTransactionOffset: 2 ** 60 },
      { bornHost: { address: 'example.com', port: 1 } },
      { storeHost: { address: '1.2.3', port: 1 } },
      { storeHost: { address: '1.2.3.4', port: 70_000 } },
      { bornHost: { address: '1.2.3.4', port: -1 } },
    ] satisfies Partial<RecordInput>[]) {
      expect(failure(over).status, JSON.stringify(over)).toBe('MESSAGE_ILLEGAL')
    }
  })

  it('a failure carries a reason', () => {
    expect(failure({ topic: 'a/b' }).reason).toMatch(/topic/)
  })
})

describe('checkRecord', () => {
  it('BLANK for a blank header, whatever follows it', () => {
    const buf = Buffer.alloc(100, 0x33)
    writeBlank(buf, 20, 80)
    const d = checkRecord(buf, 20, buf.length, true)
    expect(d.status).toBe('BLANK')
    expect(d.size).toBe(0)
  })

  it('BAD for zeros (unwritten space) and garbage magic', () => {
    const zeros = checkRecord(Buffer.alloc(256), 0, 256, true)
    expect(zeros.status).toBe('BAD')
    expect(zeros.size).toBe(-1)
    expect(zeros.reason).toMatch(/magic/)
    const { buf } = written()
    buf.writeInt32BE(0x12345678, OFFSET_MAGIC)
    expect(checkRecord(buf, 0, buf.length, false)).toMatchObject({ status: 'BAD', size: -1 })
    buf.writeInt32BE(0xdaa320ab | 0, OFFSET_MAGIC)
    expect(checkRecord(buf, 0, buf.length, false).reason).toMatch(/v2/)
  })

  it('BAD on a body CRC mismatch only when checking CRCs', () => {
    const { buf } = written({ body: Buffer.from('payload') })
    buf[88] ^= 0x01
    expect(checkRecord(buf, 0, buf.length, true)).toMatchObject({ status: 'BAD', size: -1 })
    expect(checkRecord(buf, 0, buf.length, true).reason).toMatch(/crc/)
    expect(checkRecord(buf, 0, buf.length, false).status).toBe('OK')
  })

  it('LENGTH_MISMATCH when the fields do not add up to TOTALSIZE', () => {
    const { buf, rec } = written({}, { slack: 16 })
    buf.writeInt32BE(rec.length + 4, OFFSET_TOTALSIZE)
    const d = checkRecord(buf, 0, buf.length, true)
    expect(d.status).toBe('LENGTH_MISMATCH')
    expect(d.size).toBe(rec.length + 4)
    expect(d.reason).toMatch(/length/)

    const shorter = written({}, { slack: 16 })
    shorter.buf.writeInt16BE(8, 103) // PROPERTIESLENGTH one less than written
    expect(checkRecord(shorter.buf, 0, shorter.buf.length, false).status).toBe('LENGTH_MISMATCH')
  })

  it('BAD, never an exception, when the limit cuts the record', () => {
    const { buf, rec } = written({ propertiesString: encodeProperties({ TAGS: 'T', KEYS: 'k' }) })
    for (let limit = 0; limit < rec.length; limit++) {
      const d = checkRecord(buf, 0, limit, true)
      expect(d.status, `limit ${limit}`).toBe('BAD')
      expect(d.size).toBe(-1)
    }
    expect(checkRecord(buf, 0, rec.length, true).status).toBe('OK')
    expect(checkRecord(buf, 0, rec.length + 100, true).status).toBe('OK') // the limit is clamped to the buffer
    expect(checkRecord(buf, -1, buf.length, true).status).toBe('BAD')
    expect(checkRecord(buf, 0.5, buf.length, true).status).toBe('BAD')
    expect(checkRecord(buf, buf.length, buf.length, true).status).toBe('BAD')
  })

  it('BAD when TOTALSIZE is below the minimum or the topic length is negative', () => {
    const { buf } = written({}, { slack: 200 })
    buf.writeInt32BE(90, OFFSET_TOTALSIZE)
    expect(checkRecord(buf, 0, buf.length, false).status).toBe('BAD')
    const neg = written({}, { slack: 200 })
    neg.buf.writeInt8(-1, 93)
    expect(checkRecord(neg.buf, 0, neg.buf.length, false).status).toBe('BAD')
  })

  it('extracts KEYS, UNIQ_KEY and the tags code', () => {
    const props = encodeProperties({ KEYS: 'order-1 order-2', UNIQ_KEY: '7F000001ABCD', TAGS: 'TagA', WAIT: 'true' })
    const { buf } = written({ propertiesString: props })
    const d = checkRecord(buf, 0, buf.length, false)
    expect(d).toMatchObject({ status: 'OK', keys: 'order-1 order-2', uniqKey: '7F000001ABCD', tagsCode: 2598919 })
    const unicode = written({ propertiesString: encodeProperties({ TAGS: '标签' }) })
    expect(checkRecord(unicode.buf, 0, unicode.buf.length, false).tagsCode).toBe(javaStringHashCode('标签'))
    const none = written({ propertiesString: encodeProperties({ KEYS: 'k' }) })
    expect(checkRecord(none.buf, 0, none.buf.length, false)).toMatchObject({ tagsCode: 0, uniqKey: undefined, keys: 'k' })
  })

  it('reads KEYS, UNIQ_KEY and TAGS exactly as parsePropertiesString does', () => {
    const pieces = ['KEYS', 'TAGS', 'UNIQ_KEY', 'KEY', 'TAG', '\u0001', '\u0002', 'a', 'é', 'k 2', '']
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 14 }), (parts) => {
        const propertiesString = parts.join('')
        const { buf } = written({ propertiesString })
        const props = parsePropertiesString(propertiesString)
        // Dispatch reads whatever is stored; the checked scan takes only what a writer makes.
        const wellFormed = propertiesString.split('\u0002').every((pair) => pair === '' || pair.includes('\u0001'))
        expect(checkRecord(buf, 0, buf.length, true).status).toBe(wellFormed ? 'OK' : 'BAD')
        expect(checkRecord(buf, 0, buf.length, false)).toMatchObject({
          status: 'OK',
          keys: props.KEYS,
          uniqKey: props.UNIQ_KEY,
          tagsCode: tagsCodeOf(props.TAGS),
        })
        expect(decodeMessage(buf, 0, false)?.properties).toEqual(props)
      }),
      { numRuns: 1000 },
    )
    const odd = written({ propertiesString: 'KEYS\u0001\u0002TAGS\u0001\u0002UNIQ_KEY\u0001u\u0001v\u0002' })
    expect(checkRecord(odd.buf, 0, odd.buf.length, false)).toMatchObject({ keys: undefined, tagsCode: 0, uniqKey: 'u\u0001v' })
  })

  it('gives delayed messages their delivery time as tags code', () => {
    const at = { storeTimestamp: 1_700_000_000_000 }
    const check = (topic: string, delay: string, table?: number[]): ReturnType<typeof checkRecord> => {
      const { buf } = written({ topic, propertiesString: encodeProperties({ TAGS: 'TagA', DELAY: delay }) }, at)
      return checkRecord(buf, 0, buf.length, false, table)
    }
    expect(check(SCHEDULE_TOPIC, '3').tagsCode).toBe(1_700_000_000_000 + 10_000)
    expect(check(SCHEDULE_TOPIC, '18').tagsCode).toBe(1_700_000_000_000 + 7_200_000)
    expect(check(SCHEDULE_TOPIC, '99').tagsCode).toBe(1_700_000_000_000 + 7_200_000) // clamped
    expect(check(SCHEDULE_TOPIC, '0').tagsCode).toBe(2598919)
    expect(check(SCHEDULE_TOPIC, '-2').tagsCode).toBe(2598919)
    expect(check('OtherTopic', '3').tagsCode).toBe(2598919)
    expect(check(SCHEDULE_TOPIC, '1', [500]).tagsCode).toBe(1_700_000_000_000 + 500)
    expect(check(SCHEDULE_TOPIC, '2', [500, undefined, 700] as number[]).tagsCode).toBe(1_700_000_000_000 + 1000)
    const bad = check(SCHEDULE_TOPIC, 'x')
    expect(bad).toMatchObject({ status: 'BAD', size: -1 })
    expect(check(SCHEDULE_TOPIC, '99999999999').status).toBe('BAD')
  })

  it('reads consecutive records and a trailing blank', () => {
    const recs = [
      prepared({ topic: 'A' }),
      prepared({ topic: 'B', bornHost: { address: '::2', port: 3 } }),
      prepared({ topic: 'C', body: new Uint8Array(0) }),
    ]
    const total = recs.reduce((n, r) => n + r.length, 0)
    const buf = Buffer.alloc(total + 40)
    let pos = 0
    recs.forEach((r, i) => {
      writeRecord(buf, pos, r, i, pos, 1000 + i)
      pos += r.length
    })
    writeBlank(buf, pos, buf.length - pos)
    const seen: string[] = []
    let p = 0
    for (;;) {
      const d = checkRecord(buf, p, buf.length, true)
      if (d.status !== 'OK') {
        expect(d.status).toBe('BLANK')
        break
      }
      expect(d.commitLogOffset).toBe(p)
      seen.push(d.topic)
      p += d.size
    }
    expect(seen).toEqual(['A', 'B', 'C'])
  })

  it('never throws on random or corrupted bytes', () => {
    const { buf: good } = written({
      propertiesString: encodeProperties({ TAGS: 'T', KEYS: 'a b', UNIQ_KEY: 'U', DELAY: '2' }),
      topic: SCHEDULE_TOPIC,
    })
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 400 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }),
        fc.nat(),
        fc.boolean(),
        (random, flips, limitSeed, crc) => {
          const corrupt = Buffer.from(good)
          for (const [at, value] of flips) corrupt[at % corrupt.length] = value
          for (const b of [Buffer.from(random), corrupt]) {
            const limit = limitSeed % (b.length + 2)
            const d = checkRecord(b, 0, limit, crc)
            expect(['OK', 'BLANK', 'BAD', 'LENGTH_MISMATCH']).toContain(d.status)
            if (d.status === 'OK') expect(d.size).toBeLessThanOrEqual(limit)
            decodeMessage(b, 0, false)
          }
        },
      ),
      { numRuns: 2000 },
    )
  })
})

describe('tagsMatch', () => {
  const code = tagsCodeOf('TagA')
  it('matches everything without a filter or with *', () => {
    expect(tagsMatch(undefined, code)).toBe(true)
    expect(tagsMatch([], code)).toBe(true)
    expect(tagsMatch(['*'], 0)).toBe(true)
    expect(tagsMatch([' * '], code)).toBe(true)
  })

  it('matches on the hash of trimmed tags', () => {
    expect(tagsMatch(['TagA'], code)).toBe(true)
    expect(tagsMatch([' TagB ', ' TagA '], code)).toBe(true)
    expect(tagsMatch(['TagB'], code)).toBe(false)
    expect(tagsMatch(['', ' '], 0)).toBe(false)
    expect(tagsMatch(['Aa'], tagsCodeOf('BB'))).toBe(true) // a collision: the client re-checks
  })

  it('compares the low 32 bits of a long tags code', () => {
    const delivery = 1_700_000_010_000
    expect(tagsMatch(['x'], delivery)).toBe(javaStringHashCode('x') === (delivery | 0))
    const tag = 'polygenelubricants'
    expect(tagsMatch([tag], 2 ** 32 + javaStringHashCode(tag))).toBe(true)
  })
})

describe('batches and delay levels', () => {
  it('splits a client-encoded batch blob', () => {
    const part = (flag: number, body: string, props: string): Buffer => {
      const b = Buffer.from(body)
      const p = Buffer.from(props)
      const out = Buffer.alloc(20 + b.length + 2 + p.length)
      out.writeInt32BE(out.length, 0)
      out.writeInt32BE(flag, 12)
      out.writeInt32BE(b.length, 16)
      b.copy(out, 20)
      out.writeInt16BE(p.length, 20 + b.length)
      p.copy(out, 22 + b.length)
      return out
    }
    const blob = Buffer.concat([part(1, 'one', 'A\u00011'), part(2, '', ''), part(3, 'trois', 'clé\u0001é')])
    const entries = decodeBatchBlob(blob)
    expect(entries?.map((e) => [e.flag, Buffer.from(e.body).toString(), e.propertiesString])).toEqual([
      [1, 'one', 'A\u00011'],
      [2, '', ''],
      [3, 'trois', 'clé\u0001é'],
    ])
    expect(decodeBatchBlob(blob.subarray(0, blob.length - 1))).toBeNull()
    expect(decodeBatchBlob(new Uint8Array(0))).toEqual([])
  })

  it('parses messageDelayLevel', () => {
    expect(parseDelayLevels(DEFAULT_MESSAGE_DELAY_LEVEL)).toHaveLength(18)
    expect(parseDelayLevels('1s 2m 3h 1d')).toEqual([1000, 120_000, 10_800_000, 86_400_000])
    expect(() => parseDelayLevels('1s 5x')).toThrow(RangeError)
  })

  it('property names the store uses', () => {
    expect(PropertyName.UNIQ_KEY).toBe('UNIQ_KEY')
    expect(PropertyName.DELAY).toBe('DELAY')
  })
})

describe('no buffer outlives its use in the codec', () => {
  // A module-level cache of the last buffer written or read would keep a closed store's mapping
  // reachable. The codec's callers own their DataView caches; called without one, it keeps nothing.
  it('a buffer written, checked and decoded without a cache can be collected (child process, --expose-gc)', () => {
    const record = new URL('../dist/lib/store/commitlog/record.js', import.meta.url).href
    const script = `
      const { prepareRecord, writeRecord, writeBlank, checkRecord, decodeMessage } = await import(${JSON.stringify(record)})
      const collected = new Set()
      const registry = new FinalizationRegistry((name) => collected.add(name))
      const rec = prepareRecord({ topic: 't', queueId: 0, body: Buffer.from('x'), flag: 0, sysFlag: 0, bornTimestamp: 1,
        bornHost: { address: '10.0.0.1', port: 1 }, storeHost: { address: '10.0.0.2', port: 2 }, reconsumeTimes: 0,
        preparedTransactionOffset: 0, propertiesString: '' }, 1 << 20)
      ;(() => {
        const a = Buffer.alloc(4096)
        writeRecord(a, 0, rec, 0, 0, 1)
        writeBlank(a, rec.length, 4096 - rec.length)
        if (checkRecord(a, 0, 4096, true).status !== 'OK' || decodeMessage(a, 0, false) === null) throw new Error('bad record')
        registry.register(a.buffer, 'buffer')
      })()
      for (let i = 0; i < 100 && !collected.has('buffer'); i++) {
        globalThis.gc()
        await new Promise((resolve) => setImmediate(resolve))
      }
      console.log(collected.has('buffer') ? 'collected' : 'kept')
    `
    const child = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 })
    expect(child.stderr).toBe('')
    expect(child.stdout.trim()).toBe('collected')
  })
})
