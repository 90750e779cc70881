// The listing of a segment folder another process changes: files added right after a listing (in
// the same step of the kernel's coarse clock, which leaves the folder's times unchanged), files
// replaced under the same name, files deleted while a descriptor is open.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { ReadOnlySegments } from '../../lib/store/sharing/read-only-segments.js'
import { tempDir } from '../helpers/tmp.js'

const name = (offset: number) => String(offset).padStart(20, '0')

describe('ReadOnlySegments', () => {
  it('sees a file added right after a listing', () => {
    const dir = tempDir()
    const segments = new ReadOnlySegments(dir)
    for (let i = 0; i < 50; i++) {
      segments.refresh()
      fs.writeFileSync(join(dir, name(i * 100)), 'x')
      segments.refresh()
      expect(segments.segments.map((s) => s.offset)).toHaveLength(i + 1)
    }
  })

  it('tells a replaced file from a deleted first one, and reads a deleted file through its open descriptor', () => {
    const dir = tempDir()
    for (const offset of [0, 100, 200]) fs.writeFileSync(join(dir, name(offset)), `file ${offset}`)
    fs.writeFileSync(join(dir, 'not-a-segment'), '')
    const segments = new ReadOnlySegments(dir)
    expect(segments.refresh()).toEqual({ changed: true, replaced: false })
    expect(segments.segmentOf(150)?.offset).toBe(100)
    expect(segments.segmentOf(-1)).toBeNull()
    const first = segments.segments[0]
    expect(segments.read(first, 0, 6).toString()).toBe('file 0')
    fs.rmSync(first.path)
    // Still open: the unlinked inode reads until the next listing drops it.
    expect(segments.read(first, 5, 1).toString()).toBe('0')
    expect(segments.refresh()).toMatchObject({ changed: true, replaced: false })
    expect(segments.segments.map((s) => s.offset)).toEqual([100, 200])
    fs.rmSync(join(dir, name(200)))
    fs.writeFileSync(join(dir, name(200)), 'new 200')
    expect(segments.refresh()).toMatchObject({ changed: true, replaced: true })
    expect(segments.read(segments.segments[1], 0, 100).toString()).toBe('new 200')
    fs.rmSync(join(dir, name(100)))
    expect(segments.refresh()).toMatchObject({ replaced: false })
    segments.close()
    expect(segments.segments).toEqual([])
  })
})
