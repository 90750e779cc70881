// The keys a record is indexed under, and the index layout's decoders and slot formula.
import { describe, expect, it } from 'vitest'

import {
  CheckedRecord,
  checkRecord,
  checkRecordInto,
  DEFAULT_DELAY_TABLE,
  encodeProperties,
  isPrepareFailure,
  prepareRecord,
  writeRecord,
} from '../lib/store/commitlog/record.js'
import { SysFlag } from '../lib/store/commitlog/sys-flag.js'
import { indexKeyHashesInto, indexKeyHashesOf, indexKeysOf } from '../lib/store/index/index-keys.js'
import {
  hashSlotPosition,
  indexEntryPosition,
  indexKeyHash,
  readIndexEntry,
  readIndexHeader,
  INDEX_HEADER_SIZE,
} from '../lib/store/index/index-layout.js'

describe('indexKeyHashesOf', () => {
  it('UNIQ_KEY first, then each non-empty KEYS token, each hashed as topic#key', () => {
    const record = { topic: 'orders', sysFlag: 0, uniqKey: 'u1', keys: ' a  b ' }
    expect(indexKeysOf(record)).toEqual(['u1', 'a', 'b'])
    expect(indexKeyHashesOf(record)).toEqual(['orders#u1', 'orders#a', 'orders#b'].map(indexKeyHash))
  })

  it('a record without keys has none; a rolled-back transaction record is not indexed', () => {
    expect(indexKeyHashesOf({ topic: 't', sysFlag: 0, uniqKey: undefined, keys: undefined })).toEqual([])
    const rolledBack = { topic: 't', sysFlag: SysFlag.TRANSACTION_ROLLBACK, uniqKey: 'u', keys: 'k' }
    expect(indexKeyHashesOf(rolledBack)).toEqual([])
    expect(indexKeysOf(rolledBack)).toEqual([])
    const committed = { ...rolledBack, sysFlag: SysFlag.TRANSACTION_COMMIT }
    expect(indexKeyHashesOf(committed)).toHaveLength(2)
  })

  it('reuses the array it is given', () => {
    const out = [1, 2, 3, 4, 5]
    expect(indexKeyHashesOf({ topic: 't', sysFlag: 0, uniqKey: undefined, keys: 'k' }, out)).toBe(out)
    expect(out).toEqual([indexKeyHash('t#k')])
  })
})

/** A stored record of `topic` with these properties, as bytes. */
function storedRecord(topic: string, sysFlag: number, properties: Record<string, string | undefined>): Buffer {
  const prepared = prepareRecord(
    {
      topic,
      queueId: 0,
      body: Buffer.from('body'),
      flag: 0,
      sysFlag,
      bornTimestamp: 1_700_000_000_000,
      bornHost: { address: '127.0.0.1', port: 1 },
      storeHost: { address: '127.0.0.1', port: 10911 },
      reconsumeTimes: 0,
      preparedTransactionOffset: 0,
      propertiesString: encodeProperties(properties),
    },
    1024 * 1024,
  )
  if (isPrepareFailure(prepared)) throw new Error(prepared.reason)
  const bytes = Buffer.alloc(prepared.length)
  writeRecord(bytes, 0, prepared, 0, 0, 1_700_000_000_000)
  return bytes
}

describe('indexKeyHashesInto a record still in its bytes (the recovery scan)', () => {
  it('gives the hashes the decoded strings give: ASCII and UTF-8 keys, spaces anywhere, with and without UNIQ_KEY', () => {
    const cases: [string, Record<string, string | undefined>][] = [
      ['orders', { KEYS: 'k-1', UNIQ_KEY: 'AC11000100002A9F0000000000000001' }],
      ['orders', { KEYS: '  a  b c ', TAGS: 't' }],
      ['orders', { UNIQ_KEY: 'u' }],
      ['t%x|y_-', { KEYS: 'clé sœur', UNIQ_KEY: 'ünï' }],
      ['orders', { KEYS: ' ' }],
      ['orders', { TAGS: 'only' }],
      ['orders', { KEYS: Array.from({ length: 20 }, (_, i) => `k${i}`).join(' ') }],
    ]
    for (const [topic, properties] of cases) {
      for (const sysFlag of [0, SysFlag.TRANSACTION_ROLLBACK]) {
        const bytes = storedRecord(topic, sysFlag, properties)
        const checked = new CheckedRecord()
        expect(checkRecordInto(bytes, 0, bytes.length, true, DEFAULT_DELAY_TABLE, undefined, -1, checked)).toBe(true)
        const decoded = checkRecord(bytes, 0, bytes.length, true)
        expect(checked.keys).toBe(decoded.keys)
        expect(checked.uniqKey).toBe(decoded.uniqKey)
        const expected = indexKeyHashesOf(decoded)
        const out = new Int32Array(16)
        const count = indexKeyHashesInto(checked, out)
        expect(count).toBe(expected.length)
        expect([...out.subarray(0, Math.min(count, out.length))]).toEqual(expected.slice(0, out.length))
        expect(indexKeyHashesOf(checked)).toEqual(expected)
      }
    }
  })
})

describe('index layout', () => {
  it('decodes the header and an entry where the slot formula and entry position put them', () => {
    const slots = 8
    const buf = Buffer.alloc(indexEntryPosition(4, slots))
    buf.writeBigInt64BE(1_700_000_000_000n, 0)
    buf.writeBigInt64BE(1_700_000_001_000n, 8)
    buf.writeBigInt64BE(0n, 16)
    buf.writeBigInt64BE(4096n, 24)
    buf.writeInt32BE(2, 32)
    buf.writeInt32BE(3, 36)
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
    expect(readIndexHeader(view)).toEqual({
      beginTimestamp: 1_700_000_000_000,
      endTimestamp: 1_700_000_001_000,
      beginPhyOffset: 0,
      endPhyOffset: 4096,
      hashSlotCount: 2,
      indexCount: 3,
    })
    expect(hashSlotPosition(13, slots)).toBe(INDEX_HEADER_SIZE + 5 * 4)
    const at = indexEntryPosition(2, slots)
    expect(at).toBe(INDEX_HEADER_SIZE + slots * 4 + 2 * 20)
    buf.writeInt32BE(13, at)
    buf.writeBigInt64BE(2n ** 40n, at + 4)
    buf.writeInt32BE(7, at + 12)
    buf.writeInt32BE(1, at + 16)
    expect(readIndexEntry(view, at)).toEqual({ keyHash: 13, phyOffset: 2 ** 40, timeDiff: 7, prevIndex: 1 })
  })
})
