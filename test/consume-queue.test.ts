import * as fs from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

import { formatOffsetName } from '../lib/store/mapped/segment-name.js'
import { CQ_BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE, ConsumeQueue, type CommitLogView } from '../lib/store/queue/consume-queue.js'
import {
  isBlankUnit,
  isEndUnit,
  isExtAddress,
  isValidUnit,
  queueOffsetAt,
  readUnitOffset,
  readUnitSize,
  readUnitTagsCode,
  writeUnit,
} from '../lib/store/queue/cq-unit.js'
import { tempDir } from './helpers/tmp.js'

const UNITS_PER_FILE = 10
const SIZE = CQ_STORE_UNIT_SIZE * UNITS_PER_FILE
const MSG = 100 // every fake record is 100 bytes long, record i at physical offset i * 100

/** A commit log that is only a table of store times by physical offset. */
class FakeCommitLog implements CommitLogView {
  minOffset = 0
  readonly times = new Map<number, number>()
  getMinOffset(): number {
    return this.minOffset
  }
  pickupStoreTimestamp(physicalOffset: number): number {
    return this.times.get(physicalOffset) ?? -1
  }
}

let root: string
let commitLog: FakeCommitLog
const opened: ConsumeQueue[] = []
beforeEach(() => {
  root = tempDir('mqstore-cq-')
  commitLog = new FakeCommitLog()
})
afterEach(() => {
  for (const cq of opened.splice(0)) cq.shutdown(0)
  fs.rmSync(root, { recursive: true, force: true })
})

function open(options: { readOnly?: boolean; size?: number } = {}): ConsumeQueue {
  const cq = new ConsumeQueue('TopicA', 3, root, options.size ?? SIZE, commitLog, { readOnly: options.readOnly })
  opened.push(cq)
  cq.load()
  cq.recover()
  return cq
}

/** Closes `cq` and opens the same queue again, as a restart does. */
function reopen(cq: ConsumeQueue, options: { readOnly?: boolean } = {}): ConsumeQueue {
  cq.flush(0)
  cq.shutdown(0)
  return open(options)
}

function queueDir(): string {
  return join(root, 'TopicA', '3')
}

function fileNames(): string[] {
  return fs.readdirSync(queueDir()).sort()
}

/** The tagsCode putRange gives queue offset n: negative, like many real tag hashes. */
function tag(n: number): number {
  return -(n + 1)
}

/** Puts units for queue offsets [from, to): record n at n * 100, size 100, tagsCode tag(n). */
function putRange(cq: ConsumeQueue, from: number, to: number): void {
  for (let n = from; n < to; n++) {
    expect(cq.putMessagePositionInfo(n * MSG, MSG, tag(n), n)).toBe(true)
  }
}

/** The unit for queue offset n, read through a held view. */
function unitAt(cq: ConsumeQueue, n: number): { offset: number; size: number; tagsCode: number } | null {
  const view = cq.getIndexBuffer(n)
  if (view === null) return null
  try {
    return ConsumeQueue.readUnit(view.buffer, 0)
  } finally {
    view.release()
  }
}

/** Overwrites bytes of a queue file on disk (through the file system, not the mapping). */
function patchFile(start: number, position: number, bytes: Buffer): void {
  const fd = fs.openSync(join(queueDir(), formatOffsetName(start)), 'r+')
  try {
    fs.writeSync(fd, bytes, 0, bytes.length, position)
  } finally {
    fs.closeSync(fd)
  }
}

describe('ConsumeQueue units', () => {
  it("are 20 big-endian bytes: long offset, int size, long tagsCode (two's complement)", () => {
    const cq = open({ size: SIZE * 10 })
    const cases = [
      { offset: 0, size: 1, tagsCode: 0 },
      { offset: 2 ** 32 + 5, size: 4 * 1024 * 1024, tagsCode: -1 },
      { offset: 2 ** 40 + 123_456_789, size: 300, tagsCode: -2_147_483_648 },
      { offset: 2 ** 50, size: 0x7ffffffe, tagsCode: 2_147_483_647 },
      { offset: Number.MAX_SAFE_INTEGER - 2 ** 31, size: 1000, tagsCode: -(2 ** 40) - 7 },
      { offset: Number.MAX_SAFE_INTEGER - 1000, size: 1000, tagsCode: Number.MIN_SAFE_INTEGER },
    ]
    cases.forEach((unit, n) => {
      expect(cq.putMessagePositionInfo(unit.offset, unit.size, unit.tagsCode, n)).toBe(true)
    })
    expect(cq.getMaxPhysicOffset()).toBe(Number.MAX_SAFE_INTEGER)
    cq.flush(0)

    const expected = Buffer.alloc(cases.length * CQ_STORE_UNIT_SIZE)
    cases.forEach((unit, n) => {
      const pos = n * CQ_STORE_UNIT_SIZE
      expected.writeBigInt64BE(BigInt(unit.offset), pos)
      expected.writeInt32BE(unit.size, pos + 8)
      expected.writeBigInt64BE(BigInt(unit.tagsCode), pos + 12)
    })
    const onDisk = fs.readFileSync(join(queueDir(), formatOffsetName(0)))
    expect(onDisk.length).toBe(SIZE * 10)
    expect(onDisk.subarray(0, expected.length).equals(expected)).toBe(true)
    expect(onDisk.subarray(expected.length).every((b) => b === 0)).toBe(true)

    const view = cq.getIndexBuffer(0)!
    cases.forEach((unit, n) => {
      const pos = n * CQ_STORE_UNIT_SIZE
      expect(ConsumeQueue.readOffset(view.buffer, pos)).toBe(unit.offset)
      expect(ConsumeQueue.readSize(view.buffer, pos)).toBe(unit.size)
      expect(ConsumeQueue.readTagsCode(view.buffer, pos)).toBe(unit.tagsCode)
      expect(ConsumeQueue.readUnit(view.buffer, pos)).toEqual(unit)
    })
    view.release()
  })

  it('live in <root>/<topic>/<queueId>/ in files named by logic byte offset', () => {
    const cq = open()
    putRange(cq, 0, 25)
    expect(fileNames()).toEqual([formatOffsetName(0), formatOffsetName(SIZE), formatOffsetName(SIZE * 2)])
    expect(cq.mappedFileQueue.storePath).toBe(queueDir())
    expect(cq.topic).toBe('TopicA')
    expect(cq.queueId).toBe(3)
  })

  it('refuses a file size that is not a multiple of 20 and a topic that is not a directory name', () => {
    expect(() => new ConsumeQueue('T', 0, root, 1000 + 1, commitLog)).toThrow(RangeError)
    expect(() => new ConsumeQueue('T', -1, root, SIZE, commitLog)).toThrow(RangeError)
    expect(() => new ConsumeQueue('a/b', 0, root, SIZE, commitLog)).toThrow(TypeError)
    expect(() => new ConsumeQueue('..', 0, root, SIZE, commitLog)).toThrow(TypeError)
  })
})

describe('ConsumeQueue offsets', () => {
  it('an empty queue reports 0 / 0 and no physical end', () => {
    const cq = open()
    expect(cq.getMinOffsetInQueue()).toBe(0)
    expect(cq.getMaxOffsetInQueue()).toBe(0)
    expect(cq.getMessageTotalInQueue()).toBe(0)
    expect(cq.getMaxPhysicOffset()).toBe(-1)
    expect(cq.getLastOffset()).toBe(-1)
    expect(cq.getIndexBuffer(0)).toBeNull()
  })

  it('max is the next offset to write; min follows minLogicOffset', () => {
    const cq = open()
    putRange(cq, 0, 7)
    expect(cq.getMaxOffsetInQueue()).toBe(7)
    expect(cq.getMinOffsetInQueue()).toBe(0)
    expect(cq.getMessageTotalInQueue()).toBe(7)
    expect(cq.getMaxPhysicOffset()).toBe(7 * MSG)
    expect(cq.getLastOffset()).toBe(7 * MSG)
    cq.setMinLogicOffset(3 * CQ_STORE_UNIT_SIZE)
    expect(cq.getMinLogicOffset()).toBe(60)
    expect(cq.getMinOffsetInQueue()).toBe(3)
    expect(cq.getMessageTotalInQueue()).toBe(4)
  })

  it('rolls to a new file when the last one is full', () => {
    const cq = open()
    putRange(cq, 0, UNITS_PER_FILE)
    expect(cq.mappedFileQueue.mappedFiles.length).toBe(1)
    expect(cq.mappedFileQueue.getLastMappedFile()!.isFull()).toBe(true)
    expect(cq.getMaxOffsetInQueue()).toBe(10)
    putRange(cq, UNITS_PER_FILE, 23)
    expect(cq.mappedFileQueue.mappedFiles.map((f) => f.fileFromOffset)).toEqual([0, SIZE, SIZE * 2])
    expect(cq.getMaxOffsetInQueue()).toBe(23)
    expect(cq.getLastOffset()).toBe(23 * MSG)
    for (const n of [0, 9, 10, 19, 20, 22]) expect(unitAt(cq, n)).toEqual({ offset: n * MSG, size: MSG, tagsCode: tag(n) })
    expect(cq.rollNextFile(0)).toBe(10)
    expect(cq.rollNextFile(9)).toBe(10)
    expect(cq.rollNextFile(10)).toBe(20)
    expect(cq.rollNextFile(23)).toBe(30)
  })
})

describe('ConsumeQueue puts', () => {
  it('a replayed unit is written once', () => {
    const cq = open()
    putRange(cq, 0, 5)
    // Same unit again: its record ends at or below maxPhysicOffset.
    expect(cq.putMessagePositionInfo(4 * MSG, MSG, tag(4), 4)).toBe(true)
    expect(cq.putMessagePositionInfo(2 * MSG, MSG, tag(2), 2)).toBe(true)
    expect(cq.getMaxOffsetInQueue()).toBe(5)
    // A queue offset already written is skipped even when the record looks new.
    expect(cq.putMessagePositionInfo(50 * MSG, MSG, 0, 3)).toBe(true)
    expect(cq.getMaxOffsetInQueue()).toBe(5)
    expect(unitAt(cq, 3)).toEqual({ offset: 3 * MSG, size: MSG, tagsCode: tag(3) })
    expect(cq.getMaxPhysicOffset()).toBe(5 * MSG)
    expect(cq.orderingErrors).toBe(0)
  })

  it('replays after a restart are still written once', () => {
    let cq = open()
    putRange(cq, 0, 15)
    cq = reopen(cq)
    expect(cq.getMaxPhysicOffset()).toBe(15 * MSG)
    putRange(cq, 0, 15)
    expect(cq.getMaxOffsetInQueue()).toBe(15)
    putRange(cq, 15, 16)
    expect(cq.getMaxOffsetInQueue()).toBe(16)
  })

  it('a gap in queue offsets is counted, filled with blanks, and the unit lands at its own queue offset', () => {
    const cq = open()
    putRange(cq, 0, 3)
    expect(cq.putMessagePositionInfo(9 * MSG, MSG, 9, 9)).toBe(true)
    expect(cq.orderingErrors).toBe(1)
    expect(cq.getMaxOffsetInQueue()).toBe(10)
    for (let q = 3; q < 9; q++) expect(unitAt(cq, q)).toEqual({ offset: 0, size: CQ_BLANK_UNIT_SIZE, tagsCode: 0 })
    expect(unitAt(cq, 9)).toEqual({ offset: 9 * MSG, size: MSG, tagsCode: 9 })
    // Blanks say nothing about the log: the next record still counts from the real unit.
    expect(cq.getMaxPhysicOffset()).toBe(10 * MSG)
  })

  it('a gap that no missing records could fill (a damaged queue offset) leaves the unit out', () => {
    const cq = open()
    putRange(cq, 0, 3)
    // Two million records cannot lie between the record at 200 and this one at 300.
    expect(cq.putMessagePositionInfo(3 * MSG, MSG, 3, 2_000_000)).toBe(true)
    expect(cq.getMaxOffsetInQueue()).toBe(3)
    expect(fileNames()).toHaveLength(1)
    expect(cq.putMessagePositionInfo(3 * MSG, MSG, 3, 3)).toBe(true)
    expect(unitAt(cq, 3)).toEqual({ offset: 3 * MSG, size: MSG, tagsCode: 3 })
  })

  it('a gap that spans files fills them with blanks', () => {
    const cq = open()
    putRange(cq, 0, 1)
    const unitsPerFile = SIZE / CQ_STORE_UNIT_SIZE
    const far = 2 * unitsPerFile + 1
    expect(cq.putMessagePositionInfo(far * MSG, MSG, 1, far)).toBe(true)
    expect(cq.getMaxOffsetInQueue()).toBe(far + 1)
    expect(unitAt(cq, unitsPerFile)).toEqual({ offset: 0, size: CQ_BLANK_UNIT_SIZE, tagsCode: 0 })
    expect(unitAt(cq, far)).toEqual({ offset: far * MSG, size: MSG, tagsCode: 1 })
  })

  it('the first-ever file at a non-zero queue offset is pre-filled with blanks', () => {
    let cq = open()
    commitLog.minOffset = 5000
    expect(cq.putMessagePositionInfo(5000, MSG, 7, 13)).toBe(true)
    expect(fileNames()).toEqual([formatOffsetName(SIZE)])
    expect(cq.getMinLogicOffset()).toBe(13 * CQ_STORE_UNIT_SIZE)
    expect(cq.getMinOffsetInQueue()).toBe(13)
    expect(cq.getMaxOffsetInQueue()).toBe(14)
    expect(cq.getMessageTotalInQueue()).toBe(1)
    expect(cq.mappedFileQueue.flushedWhere).toBe(13 * CQ_STORE_UNIT_SIZE)
    expect(cq.mappedFileQueue.committedWhere).toBe(13 * CQ_STORE_UNIT_SIZE)
    expect(cq.getIndexBuffer(12)).toBeNull()
    expect(unitAt(cq, 13)).toEqual({ offset: 5000, size: MSG, tagsCode: 7 })
    expect(cq.putMessagePositionInfo(5100, MSG, 8, 14)).toBe(true)

    const blank = Buffer.alloc(CQ_STORE_UNIT_SIZE)
    blank.writeInt32BE(CQ_BLANK_UNIT_SIZE, 8)
    cq.flush(0)
    const onDisk = fs.readFileSync(join(queueDir(), formatOffsetName(SIZE)))
    for (let i = 0; i < 3; i++) {
      expect(onDisk.subarray(i * 20, i * 20 + 20).equals(blank)).toBe(true)
    }

    // After a restart the blanks count as data for recovery but not as the physical end, and
    // correcting against the commit log's min offset restores the min.
    cq = reopen(cq)
    expect(cq.getMaxOffsetInQueue()).toBe(15)
    expect(cq.getMaxPhysicOffset()).toBe(5200)
    expect(cq.getMinOffsetInQueue()).toBe(0)
    cq.correctMinOffset(commitLog.getMinOffset())
    expect(cq.getMinOffsetInQueue()).toBe(13)
  })

  it('a first file pre-filled with blanks only does not take the blanks as the physical end', () => {
    let cq = open()
    expect(cq.putMessagePositionInfo(5000, MSG, 7, 13)).toBe(true)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(SIZE, 3 * CQ_STORE_UNIT_SIZE, Buffer.alloc(CQ_STORE_UNIT_SIZE)) // the real unit is torn
    cq = open()
    expect(cq.getMaxOffsetInQueue()).toBe(13)
    expect(cq.getMaxPhysicOffset()).toBe(-1)
    expect(cq.putMessagePositionInfo(5000, MSG, 7, 13)).toBe(true)
    expect(cq.getMaxOffsetInQueue()).toBe(14)
  })

  it('a shut-down queue refuses puts; a destroyed one starts empty', () => {
    let cq = open()
    putRange(cq, 0, 12)
    cq.shutdown(0)
    expect(() => cq.putMessagePositionInfo(12 * MSG, MSG, 0, 12)).toThrow(expect.objectContaining({ code: 'STORE_CLOSED' }))
    cq = open()
    expect(cq.getMaxOffsetInQueue()).toBe(12)
    cq.destroy()
    expect(fs.existsSync(queueDir())).toBe(false)
    expect(cq.getMaxOffsetInQueue()).toBe(0)
    expect(cq.getMaxPhysicOffset()).toBe(-1)
    putRange(cq, 0, 2)
    expect(cq.getMaxOffsetInQueue()).toBe(2)
    expect(fileNames()).toEqual([formatOffsetName(0)])
  })
})

describe('ConsumeQueue recovery', () => {
  it('finds the end after a reopen', () => {
    let cq = open()
    putRange(cq, 0, 27)
    cq = reopen(cq)
    expect(cq.getMaxOffsetInQueue()).toBe(27)
    expect(cq.getMaxPhysicOffset()).toBe(27 * MSG)
    expect(cq.mappedFileQueue.flushedWhere).toBe(27 * CQ_STORE_UNIT_SIZE)
    expect(cq.mappedFileQueue.getLastMappedFile()!.wrotePosition).toBe(7 * CQ_STORE_UNIT_SIZE)
    putRange(cq, 27, 31)
    expect(unitAt(cq, 30)).toEqual({ offset: 30 * MSG, size: MSG, tagsCode: tag(30) })
  })

  it('stops at a torn last unit', () => {
    let cq = open()
    putRange(cq, 0, 17)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(SIZE, 6 * CQ_STORE_UNIT_SIZE, Buffer.alloc(CQ_STORE_UNIT_SIZE))
    cq = open()
    expect(cq.getMaxOffsetInQueue()).toBe(16)
    expect(cq.getMaxPhysicOffset()).toBe(16 * MSG)
    // The dispatcher puts the lost unit again.
    putRange(cq, 16, 17)
    expect(cq.getMaxOffsetInQueue()).toBe(17)
  })

  it('a torn unit in the last slot of a full file ends the data there', () => {
    let cq = open()
    putRange(cq, 0, 10)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(0, SIZE - CQ_STORE_UNIT_SIZE, Buffer.alloc(CQ_STORE_UNIT_SIZE))
    cq = open()
    expect(cq.getMaxOffsetInQueue()).toBe(9)
    expect(cq.getMaxPhysicOffset()).toBe(9 * MSG)
  })

  it('keeps a zero-filled tail file empty, at the end of the data', () => {
    let cq = open()
    putRange(cq, 0, 25)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(SIZE * 2, 0, Buffer.alloc(SIZE))
    cq = open()
    expect(cq.getMaxOffsetInQueue()).toBe(20)
    expect(cq.getMaxPhysicOffset()).toBe(20 * MSG)
    expect(fileNames()).toEqual([formatOffsetName(0), formatOffsetName(SIZE), formatOffsetName(SIZE * 2)])
    putRange(cq, 20, 22)
    expect(unitAt(cq, 21)).toEqual({ offset: 21 * MSG, size: MSG, tagsCode: tag(21) })
  })

  it('scans only the last three files and deletes files after the end', () => {
    let cq = open()
    putRange(cq, 0, 45) // five files, the last half full
    cq.flush(0)
    cq.shutdown(0)
    // Zero the fourth and fifth files: the data ends at the start of the fourth; the fifth goes.
    patchFile(SIZE * 3, 0, Buffer.alloc(SIZE))
    patchFile(SIZE * 4, 0, Buffer.alloc(SIZE))
    cq = open()
    expect(cq.getMaxOffsetInQueue()).toBe(30)
    expect(cq.getMaxPhysicOffset()).toBe(30 * MSG)
    expect(fileNames()).toEqual([0, 1, 2, 3].map((i) => formatOffsetName(SIZE * i)))
  })

  it('read-only: finds the end without deleting or writing anything', () => {
    let cq = open()
    putRange(cq, 0, 45)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(SIZE * 3, 0, Buffer.alloc(SIZE))
    const before = fileNames()
    cq = open({ readOnly: true })
    expect(cq.getMaxOffsetInQueue()).toBe(30)
    expect(fileNames()).toEqual(before)
    expect(unitAt(cq, 29)).toEqual({ offset: 29 * MSG, size: MSG, tagsCode: tag(29) })
    expect(() => cq.putMessagePositionInfo(45 * MSG, MSG, 0, 30)).toThrow(TypeError)
    expect(() => cq.truncateDirtyLogicFiles(0)).toThrow(TypeError)
    expect(() => cq.destroy()).toThrow(TypeError)
    expect(fileNames()).toEqual(before)
  })

  it('a missing directory recovers to an empty queue', () => {
    const cq = open()
    expect(fs.existsSync(queueDir())).toBe(false)
    expect(cq.getMaxOffsetInQueue()).toBe(0)
  })
})

describe('ConsumeQueue truncation', () => {
  it('truncateDirtyLogicFiles cuts inside a file and deletes the files after it', () => {
    const cq = open()
    putRange(cq, 0, 25)
    cq.truncateDirtyLogicFiles(12 * MSG)
    expect(fileNames()).toEqual([formatOffsetName(0), formatOffsetName(SIZE)])
    expect(cq.getMaxOffsetInQueue()).toBe(12)
    expect(cq.getMaxPhysicOffset()).toBe(12 * MSG)
    expect(cq.getLastOffset()).toBe(12 * MSG)
    expect(cq.getIndexBuffer(12)).toBeNull()
    // Dispatch resumes at the cut.
    putRange(cq, 12, 14)
    expect(cq.getMaxOffsetInQueue()).toBe(14)
    expect(unitAt(cq, 13)).toEqual({ offset: 13 * MSG, size: MSG, tagsCode: tag(13) })
  })

  it('a cut at a record inside a unit keeps the units that start before it', () => {
    const cq = open()
    putRange(cq, 0, 25)
    cq.truncateDirtyLogicFiles(12 * MSG + 1)
    expect(cq.getMaxOffsetInQueue()).toBe(13)
    expect(cq.getMaxPhysicOffset()).toBe(13 * MSG)
  })

  it('a cut at a file boundary removes that whole file', () => {
    const cq = open()
    putRange(cq, 0, 25)
    cq.truncateDirtyLogicFiles(10 * MSG)
    expect(fileNames()).toEqual([formatOffsetName(0)])
    expect(cq.getMaxOffsetInQueue()).toBe(10)
    expect(cq.mappedFileQueue.getLastMappedFile()!.isFull()).toBe(true)
    putRange(cq, 10, 11)
    expect(fileNames()).toEqual([formatOffsetName(0), formatOffsetName(SIZE)])
  })

  it('reaches through an empty tail file into the file before it', () => {
    let cq = open()
    putRange(cq, 0, 25)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(SIZE * 2, 0, Buffer.alloc(SIZE))
    cq = open()
    expect(cq.getMaxOffsetInQueue()).toBe(20)
    cq.truncateDirtyLogicFiles(15 * MSG)
    expect(cq.getMaxOffsetInQueue()).toBe(15)
    expect(cq.getMaxPhysicOffset()).toBe(15 * MSG)
    expect(cq.mappedFileQueue.flushedWhere).toBe(15 * CQ_STORE_UNIT_SIZE)
  })

  it('a cut below everything empties the queue; the max physical offset is the cut', () => {
    const cq = open()
    putRange(cq, 0, 25)
    cq.truncateDirtyLogicFiles(0)
    expect(cq.mappedFileQueue.mappedFiles.length).toBe(0)
    expect(cq.getMaxOffsetInQueue()).toBe(0)
    expect(cq.getMaxPhysicOffset()).toBe(0)
  })

  it('a cut past the end changes nothing', () => {
    const cq = open()
    putRange(cq, 0, 25)
    cq.truncateDirtyLogicFiles(1_000_000)
    expect(cq.getMaxOffsetInQueue()).toBe(25)
    expect(cq.getMaxPhysicOffset()).toBe(25 * MSG)
  })
})

describe('ConsumeQueue expiry', () => {
  it('correctMinOffset moves min to the first unit at or above the commit-log min', () => {
    const cq = open()
    putRange(cq, 0, 25)
    cq.correctMinOffset(3 * MSG + 50)
    expect(cq.getMinOffsetInQueue()).toBe(4)
    // No unit of the first file qualifies: min is unchanged.
    cq.correctMinOffset(15 * MSG)
    expect(cq.getMinOffsetInQueue()).toBe(4)
  })

  it('deleteExpiredFile deletes leading files whose last unit is below minPhy, never the last', () => {
    const cq = open()
    putRange(cq, 0, 35)
    expect(cq.deleteExpiredFile(12 * MSG + 50)).toBe(1)
    expect(fileNames()).toEqual([1, 2, 3].map((i) => formatOffsetName(SIZE * i)))
    expect(cq.getMinOffsetInQueue()).toBe(13)
    expect(cq.getIndexBuffer(12)).toBeNull()
    expect(unitAt(cq, 13)).toEqual({ offset: 13 * MSG, size: MSG, tagsCode: tag(13) })
    expect(cq.getMessageTotalInQueue()).toBe(35 - 13)

    // Everything is below minPhy: all but the last file go, and the queue is empty (min = max),
    // so reads answer OFFSET_TOO_SMALL instead of pointing at deleted records.
    expect(cq.deleteExpiredFile(10_000 * MSG)).toBe(2)
    expect(fileNames()).toEqual([formatOffsetName(SIZE * 3)])
    expect(cq.getMinOffsetInQueue()).toBe(35)
    expect(cq.getMaxOffsetInQueue()).toBe(35)
    expect(cq.getMessageTotalInQueue()).toBe(0)
    expect(cq.deleteExpiredFile(10_000 * MSG)).toBe(0)
  })

  it('a file still read is kept until its reader lets go', () => {
    const cq = open()
    putRange(cq, 0, 25)
    const view = cq.getIndexBuffer(2)!
    expect(cq.deleteExpiredFile(25 * MSG)).toBe(0)
    view.release()
    expect(cq.deleteExpiredFile(25 * MSG)).toBe(2)
    expect(fileNames()).toEqual([formatOffsetName(SIZE * 2)])
  })
})

describe('ConsumeQueue.getIndexBuffer', () => {
  it("returns the current file's units only, and null below min or at max", () => {
    const cq = open()
    putRange(cq, 0, 15)
    const head = cq.getIndexBuffer(7)!
    expect(head.startOffset).toBe(7 * CQ_STORE_UNIT_SIZE)
    expect(head.size).toBe(3 * CQ_STORE_UNIT_SIZE)
    expect(ConsumeQueue.readOffset(head.buffer, 2 * CQ_STORE_UNIT_SIZE)).toBe(9 * MSG)
    const tail = cq.getIndexBuffer(10)!
    expect(tail.size).toBe(5 * CQ_STORE_UNIT_SIZE)
    expect(ConsumeQueue.readTagsCode(tail.buffer, 4 * CQ_STORE_UNIT_SIZE)).toBe(tag(14))
    expect(head.file!.getRefCount()).toBe(2)
    head.release()
    tail.release()
    expect(cq.mappedFileQueue.mappedFiles.every((f) => f.getRefCount() === 1)).toBe(true)

    expect(cq.getIndexBuffer(15)).toBeNull()
    expect(cq.getIndexBuffer(16)).toBeNull()
    cq.setMinLogicOffset(5 * CQ_STORE_UNIT_SIZE)
    expect(cq.getIndexBuffer(4)).toBeNull()
    expect(cq.getIndexBuffer(5)).not.toBeNull()
    cq.getIndexBuffer(5)?.release()
  })

  it('at max with a full last file returns null', () => {
    const cq = open()
    putRange(cq, 0, 20)
    expect(cq.getIndexBuffer(20)).toBeNull()
    const last = cq.getIndexBuffer(19)!
    expect(last.size).toBe(CQ_STORE_UNIT_SIZE)
    last.release()
  })
})

describe('ConsumeQueue.getOffsetInQueueByTime', () => {
  /** Units 0..count-1, record n stored at time 1000 + 10n. */
  function timed(cq: ConsumeQueue, count: number): void {
    for (let n = 0; n < count; n++) commitLog.times.set(n * MSG, 1000 + 10 * n)
    putRange(cq, 0, count)
  }

  it('returns the unit whose store time is nearest', () => {
    const cq = open({ size: SIZE * 10 })
    timed(cq, 40)
    expect(cq.getOffsetInQueueByTime(1000)).toBe(0)
    expect(cq.getOffsetInQueueByTime(1230)).toBe(23)
    expect(cq.getOffsetInQueueByTime(1234)).toBe(23)
    expect(cq.getOffsetInQueueByTime(1236)).toBe(24)
    expect(cq.getOffsetInQueueByTime(1235)).toBe(23) // a tie goes to the earlier unit
    expect(cq.getOffsetInQueueByTime(0)).toBe(0)
    expect(cq.getOffsetInQueueByTime(1390)).toBe(39)
    expect(cq.getOffsetInQueueByTime(99_999)).toBe(39)
  })

  it('an empty queue gives 0', () => {
    const cq = open()
    expect(cq.getOffsetInQueueByTime(Date.now())).toBe(0)
  })

  it('skips units below the commit-log min offset and below the queue min', () => {
    const cq = open({ size: SIZE * 10 })
    timed(cq, 40)
    commitLog.minOffset = 10 * MSG
    expect(cq.getOffsetInQueueByTime(0)).toBe(10)
    expect(cq.getOffsetInQueueByTime(1050)).toBe(10)
    expect(cq.getOffsetInQueueByTime(1200)).toBe(20)
    commitLog.minOffset = 0
    cq.setMinLogicOffset(30 * CQ_STORE_UNIT_SIZE)
    expect(cq.getOffsetInQueueByTime(0)).toBe(30)
    // Every unit of the file is below the commit-log min: the degenerate answer (start - 1) / 20.
    commitLog.minOffset = 1_000_000
    expect(cq.getOffsetInQueueByTime(1200)).toBe(0)
  })

  it('searches one file, chosen by modification time', () => {
    const cq = open()
    timed(cq, 25) // files [0..9], [10..19], [20..24]
    cq.flush(0)
    const files = cq.mappedFileQueue.mappedFiles
    const base = Date.now() / 1000 - 3600
    files.forEach((file, i) => fs.utimesSync(file.fileName, base + i * 60, base + i * 60))
    // The middle file is the first modified at or after this instant, and its records are all
    // older: the answer is its last unit, though later files hold nearer ones.
    const middleTime = (base + 60) * 1000
    expect(cq.getOffsetInQueueByTime(middleTime - 1000)).toBe(19)
    // Every file was modified after this instant: the search stays in the first file, so unit 9
    // wins over the nearer unit 12.
    expect(cq.getOffsetInQueueByTime(1125)).toBe(9)
    // Past every file's time: the last file.
    expect(cq.getOffsetInQueueByTime(Date.now() + 1000)).toBe(24)
    // A file whose units are all below the commit-log min gives (start - 1) / 20.
    commitLog.minOffset = 1_000_000
    expect(cq.getOffsetInQueueByTime(middleTime - 1000)).toBe(9)
  })

  it('an unreadable record gives 0', () => {
    const cq = open({ size: SIZE * 10 })
    timed(cq, 10)
    commitLog.times.delete(4 * MSG)
    expect(cq.getOffsetInQueueByTime(1040)).toBe(0)
  })
})

describe('ConsumeQueue flush', () => {
  it('flush reports whether the flush mark moved', async () => {
    const cq = open()
    putRange(cq, 0, 3)
    expect(cq.flush(0)).toBe(false)
    expect(cq.mappedFileQueue.flushedWhere).toBe(3 * CQ_STORE_UNIT_SIZE)
    expect(cq.flush(0)).toBe(true)
    putRange(cq, 3, 4)
    await expect(cq.flushAsync(0)).resolves.toBe(false)
    expect(cq.mappedFileQueue.flushedWhere).toBe(4 * CQ_STORE_UNIT_SIZE)
    // With flushLeastPages > 0 nothing this small is flushed.
    putRange(cq, 4, 5)
    expect(cq.flush(2)).toBe(true)
  })
})

describe('ConsumeQueue.recoverClean (after a clean shutdown)', () => {
  for (const count of [0, 1, 9, 10, 11, 25, 30]) {
    it(`finds the same end by bisection as recover() scans, with ${count} units`, () => {
      const cq = open()
      putRange(cq, 0, count)
      cq.flush(0)
      const scanned = reopen(cq)
      scanned.recover()
      const expected = [scanned.getMaxOffsetInQueue(), scanned.getMaxPhysicOffset()]
      const bisected = reopen(scanned)
      expect(bisected.recoverClean()).toBe(true)
      expect([bisected.getMaxOffsetInQueue(), bisected.getMaxPhysicOffset()]).toEqual(expected)
    })
  }

  it('refuses a last file whose end is not followed by zeros (a torn unit)', () => {
    const cq = open()
    putRange(cq, 0, 25)
    cq.flush(0)
    cq.shutdown(0)
    const last = join(queueDir(), fileNames().at(-1)!)
    const fd = fs.openSync(last, 'r+')
    fs.writeSync(fd, Buffer.alloc(4), 0, 4, 20 * 2 + 8) // the size of unit 22 of 25 zeroed
    fs.closeSync(fd)
    const again = open()
    expect(again.recoverClean()).toBe(false)
    again.recover()
    expect(again.getMaxOffsetInQueue()).toBe(22)
  })
})

describe('the 20-byte unit codec', () => {
  it('writes and reads every field, negative tags codes and offsets past 2^32 included', () => {
    const buf = Buffer.alloc(40)
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
    writeUnit(view, 20, 2 ** 40 + 3, 4 * 1024 * 1024, -2)
    expect([readUnitOffset(buf, 20), readUnitSize(buf, 20), readUnitTagsCode(buf, 20)]).toEqual([2 ** 40 + 3, 4 * 1024 * 1024, -2])
    expect(buf.readBigInt64BE(20)).toBe(2n ** 40n + 3n)
    expect(queueOffsetAt(20)).toBe(1)
  })

  it('validity: data while offset >= 0 and size > 0; a pre-fill blank is valid; zeros end the data', () => {
    expect(isValidUnit(0, 1)).toBe(true)
    expect(isValidUnit(-1, 1)).toBe(false)
    expect(isValidUnit(5, 0)).toBe(false)
    expect(isValidUnit(0, CQ_BLANK_UNIT_SIZE) && isBlankUnit(0, CQ_BLANK_UNIT_SIZE)).toBe(true)
    expect(isBlankUnit(1, CQ_BLANK_UNIT_SIZE)).toBe(false)
    expect(isEndUnit(0, 0, 0)).toBe(true)
    expect(isEndUnit(0, 0, 1)).toBe(false)
    expect(isExtAddress(-2147483649)).toBe(true)
    expect(isExtAddress(-2147483648)).toBe(false)
  })
})

describe('ConsumeQueue load damage (damaged, not short)', () => {
  function recovered(logEnd?: number): ConsumeQueue {
    const cq = new ConsumeQueue('TopicA', 3, root, SIZE, commitLog)
    opened.push(cq)
    cq.load()
    cq.recover(logEnd)
    return cq
  }

  it('a clean run of units followed by zeros is not damage', () => {
    const cq = open()
    putRange(cq, 0, 5)
    cq.flush(0)
    cq.shutdown(0)
    expect(recovered(5 * MSG).loadDamage).toBeNull()
  })

  it('a last unit that is not zeros yet not valid (damaged or torn) is damage', () => {
    const cq = open()
    putRange(cq, 0, 5)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(0, 4 * CQ_STORE_UNIT_SIZE + 8, Buffer.from([0x80])) // a negative size
    const again = recovered(5 * MSG)
    expect(again.loadDamage).toMatch(/stop at queue offset 4, at a unit that is not zeros/)
  })

  it('a last unit pointing past the end of the commit log files is damage', () => {
    const cq = open()
    putRange(cq, 0, 5)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(0, 4 * CQ_STORE_UNIT_SIZE + 2, Buffer.from([0x01])) // offset += 2^40
    expect(recovered(5 * MSG).loadDamage).toMatch(/stop at queue offset 4, at a unit that is not zeros/)
    expect(recovered().loadDamage).toBeNull() // without the bound it is a valid unit (Q2 cuts it)
  })

  it('a bad unit with valid units after it, or a unit inside the record before it, is damage', () => {
    const cq = open()
    putRange(cq, 0, 5)
    cq.flush(0)
    cq.shutdown(0)
    patchFile(0, 2 * CQ_STORE_UNIT_SIZE, Buffer.alloc(CQ_STORE_UNIT_SIZE))
    expect(recovered(5 * MSG).loadDamage).toMatch(/stop at queue offset 2 but a unit at queue offset 3 follows/)
    const bytes = Buffer.alloc(12)
    bytes.writeBigInt64BE(BigInt(MSG + 10))
    bytes.writeInt32BE(MSG, 8)
    patchFile(0, 2 * CQ_STORE_UNIT_SIZE, bytes) // unit 2 starts inside record 1
    expect(recovered(5 * MSG).loadDamage).toMatch(/queue offset 2 points into the record before it/)
  })

  it('names the unit inside the record before it far into a large file (a later window of the walk)', () => {
    const units = 2_000
    const big = open({ size: units * CQ_STORE_UNIT_SIZE })
    putRange(big, 0, 1_500)
    big.flush(0)
    big.shutdown(0)
    const bytes = Buffer.alloc(12)
    bytes.writeBigInt64BE(BigInt(1_233 * MSG + 10))
    bytes.writeInt32BE(MSG, 8)
    patchFile(0, 1_234 * CQ_STORE_UNIT_SIZE, bytes) // unit 1234 starts inside record 1233
    const again = new ConsumeQueue('TopicA', 3, root, units * CQ_STORE_UNIT_SIZE, commitLog)
    opened.push(again)
    again.load()
    again.recover(1_500 * MSG)
    expect(again.loadDamage).toMatch(/queue offset 1234 points into the record before it/)
    expect(again.getMaxOffsetInQueue()).toBe(1_500)
  })
})
