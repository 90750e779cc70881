// Segment names and the layout rule of a segment queue.
import { describe, expect, it } from 'vitest'

import { formatOffsetName, isTempSegmentName, parseOffsetName, segmentLayoutIssues } from '../lib/store/mapped/segment-name.js'

describe('segment names', () => {
  it('20 zero-padded digits, parsed back; anything else is not a segment name', () => {
    expect(formatOffsetName(1024)).toBe('00000000000000001024')
    expect(parseOffsetName('00000000000000001024')).toBe(1024)
    expect(parseOffsetName('1024')).toBeNull()
    expect(isTempSegmentName('00000000000000001024.tmp')).toBe(true)
    expect(isTempSegmentName('00000000000000001024')).toBe(false)
  })
})

describe('segmentLayoutIssues', () => {
  it('a contiguous, aligned run has none', () => {
    expect(segmentLayoutIssues([0, 100, 200], 100)).toEqual([])
    expect(segmentLayoutIssues([], 100)).toEqual([])
  })

  it('names a misaligned start, a gap and an overlap, each at its file', () => {
    expect(segmentLayoutIssues([0, 100, 300, 350], 100)).toEqual([
      { kind: 'gap', index: 2, start: 300, expected: 200 },
      { kind: 'misaligned', index: 3, start: 350 },
      { kind: 'overlap', index: 3, start: 350, expected: 400 },
    ])
  })
})
