// The keys a record is indexed under, and the index layout's decoders and slot formula.
import { describe, expect, it } from 'vitest'

import { SysFlag } from '../lib/store/commitlog/sys-flag.js'
import { indexKeyHashesOf, indexKeysOf } from '../lib/store/index/index-keys.js'
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
