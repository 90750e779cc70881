// The recovery scan's body CRCs computed a chunk at a time (crc-prefetch.ts): every CRC it hands
// out equals the CRC computed record by record, it stops where the chain of records breaks, and
// checkRecord with a CRC computed ahead decides exactly as without one (a damaged body still fails).
import { describe, expect, it } from 'vitest'

import { bodyCrcOf } from '../lib/store/commitlog/body-crc.js'
import { CrcPrefetch } from '../lib/store/commitlog/crc-prefetch.js'
import { bodyOffset, checkRecord, encodeProperties, isPrepareFailure, prepareRecord, writeRecord } from '../lib/store/commitlog/record.js'

/** `count` records of varied body sizes (some empty) back to back in one buffer. */
function writeRun(count: number, size = 1 << 20): { buf: Buffer; positions: number[] } {
  const buf = Buffer.alloc(size)
  const positions: number[] = []
  let pos = 0
  for (let i = 0; i < count; i++) {
    const body = Buffer.alloc((i * 37) % 300, (i % 251) + 1)
    const rec = prepareRecord(
      {
        topic: 'prefetch',
        queueId: i % 3,
        body,
        flag: 0,
        sysFlag: i % 5 === 0 ? 0x10 | 0x20 : 0,
        bornTimestamp: 1,
        bornHost: { address: i % 5 === 0 ? '::1' : '10.0.0.1', port: 1 },
        storeHost: { address: i % 5 === 0 ? '::2' : '10.0.0.2', port: 2 },
        reconsumeTimes: 0,
        preparedTransactionOffset: 0,
        propertiesString: encodeProperties({ KEYS: `k${i}` }),
      },
      1 << 20,
    )
    if (isPrepareFailure(rec)) throw new Error(rec.reason)
    writeRecord(buf, pos, rec, i, pos, 1000 + i)
    positions.push(pos)
    pos += rec.length
  }
  return { buf, positions }
}

function bodyOf(buf: Buffer, pos: number): Buffer {
  const at = pos + bodyOffset(buf.readInt32BE(pos + 36))
  return buf.subarray(at, at + Math.max(0, buf.readInt32BE(at - 4)))
}

describe('CrcPrefetch', () => {
  it('hands out, in order, the CRC of every body, equal to the one computed alone', () => {
    const { buf, positions } = writeRun(9000, 4 << 20)
    const prefetch = new CrcPrefetch()
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.length)
    for (const pos of positions) {
      expect(prefetch.crcAt(buf, pos, buf.length, dv)).toBe(bodyCrcOf(bodyOf(buf, pos)))
    }
  })

  it('restarts at any position asked out of order, and answers -1 where no record starts', () => {
    const { buf, positions } = writeRun(50)
    const prefetch = new CrcPrefetch()
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.length)
    for (const pos of [positions[30], positions[2], positions[49], positions[3]]) {
      expect(prefetch.crcAt(buf, pos, buf.length, dv)).toBe(bodyCrcOf(bodyOf(buf, pos)))
    }
    const end = positions[49] + buf.readInt32BE(positions[49])
    expect(prefetch.crcAt(buf, end, buf.length, dv)).toBe(-1)
    expect(prefetch.crcAt(buf, positions[5] + 1, buf.length, dv)).toBe(-1)
    // A limit that cuts the record in two: nothing is read past it.
    expect(prefetch.crcAt(buf, positions[7], positions[7] + 50, dv)).toBe(-1)
  })

  it('stops the walk at a damaged header, and the records after it get their CRC on request', () => {
    const { buf, positions } = writeRun(20)
    buf.writeInt32BE(12345, positions[10] + 4) // the magic code of record 10
    const prefetch = new CrcPrefetch()
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.length)
    for (let i = 0; i < 10; i++) expect(prefetch.crcAt(buf, positions[i], buf.length, dv)).toBe(bodyCrcOf(bodyOf(buf, positions[i])))
    expect(prefetch.crcAt(buf, positions[10], buf.length, dv)).toBe(-1)
    expect(prefetch.crcAt(buf, positions[11], buf.length, dv)).toBe(bodyCrcOf(bodyOf(buf, positions[11])))
  })

  it('checkRecord with the CRC computed ahead decides as without it, a flipped body byte included', () => {
    const { buf, positions } = writeRun(40)
    const flipped = positions[17]
    bodyOf(buf, flipped)[3] ^= 0x40
    const prefetch = new CrcPrefetch()
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.length)
    for (const pos of positions) {
      const ahead = checkRecord(buf, pos, buf.length, true, undefined, undefined, prefetch.crcAt(buf, pos, buf.length, dv))
      const alone = checkRecord(buf, pos, buf.length, true)
      expect(ahead).toEqual(alone)
      expect(ahead.status).toBe(pos === flipped ? 'BAD' : 'OK')
    }
  })
})
