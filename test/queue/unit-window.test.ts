// The window a consume queue's recovery walk reads its units through: positioned reads of the
// real file (not its mapping), small first and doubling, and one buffer shared by every window.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { CQ_STORE_UNIT_SIZE, UnitWindow, unitOffsetIn, unitSizeIn, writeUnit } from '../../lib/store/queue/cq-unit.js'
import { tempDir } from '../helpers/tmp.js'

const UNITS = 300_000
const FILE_SIZE = UNITS * CQ_STORE_UNIT_SIZE

/** A queue file of `count` units (unit k: offset 1000 * k, size 100 + k % 7), zeros after them. */
function queueFile(count: number): string {
  const bytes = Buffer.alloc(FILE_SIZE)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  for (let k = 0; k < count; k++) writeUnit(view, k * CQ_STORE_UNIT_SIZE, 1000 * k, 100 + (k % 7), k)
  const path = join(tempDir('mqstore-unit-window-'), '00000000000000000000')
  fs.writeFileSync(path, bytes)
  return path
}

/** Every unit from the start until the first invalid one, as the walk reads them. */
function walk(window: UnitWindow): { offsets: number[]; reads: number } {
  const offsets: number[] = []
  let reads = 0
  let start = -1
  let sizesRight = true
  for (let pos = 0; pos < FILE_SIZE; pos += CQ_STORE_UNIT_SIZE) {
    const at = window.hold(pos)
    if (window.start !== start) {
      reads++
      start = window.start
    }
    const offset = unitOffsetIn(window.view, at)
    const size = unitSizeIn(window.view, at)
    if (offset < 0 || size <= 0) break
    sizesRight &&= size === 100 + (offsets.length % 7)
    offsets.push(offset)
  }
  expect(sizesRight).toBe(true)
  return { offsets, reads }
}

describe('UnitWindow', () => {
  it('reads every unit of a long queue, a page first and then doubling reads', () => {
    const path = queueFile(200_000)
    const { offsets, reads } = walk(new UnitWindow(path, FILE_SIZE))
    expect(offsets.length).toBe(200_000)
    expect(offsets[199_999]).toBe(199_999_000)
    // 4 MB of units: about a page, then 8 KiB, 16 KiB, ... up to 1 MiB a read: a handful of reads.
    expect(reads).toBeGreaterThan(5)
    expect(reads).toBeLessThan(15)
  })

  it('reads one small window for a queue of a few units', () => {
    const path = queueFile(4)
    const window = new UnitWindow(path, FILE_SIZE)
    expect(walk(window)).toEqual({ offsets: [0, 1000, 2000, 3000], reads: 1 })
    expect(window.bytes.length).toBeLessThanOrEqual(4 * 1024 + CQ_STORE_UNIT_SIZE)
  })

  it('reads its bytes again after another window used the shared buffer', () => {
    const a = new UnitWindow(queueFile(10), FILE_SIZE)
    const empty = new UnitWindow(queueFile(0), FILE_SIZE)
    expect(unitOffsetIn(a.view, a.hold(CQ_STORE_UNIT_SIZE))).toBe(1000)
    // The empty queue's zeros now fill the buffer a read into.
    expect(unitSizeIn(empty.view, empty.hold(CQ_STORE_UNIT_SIZE))).toBe(0)
    expect(unitOffsetIn(a.view, a.hold(CQ_STORE_UNIT_SIZE))).toBe(1000)
    expect(unitSizeIn(a.view, a.hold(2 * CQ_STORE_UNIT_SIZE))).toBe(102)
  })

  it('reads zeros past the end of a file shorter than the queue believes (a unit that ends the walk)', () => {
    const path = queueFile(3)
    fs.truncateSync(path, 3 * CQ_STORE_UNIT_SIZE + 8)
    const { offsets } = walk(new UnitWindow(path, FILE_SIZE))
    expect(offsets).toEqual([0, 1000, 2000])
  })

  it('reports a file it cannot read as a typed IO error that names the file, not a crash', () => {
    const path = join(tempDir('mqstore-unit-window-'), '00000000000000000000')
    const window = new UnitWindow(path, FILE_SIZE)
    expect(() => window.hold(0)).toThrow(expect.objectContaining({ code: 'IO_ERROR', message: expect.stringContaining(path) }))
  })
})
