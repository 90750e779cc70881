// The search for a valid unit after a queue's end (firstValidUnitInFile): chunks of zeros are
// passed over whole, every other chunk unit by unit, so a unit anywhere in the rest of the file is
// found, however many zeros come before it.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import {
  CQ_BLANK_UNIT_SIZE,
  CQ_STORE_UNIT_SIZE,
  firstValidUnitInFile,
  isUnitsEnd,
  unitsEnd,
  walkUnits,
  writeUnit,
} from '../../lib/store/queue/cq-unit.js'
import { tempDir } from '../helpers/tmp.js'

const UNITS = 20_000
const FILE_SIZE = UNITS * CQ_STORE_UNIT_SIZE

/** A file of zeros with the given units written at the given unit numbers. */
function fileWith(units: { at: number; offset: number; size: number }[]): string {
  const bytes = Buffer.alloc(FILE_SIZE)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  for (const unit of units) writeUnit(view, unit.at * CQ_STORE_UNIT_SIZE, unit.offset, unit.size, 7)
  const path = join(tempDir('mqstore-cq-unit-'), '00000000000000000000')
  fs.writeFileSync(path, bytes)
  return path
}

describe('firstValidUnitInFile', () => {
  it('finds nothing in a file of zeros', () => {
    expect(firstValidUnitInFile(fileWith([]), CQ_STORE_UNIT_SIZE, FILE_SIZE)).toBe(-1)
  })

  it('finds a unit behind chunks of zeros, in the first chunk, and in the last partial chunk', () => {
    // 65,520 bytes a chunk: unit 7,500 lies in the third, unit 19,999 in the last, partial one.
    for (const at of [1, 3_276, 3_277, 7_500, UNITS - 1]) {
      const file = fileWith([{ at, offset: 4096, size: 300 }])
      expect(firstValidUnitInFile(file, CQ_STORE_UNIT_SIZE, FILE_SIZE)).toBe(at * CQ_STORE_UNIT_SIZE)
    }
  })

  it('passes over bytes that are not zeros but no valid unit, and finds the valid unit after them', () => {
    // A negative size, and a negative offset: not valid, and in chunks that are not all zeros.
    const file = fileWith([
      { at: 100, offset: 4096, size: -1 },
      { at: 5_000, offset: -5, size: 300 },
      { at: 12_345, offset: 8192, size: 200 },
    ])
    expect(firstValidUnitInFile(file, CQ_STORE_UNIT_SIZE, FILE_SIZE)).toBe(12_345 * CQ_STORE_UNIT_SIZE)
    // From past it, nothing.
    expect(firstValidUnitInFile(file, 12_346 * CQ_STORE_UNIT_SIZE, FILE_SIZE)).toBe(-1)
  })
})

describe('walkUnits', () => {
  /** Units (offset, size) end to end in a view. */
  function viewOf(units: [number, number][]): DataView {
    const view = new DataView(new ArrayBuffer(units.length * CQ_STORE_UNIT_SIZE))
    units.forEach(([offset, size], k) => writeUnit(view, k * CQ_STORE_UNIT_SIZE, offset, size, 0))
    return view
  }

  it('walks valid units past blanks, carries the last end over windows, and stops at an invalid unit', () => {
    const view = viewOf([
      [0, CQ_BLANK_UNIT_SIZE],
      [100, 50],
      [150, 50],
      [0, 0],
      [300, 50],
    ])
    const walk = { lastEnd: -1, overlapAt: -1 }
    expect(walkUnits(view, 0, 2 * CQ_STORE_UNIT_SIZE, Number.POSITIVE_INFINITY, walk)).toBe(2 * CQ_STORE_UNIT_SIZE)
    expect(walk).toEqual({ lastEnd: 150, overlapAt: -1 })
    expect(walkUnits(view, 2 * CQ_STORE_UNIT_SIZE, view.byteLength, Number.POSITIVE_INFINITY, walk)).toBe(3 * CQ_STORE_UNIT_SIZE)
    expect(walk).toEqual({ lastEnd: 200, overlapAt: -1 })
  })

  it('stops at a record past the log end, and notes the first unit inside the record before it', () => {
    const view = viewOf([
      [100, 50],
      [120, 50],
      [130, 50],
      [400, 50],
    ])
    const walk = { lastEnd: -1, overlapAt: -1 }
    expect(walkUnits(view, 0, view.byteLength, 420, walk)).toBe(3 * CQ_STORE_UNIT_SIZE)
    expect(walk).toEqual({ lastEnd: 180, overlapAt: CQ_STORE_UNIT_SIZE })
  })
})

describe("unitsEnd and isUnitsEnd (a clean open finding where a queue file's units end)", () => {
  /** A buffer of `units` unit slots with the first `count` written (records of 100 bytes end to end). */
  function prefix(units: number, count: number): Buffer {
    const bytes = Buffer.alloc(units * CQ_STORE_UNIT_SIZE)
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    for (let i = 0; i < count; i++) writeUnit(view, i * CQ_STORE_UNIT_SIZE, 4096 + i * 100, 100, 7)
    return bytes
  }

  it('finds the end by bisection, and knows it for the end when told', () => {
    for (const count of [0, 1, 203, 204, 999, 1000]) {
      const buffer = prefix(1000, count)
      expect(unitsEnd(buffer, 1000)).toBe(count)
      expect(isUnitsEnd(buffer, 1000, count)).toBe(true)
      // Checked on the bytes up to the unit after it only.
      expect(isUnitsEnd(buffer.subarray(0, Math.min(buffer.length, (count + 1) * CQ_STORE_UNIT_SIZE)), 1000, count)).toBe(true)
    }
  })

  it('another unit boundary, or no boundary at all, is not the end', () => {
    const buffer = prefix(1000, 300)
    for (const guess of [0, 1, 299, 301, 1000, 1001, -5, 2.5, Number.NaN]) expect(isUnitsEnd(buffer, 1000, guess)).toBe(false)
    // Units gone from a queue's tail: the end is where they stop, not where it was.
    buffer.fill(0, 295 * CQ_STORE_UNIT_SIZE, 300 * CQ_STORE_UNIT_SIZE)
    expect(isUnitsEnd(buffer, 1000, 300)).toBe(false)
    expect(unitsEnd(buffer, 1000)).toBe(295)
  })
})
