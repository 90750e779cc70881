// The commit log's recovery scan and its torn-vs-corrupt classifier, over in-memory files (the
// scan is pure: the store hands it views of its mappings, verify hands it file reads). One row per
// state the scan can meet; each damage is a function applied to a freshly written log.
import { describe, expect, it } from 'vitest'

import {
  BLANK_MAGIC_CODE,
  encodeProperties,
  isPrepareFailure,
  OFFSET_PHYSICALOFFSET,
  OFFSET_TOTALSIZE,
  prepareRecord,
  writeBlank,
  writeRecord,
} from '../lib/store/commitlog/record.js'
import { classifyDamage, scanRecords, scanStep, type ScanSource } from '../lib/store/commitlog/recovery-scan.js'

const FILE_SIZE = 4096

/** A log of `count` records of `bodyBytes` each, rolling to a new file (with a blank) as the store does. */
function writeLog(count: number, bodyBytes = 100): { files: Buffer[]; offsets: number[]; sizes: number[] } {
  const files = [Buffer.alloc(FILE_SIZE)]
  const offsets: number[] = []
  const sizes: number[] = []
  let pos = 0
  for (let i = 0; i < count; i++) {
    const rec = prepareRecord(
      {
        topic: 'scan',
        queueId: 0,
        body: Buffer.alloc(bodyBytes, i + 1),
        flag: 0,
        sysFlag: 0,
        bornTimestamp: 1,
        bornHost: { address: '10.0.0.1', port: 1 },
        storeHost: { address: '10.0.0.2', port: 2 },
        reconsumeTimes: 0,
        preparedTransactionOffset: 0,
        propertiesString: encodeProperties({ KEYS: `k${i}` }),
      },
      1 << 20,
    )
    if (isPrepareFailure(rec)) throw new Error(rec.reason)
    if (pos + rec.length + 8 > FILE_SIZE) {
      writeBlank(files[files.length - 1], pos, FILE_SIZE - pos)
      files.push(Buffer.alloc(FILE_SIZE))
      pos = 0
    }
    const offset = (files.length - 1) * FILE_SIZE + pos
    writeRecord(files[files.length - 1], pos, rec, i, offset, 1000 + i)
    offsets.push(offset)
    sizes.push(rec.length)
    pos += rec.length
  }
  return { files, offsets, sizes }
}

function source(files: Buffer[]): ScanSource {
  return {
    fileCount: files.length,
    fileSize: FILE_SIZE,
    fileStart: (index) => index * FILE_SIZE,
    read: (index, from, to) => files[index].subarray(from, to),
  }
}

/** The same files, read as the store reads them: copied into the scan's window, `windowBytes` at a time. */
function copying(files: Buffer[], windowBytes: number, calls = { read: 0, readInto: 0 }): ScanSource {
  return {
    ...source(files),
    windowBytes,
    read: (index, from, to) => {
      calls.read++
      return files[index].subarray(from, to)
    },
    readInto: (index, from, target) => {
      calls.readInto++
      return files[index].copy(target, 0, from, Math.min(FILE_SIZE, from + target.length))
    },
  }
}

function at(files: Buffer[], offset: number): { file: Buffer; pos: number } {
  return { file: files[Math.floor(offset / FILE_SIZE)], pos: offset % FILE_SIZE }
}

describe('scanRecords', () => {
  it('walks every record across files and their blanks, and ends at the zeros after the last', () => {
    const { files, offsets, sizes } = writeLog(40)
    expect(files.length).toBeGreaterThan(1)
    const seen: number[] = []
    const outcome = scanRecords(source(files), 0, true, (r) => seen.push(r.commitLogOffset), null)
    expect(seen).toEqual(offsets)
    expect(outcome).toMatchObject({ processOffset: offsets[39] + sizes[39], damage: null, lastRecordOffset: offsets[39] })
  })

  it('reads the same records through a window smaller than a record as through whole-file views', () => {
    const { files, offsets, sizes } = writeLog(40)
    const calls = { read: 0, readInto: 0 }
    const seen: number[] = []
    const outcome = scanRecords(copying(files, 150, calls), 0, true, (r) => seen.push(r.commitLogOffset), null)
    expect(seen).toEqual(offsets)
    expect(outcome).toMatchObject({ processOffset: offsets[39] + sizes[39], damage: null, lastRecordOffset: offsets[39] })
    // The window moved along (at least once per record, as none fits in 150 bytes twice), never through a view.
    expect(calls.readInto).toBeGreaterThanOrEqual(40)
    expect(calls.read).toBe(0)
  })

  it('reads a record larger than the window may copy through the view, and resumes copying after it', () => {
    const { files, offsets, sizes } = writeLog(6, 1500)
    const calls = { read: 0, readInto: 0 }
    const seen: number[] = []
    // Windows of 64 bytes copy records of up to 1,024 bytes; these are about 1,600.
    scanRecords(copying(files, 64, calls), 0, true, (r) => seen.push(r.commitLogOffset), null)
    expect(seen).toEqual(offsets)
    expect(sizes[0]).toBeGreaterThan(16 * 64)
    expect(calls.read).toBe(6)
    expect(calls.readInto).toBeGreaterThan(0)
  })

  it('a log whose last file is full ends after that file', () => {
    const { files } = writeLog(40)
    const last = files[files.length - 1]
    last.fill(0)
    writeBlank(last, 0, FILE_SIZE)
    expect(scanRecords(source(files), 0, true, null, null)).toMatchObject({ processOffset: (files.length - 1) * FILE_SIZE, damage: null })
  })
})

describe('torn or corrupt', () => {
  const cases: [string, (log: ReturnType<typeof writeLog>) => number, 'torn' | 'corrupt'][] = [
    [
      'the last record lost its tail (zeros from its middle on): torn',
      ({ files, offsets, sizes }) => {
        const { file, pos } = at(files, offsets[39])
        file.fill(0, pos + 60, pos + sizes[39])
        return offsets[39]
      },
      'torn',
    ],
    [
      'the last record lost its magic code only: torn',
      ({ files, offsets }) => {
        const { file, pos } = at(files, offsets[39])
        file.writeInt32BE(0, pos + 4)
        return offsets[39]
      },
      'torn',
    ],
    [
      'a body byte flipped in the middle of the log: corrupt (data follows)',
      ({ files, offsets }) => {
        const { file, pos } = at(files, offsets[10])
        file[pos + 100] ^= 0x10
        return offsets[10]
      },
      'corrupt',
    ],
    [
      'the last record of a file damaged, later files intact: corrupt',
      ({ files, offsets }) => {
        const lastOfFirst = offsets.filter((o) => o < FILE_SIZE).at(-1)!
        const { file, pos } = at(files, lastOfFirst)
        file[pos + 100] ^= 0x10
        return lastOfFirst
      },
      'corrupt',
    ],
    [
      'TOTALSIZE grown over the next (valid, last) record, zeros after it: corrupt, the length is the damage',
      ({ files, offsets, sizes }) => {
        const { file, pos } = at(files, offsets[38])
        file.writeInt32BE(sizes[38] + sizes[39], pos + OFFSET_TOTALSIZE)
        return offsets[38]
      },
      'corrupt',
    ],
    [
      'PHYSICALOFFSET naming another position (a header field the body CRC does not cover): corrupt',
      ({ files, offsets }) => {
        const { file, pos } = at(files, offsets[20])
        file.writeInt32BE(file.readInt32BE(pos + OFFSET_PHYSICALOFFSET + 4) + 1, pos + OFFSET_PHYSICALOFFSET + 4)
        return offsets[20]
      },
      'corrupt',
    ],
    [
      'the same PHYSICALOFFSET damage on the last record: torn, nothing follows',
      ({ files, offsets }) => {
        const { file, pos } = at(files, offsets[39])
        file.writeInt32BE(file.readInt32BE(pos + OFFSET_PHYSICALOFFSET + 4) + 1, pos + OFFSET_PHYSICALOFFSET + 4)
        return offsets[39]
      },
      'torn',
    ],
    [
      'a garbage header where the next record would start, zeros after it: torn',
      ({ files, offsets, sizes }) => {
        const end = offsets[39] + sizes[39]
        const { file, pos } = at(files, end)
        file.fill(0xab, pos, pos + 8)
        return end
      },
      'torn',
    ],
    [
      'garbage running past the header it makes (its length is negative): corrupt',
      ({ files, offsets, sizes }) => {
        const end = offsets[39] + sizes[39]
        const { file, pos } = at(files, end)
        file.fill(0xab, pos, pos + 24)
        return end
      },
      'corrupt',
    ],
    [
      'a blank header with a damaged magic code, with a file after it: corrupt',
      ({ files }) => {
        const first = files[0]
        const blankAt = first.lastIndexOf(Buffer.from(new Int32Array([BLANK_MAGIC_CODE]).buffer).reverse()) - 4
        first[blankAt + 5] ^= 1
        return blankAt
      },
      'corrupt',
    ],
  ]

  for (const [name, damage, kind] of cases) {
    it(name, () => {
      const log = writeLog(40)
      const stopAt = damage(log)
      const outcome = scanRecords(source(log.files), 0, true, null, null)
      expect(outcome.processOffset).toBe(stopAt)
      expect(outcome.damage).toMatchObject({ kind, offset: stopAt })
      // Through a window that copies (smaller than a record), the same decision for the same reason.
      expect(scanRecords(copying(log.files, 150), 0, true, null, null)).toEqual(outcome)
      // The classifier alone says the same, given the position.
      const index = Math.floor(stopAt / FILE_SIZE)
      expect(classifyDamage(source(log.files), index, stopAt % FILE_SIZE, 'x').kind).toBe(kind)
    })
  }
})

describe('scanStep', () => {
  it('eight zero bytes are the end of the data; fewer than eight zero bytes before the file end too', () => {
    const buf = Buffer.alloc(64)
    expect(scanStep(buf, 0, 64, 0, true).kind).toBe('end')
    expect(scanStep(buf, 60, 64, 60, true).kind).toBe('end')
    buf[62] = 1
    expect(scanStep(buf, 60, 64, 60, true).kind).toBe('bad')
  })
})
