// Segment files (commit log, consume queue) are named by the offset of their first byte: decimal,
// zero-padded to 20 digits. This is the only place that formats or parses those names.

export const OFFSET_NAME_LENGTH = 20
const OFFSET_NAME = /^\d{20}$/

export function formatOffsetName(offset: number): string {
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new RangeError(`segment offset must be a non-negative safe integer, got ${offset}`)
  }
  return String(offset).padStart(OFFSET_NAME_LENGTH, '0')
}

/** The start offset a segment name encodes, or null when the name is not a segment name. */
export function parseOffsetName(name: string): number | null {
  if (!OFFSET_NAME.test(name)) return null
  const offset = Number(name)
  return Number.isSafeInteger(offset) ? offset : null
}

/**
 * What follows a segment's name while it is made ahead of need on the libuv pool: a name of its
 * own, apart from `<name>.tmp`, which a creation on the JS thread uses meanwhile.
 */
export const AHEAD_SUFFIX = '.ahead.tmp'

/** A file being created (or left by an interrupted creation): loaders delete it, checkers skip it. */
export function isTempSegmentName(name: string): boolean {
  return name.endsWith('.tmp')
}

/** Why a run of segments, sorted by start offset, cannot be loaded as one queue. */
export type SegmentLayoutIssue =
  | { kind: 'misaligned'; index: number; start: number }
  | { kind: 'gap' | 'overlap'; index: number; start: number; expected: number }

/**
 * The layout rule of a segment queue: every file starts at a multiple of the file size, and each
 * starts where the previous one ends. Issues in file order (for each file: alignment, then contiguity).
 */
export function segmentLayoutIssues(starts: readonly number[], fileSize: number): SegmentLayoutIssue[] {
  const issues: SegmentLayoutIssue[] = []
  for (let i = 0; i < starts.length; i++) {
    const start = starts[i]
    if (start % fileSize !== 0) issues.push({ kind: 'misaligned', index: i, start })
    if (i > 0) {
      const expected = starts[i - 1] + fileSize
      if (start !== expected) issues.push({ kind: start > expected ? 'gap' : 'overlap', index: i, start, expected })
    }
  }
  return issues
}
